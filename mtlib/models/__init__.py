"""Whole models built from mtlib's attention and blocks: BERT, GPT and ViT.

Each file is one model, readable in one sitting: a config dataclass, the module, and a
``from_hf`` that loads a Hugging Face ``transformers`` model of the same architecture through
:func:`mtlib.loading.load_weights` (a table of names, transposes and shape checks). mtlib never
imports ``transformers``: ``from_hf`` only reads the model's ``state_dict()`` and ``config``.
"""

__all__: list[str] = []
