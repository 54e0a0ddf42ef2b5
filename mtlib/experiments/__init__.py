"""Experiments too long for a notebook: each trains its models from a script and writes a small
result table that a chapter loads, re-checks one entry of live, and discusses.

- :mod:`mtlib.experiments.extrapolation`  chapter 6: length extrapolation of positional encodings
- :mod:`mtlib.experiments.translation`  chapter 8: numbers to words, its checkpoint and the bugs
"""
