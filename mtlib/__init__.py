"""mtlib: the small PyTorch library that every chapter of the book imports.

One concept per module, in the order the book introduces them:

- :mod:`mtlib.utils`       seeding, device choice, rounding helpers
- :mod:`mtlib.viz`         attention heatmaps and widget explorers with static fallbacks
- :mod:`mtlib.exercises`   self-check functions for the exercises, one module per chapter
- :mod:`mtlib.attention`   scaled dot-product, multi-head and additive attention
- :mod:`mtlib.masks`       causal and padding masks, conversions from PyTorch's conventions
- :mod:`mtlib.positional`  sinusoidal, learned, relative, rotary and ALiBi positions
- :mod:`mtlib.blocks`      feed-forward, encoder and decoder blocks
- :mod:`mtlib.transformer` encoder, decoder, the seq2seq Transformer and decoding
- :mod:`mtlib.train`       a small fit loop: schedules, clipping, label smoothing, history
- :mod:`mtlib.loading`     weights from PyTorch and Hugging Face by a table of names
- :mod:`mtlib.models`      BERT, GPT and ViT built from the blocks, with ``from_hf`` loading
- :mod:`mtlib.distributed` process groups from torchrun's environment, sharding, rank-0 I/O
- :mod:`mtlib.data`        synthetic tasks, tokenizers, corpora and images, all offline
- :mod:`mtlib.experiments` the long experiments behind the chapters' checkpoints
- :mod:`mtlib.bench`       ``python -m mtlib.bench``: the speed and memory tables
- :mod:`mtlib.assign`      ``python -m mtlib.assign nbgrader``: an nbgrader course from the chapters

``import mtlib`` makes every module available (``mtlib.attention.MultiHeadAttention``), and the
main names are importable from the top: ``from mtlib import MultiHeadAttention, Transformer``.
"""

from mtlib import (
    attention,
    blocks,
    data,
    exercises,
    loading,
    masks,
    models,
    positional,
    train,
    transformer,
    utils,
)
from mtlib.attention import (
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from mtlib.blocks import BlockConfig, DecoderBlock, EncoderBlock, FeedForward
from mtlib.masks import causal_mask, padding_mask
from mtlib.positional import (
    LearnedEncoding,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalEncoding,
)
from mtlib.transformer import Transformer, TransformerConfig, beam_search, greedy_decode

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "attention",
    "blocks",
    "data",
    "exercises",
    "loading",
    "masks",
    "models",
    "positional",
    "train",
    "transformer",
    "utils",
    "AdditiveAttention",
    "BlockConfig",
    "DecoderBlock",
    "EncoderBlock",
    "FeedForward",
    "KVCache",
    "LearnedEncoding",
    "MultiHeadAttention",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalEncoding",
    "Transformer",
    "TransformerConfig",
    "beam_search",
    "causal_mask",
    "greedy_decode",
    "padding_mask",
    "scaled_dot_product_attention",
]
