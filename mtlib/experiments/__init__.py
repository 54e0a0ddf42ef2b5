"""Experiments too long for a notebook: each trains its models from a script and writes a small
result table that a chapter loads, re-checks one entry of live, and discusses.

- :mod:`mtlib.experiments.extrapolation`  chapter 6: length extrapolation of positional encodings
- :mod:`mtlib.experiments.translation`  chapter 8: numbers to words, its checkpoint and the bugs
- :mod:`mtlib.experiments.bert_mlm`  chapter 9: masked-LM pretraining, fine-tuning, distillation
- :mod:`mtlib.experiments.char_lm`  chapter 10: a character-level GPT on Python's docs
- :mod:`mtlib.experiments.digits`  chapter 11: ViT, CNN and MLP on the digits, data-size curves
- :mod:`mtlib.experiments.ddp`  chapter 13: the torchrun worker (DDP, ZeRO, FSDP2) and its launcher
"""
