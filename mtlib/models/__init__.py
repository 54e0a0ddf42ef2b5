"""Whole models built from mtlib's attention and blocks: BERT, GPT, ViT, T5 and BART.

Each file is one model, readable in one sitting: a config dataclass, the module, and a
``from_hf`` that loads a Hugging Face ``transformers`` model of the same architecture through
:func:`mtlib.loading.load_weights` (a table of names, transposes and shape checks). mtlib never
imports ``transformers``: ``from_hf`` only reads the model's ``state_dict()`` and ``config``.

- :mod:`mtlib.models.bert`  encoder-only, masked-LM pretraining and the 80/10/10 rule (chapter 9)
- :mod:`mtlib.models.gpt`   decoder-only, sampling and the KV cache (chapters 10 and 12)
- :mod:`mtlib.models.vit`   patches, class token, attention rollout (chapter 11)
- :mod:`mtlib.models.t5`    text-to-text encoder-decoder, RMSNorm, relative position bias (chapter 14)
- :mod:`mtlib.models.bart`  denoising encoder-decoder, post-norm blocks, learned positions (chapter 14)
- :mod:`mtlib.models.transformer_xl`  segment-level recurrence and relative attention (chapter 15;
  no ``from_hf``: ``transformers`` deprecated its Transformer-XL in 4.x and 5.x no longer has it)
"""

from mtlib.models.bart import BART, BARTConfig
from mtlib.models.bert import (
    BERT,
    BERTConfig,
    BERTForMaskedLM,
    BERTForSequenceClassification,
    mask_tokens,
)
from mtlib.models.gpt import GPT, GPTConfig
from mtlib.models.t5 import T5, T5Config
from mtlib.models.transformer_xl import TransformerXL, TransformerXLConfig
from mtlib.models.vit import PatchEmbedding, ViT, ViTConfig, attention_rollout

__all__ = [
    "BART",
    "BARTConfig",
    "BERT",
    "BERTConfig",
    "BERTForMaskedLM",
    "BERTForSequenceClassification",
    "mask_tokens",
    "GPT",
    "GPTConfig",
    "PatchEmbedding",
    "ViT",
    "ViTConfig",
    "attention_rollout",
    "T5",
    "T5Config",
    "TransformerXL",
    "TransformerXLConfig",
]
