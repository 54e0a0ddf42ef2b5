"""mtlib: the small PyTorch library that every chapter of the book imports.

One concept per module, in the order the book introduces them:

- :mod:`mtlib.utils`      seeding, device choice, rounding helpers
- :mod:`mtlib.viz`        attention heatmaps and widget explorers with static fallbacks
- :mod:`mtlib.exercises`  self-check functions for the exercises
- :mod:`mtlib.attention`  scaled dot-product, multi-head and additive attention
- :mod:`mtlib.masks`      causal and padding masks, conversions from PyTorch's conventions
- :mod:`mtlib.positional` sinusoidal, learned, relative, rotary and ALiBi positions
- :mod:`mtlib.blocks`     feed-forward, encoder and decoder blocks
- :mod:`mtlib.transformer` encoder, decoder, the seq2seq Transformer and decoding
- :mod:`mtlib.data`       synthetic tasks, generated offline
- :mod:`mtlib.bench`      ``python -m mtlib.bench attention``: the speed and memory tables
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
