"""BERT: a Post-LN Transformer encoder with token, position and segment embeddings.

BERT {Devlin et al. 2019} is the encoder half of the Transformer, pretrained by *masked
language modelling* (hide 15% of the tokens, predict them from both sides) and then fine-tuned
on a task through the pooled vector of its first token, ``[CLS]``. The pieces, one per box of
the paper's figure:

- :class:`BERTConfig`: sizes, with the ``base()`` preset (bert-base-uncased, 109,482,240
  parameters with the pooler);
- :class:`BERT`: embeddings (token + position + segment, LayerNorm, dropout), a stack of
  Post-LN :class:`~mtlib.blocks.EncoderBlock` with exact GELU, the pooler (dense + tanh on
  ``[CLS]``);
- :class:`BERTForMaskedLM`: the MLM head (dense + GELU + LayerNorm, then a decoder tied to the
  word embeddings, plus a bias);
- :class:`BERTForSequenceClassification`: dropout + linear on the pooled ``[CLS]`` vector;
- :func:`mask_tokens`: the 80/10/10 masking rule of pretraining.

``attention_mask`` follows Hugging Face (1 = token, 0 = padding), so an ``mtlib`` BERT is a
drop-in for a ``transformers`` ``BertModel``; :func:`attention_mask_to_bool` is the one place
where it becomes mtlib's boolean mask. ``from_hf`` loads a ``transformers`` model through
:func:`mtlib.loading.load_weights` (a table of names, a shape check on every copy); mtlib never
imports ``transformers``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import _checks
from mtlib.blocks import BlockConfig, EncoderBlock
from mtlib.loading import load_weights

__all__ = [
    "BERTConfig",
    "BERT",
    "BERTForMaskedLM",
    "BERTForSequenceClassification",
    "IGNORE_INDEX",
    "attention_mask_to_bool",
    "bert_renames",
    "init_weights",
    "mask_tokens",
]

#: Label of the positions that the MLM loss ignores (``F.cross_entropy``'s default, as in HF).
IGNORE_INDEX = -100


@dataclass
class BERTConfig:
    """Sizes of a BERT; the defaults are bert-base-uncased's (see :meth:`base`)."""

    vocab_size: int = 30522  # WordPiece vocabulary
    max_position: int = 512  # longest input (learned absolute positions)
    type_vocab_size: int = 2  # segments: sentence A (0) and sentence B (1)
    d_model: int = 768  # hidden size H
    num_heads: int = 12  # attention heads; d_model % num_heads == 0
    d_ff: int = 3072  # feed-forward hidden size (4 H)
    n_layer: int = 12  # encoder blocks L
    dropout: float = 0.1  # on embeddings, attention weights, residual branches
    layer_norm_eps: float = 1e-12  # BERT's LayerNorm epsilon (PyTorch's default is 1e-5)
    pad_id: int = 0  # [PAD]: its embedding row starts at 0 and gets no gradient
    add_pooler: bool = True  # the [CLS] pooler; BertForMaskedLM's encoder has none
    init_std: float = 0.02  # weights start from N(0, init_std^2), as BERT's (initializer_range)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_position", "type_vocab_size", "n_layer"):
            _checks.positive_int(getattr(self, name), name)
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(
                f"pad_id must lie in [0, vocab_size={self.vocab_size}), got {self.pad_id}"
            )
        self.block_config()  # validates d_model, num_heads, d_ff, dropout, layer_norm_eps

    def block_config(self) -> BlockConfig:
        """The configuration every encoder block shares: Post-LN, exact GELU."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation="gelu",
            norm_first=False,
            layer_norm_eps=self.layer_norm_eps,
        )

    @classmethod
    def base(cls, **overrides: Any) -> BERTConfig:
        """bert-base-uncased: L=12, H=768, A=12, 110M parameters."""
        return cls(**overrides)


def attention_mask_to_bool(
    attention_mask: Tensor | None, input_ids: Tensor, *, length: str = "seq_len"
) -> Tensor | None:
    """Hugging Face's attention mask (1 = token, 0 = padding) as mtlib's bool mask.

    BERT, T5 and BART all take their ``attention_mask`` through this function.

    Args:
        attention_mask: (B, T) of 0/1 (any integer, float or bool dtype), or None.
        input_ids: (B, T) token ids, for the expected shape and device.
        length: the name of ``T`` in error messages (``"T_enc"`` for an encoder-decoder).

    Returns:
        Bool (B, 1, 1, T), True for the keys that may be attended; None if no mask was given.

    Raises:
        TypeError: naming ``attention_mask``, when it is not a real-valued tensor.
        ValueError: naming ``attention_mask``, on a wrong shape, device or values.
    """
    if attention_mask is None:
        return None
    expected = f"(batch, {length}) = {tuple(input_ids.shape)} like input_ids, of 0/1"
    if not isinstance(attention_mask, Tensor) or attention_mask.dtype.is_complex:
        got = type(attention_mask).__name__
        raise TypeError(f"attention_mask must be a Tensor {expected}, got {got}")
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask must have shape {expected}, got {tuple(attention_mask.shape)}"
        )
    if attention_mask.device != input_ids.device:
        raise ValueError(
            f"attention_mask is on {attention_mask.device}, input_ids on {input_ids.device}"
        )
    if (
        attention_mask.dtype != torch.bool
        and not ((attention_mask == 0) | (attention_mask == 1)).all()
    ):
        raise ValueError(
            "attention_mask must hold only 1 (token) and 0 (padding), as in Hugging Face; "
            "for an additive float mask, convert it first"
        )
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT's initialisation: linear and embedding weights N(0, std^2), biases 0, LayerNorm 1.

    With PyTorch's default N(0, 1) embeddings, the tied MLM decoder starts with logits of
    size ~sqrt(d_model) and a loss several times log(vocab_size).
    """
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        nn.init.zeros_(module.weight[module.padding_idx])
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BERT(nn.Module):
    """The BERT encoder: embeddings, Post-LN blocks, pooler.

    Args:
        config: a :class:`BERTConfig`.

    Shape:
        forward: input_ids (B, T) -> last hidden states (B, T, d_model).
    """

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.pos_embed = nn.Embedding(c.max_position, c.d_model)
        self.seg_embed = nn.Embedding(c.type_vocab_size, c.d_model)
        self.embed_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.embed_dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(EncoderBlock(c.block_config()) for _ in range(c.n_layer))
        self.pooler = nn.Linear(c.d_model, c.d_model) if c.add_pooler else None
        self.apply(functools.partial(init_weights, std=c.init_std))

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        """Token + position + segment embeddings, normalised: (B, T) -> (B, T, d_model)."""
        c = self.config
        _checks.token_ids(input_ids, "input_ids", c.vocab_size)
        if input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must have shape (batch, seq_len), got {tuple(input_ids.shape)}"
            )
        T = input_ids.shape[1]
        if T > c.max_position:
            raise ValueError(
                f"input_ids has {T} positions, more than max_position={c.max_position}"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        _checks.token_ids(token_type_ids, "token_type_ids", c.type_vocab_size)
        if token_type_ids.shape != input_ids.shape:
            raise ValueError(
                f"token_type_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                f"got {tuple(token_type_ids.shape)}"
            )
        positions = torch.arange(T, device=input_ids.device)  # (T,)
        x = self.tok_embed(input_ids) + self.pos_embed(positions) + self.seg_embed(token_type_ids)
        return self.embed_dropout(self.embed_norm(x))  # (B, T, d_model)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Encode a batch.

        Args:
            input_ids: token ids (B, T).
            token_type_ids: segment ids (B, T), default all 0.
            attention_mask: (B, T), 1 = token, 0 = padding (Hugging Face's convention).

        Returns:
            The last hidden states (B, T, d_model).
        """
        mask = attention_mask_to_bool(attention_mask, input_ids)  # (B, 1, 1, T)
        x = self.embed(input_ids, token_type_ids)  # (B, T, d_model)
        for block in self.blocks:
            x = block(x, mask=mask)
        return x

    def pool(self, hidden: Tensor) -> Tensor:
        """The pooled representation: ``tanh(dense(h_[CLS]))``, (B, T, d_model) -> (B, d_model)."""
        if self.pooler is None:
            raise ValueError("this BERT has no pooler (config.add_pooler=False)")
        return torch.tanh(self.pooler(hidden[:, 0]))  # (B, d_model)

    @staticmethod
    def config_from_hf(hf_config: Any) -> BERTConfig:
        """Read a ``transformers`` ``BertConfig``; refuse settings this BERT does not implement."""
        act = getattr(hf_config, "hidden_act", None)
        if act != "gelu":
            raise ValueError(f'config.hidden_act must be "gelu" (exact GELU), got {act!r}')
        position = getattr(hf_config, "position_embedding_type", "absolute")
        if position != "absolute":
            raise ValueError(f'config.position_embedding_type must be "absolute", got {position!r}')
        if getattr(hf_config, "is_decoder", False) or getattr(
            hf_config, "add_cross_attention", False
        ):
            raise ValueError(
                "config.is_decoder / add_cross_attention must be False (BERT is an encoder)"
            )
        hidden, attn = hf_config.hidden_dropout_prob, hf_config.attention_probs_dropout_prob
        if hidden != attn:
            raise ValueError(
                f"hidden_dropout_prob={hidden} and attention_probs_dropout_prob={attn} must be equal "
                "(mtlib's blocks use one dropout)"
            )
        pad = hf_config.pad_token_id
        return BERTConfig(
            vocab_size=hf_config.vocab_size,
            max_position=hf_config.max_position_embeddings,
            type_vocab_size=hf_config.type_vocab_size,
            d_model=hf_config.hidden_size,
            num_heads=hf_config.num_attention_heads,
            d_ff=hf_config.intermediate_size,
            n_layer=hf_config.num_hidden_layers,
            dropout=hidden,
            layer_norm_eps=hf_config.layer_norm_eps,
            pad_id=0 if pad is None else pad,
        )

    @classmethod
    def from_hf(cls, model: nn.Module) -> BERT:
        """A BERT with the weights of a ``transformers`` ``BertModel`` (or ``BertForMaskedLM().bert``).

        Args:
            model: the Hugging Face encoder; with or without its pooler.

        Returns:
            The same function, on the model's device and dtype, in eval mode.
        """
        tensors = dict(model.state_dict())
        config = cls.config_from_hf(model.config)
        config.add_pooler = any(name.startswith("pooler.") for name in tensors)
        ours = cls(config).to(next(model.parameters()))
        load_weights(ours, tensors, bert_renames(config.n_layer))
        return ours.eval()


#: One encoder layer's names in Hugging Face's BERT and in :class:`~mtlib.blocks.EncoderBlock`.
_LAYER_RENAMES = [
    ("attention.self.query", "self_attn.q_proj"),
    ("attention.self.key", "self_attn.k_proj"),
    ("attention.self.value", "self_attn.v_proj"),
    ("attention.output.dense", "self_attn.out_proj"),
    ("attention.output.LayerNorm", "norm1"),
    ("intermediate.dense", "ff.linear1"),
    ("output.dense", "ff.linear2"),
    ("output.LayerNorm", "norm2"),
]


def bert_renames(n_layer: int, prefix: str = "") -> list[tuple[str, str]]:
    """The (theirs, ours) name table from Hugging Face's BERT to :class:`BERT`.

    Args:
        n_layer: number of encoder layers.
        prefix: prefix of the encoder's names on both sides (``"bert."`` inside a head model).
    """
    table = [
        (f"{prefix}embeddings.word_embeddings", f"{prefix}tok_embed"),
        (f"{prefix}embeddings.position_embeddings", f"{prefix}pos_embed"),
        (f"{prefix}embeddings.token_type_embeddings", f"{prefix}seg_embed"),
        (f"{prefix}embeddings.LayerNorm", f"{prefix}embed_norm"),
        (f"{prefix}pooler.dense", f"{prefix}pooler"),
    ]
    for i in range(n_layer):
        table += [
            (f"{prefix}encoder.layer.{i}.{t}", f"{prefix}blocks.{i}.{o}") for t, o in _LAYER_RENAMES
        ]
    return table


class BERTForMaskedLM(nn.Module):
    """BERT with the masked-LM head: transform (dense, GELU, LayerNorm), then tied decoder + bias.

    Args:
        config: a :class:`BERTConfig`; the encoder is built without a pooler, as in HF.

    Shape:
        forward: input_ids (B, T) -> logits (B, T, vocab_size).
    """

    def __init__(self, config: BERTConfig) -> None:
        super().__init__()
        self.bert = BERT(dataclasses.replace(config, add_pooler=False))
        c = self.bert.config
        self.transform = nn.Linear(c.d_model, c.d_model)
        self.transform_act = nn.GELU()
        self.transform_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))  # the decoder's weight is tok_embed's
        self.apply(functools.partial(init_weights, std=c.init_std))

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Scores over the vocabulary at every position: (B, T) -> (B, T, vocab_size)."""
        return self.head(self.bert(input_ids, token_type_ids, attention_mask))  # (B, T, V)

    def head(self, hidden: Tensor) -> Tensor:
        """The MLM head alone, (..., d_model) -> (..., vocab_size): apply it to the masked
        positions only, and pretraining skips most of the vocabulary-sized products."""
        h = self.transform_norm(self.transform_act(self.transform(hidden)))  # (..., d_model)
        return F.linear(h, self.bert.tok_embed.weight, self.bias)  # (..., V)

    @classmethod
    def from_hf(cls, model: nn.Module) -> BERTForMaskedLM:
        """A copy of a ``transformers`` ``BertForMaskedLM`` (its decoder must be tied)."""
        tensors = dict(model.state_dict())
        _drop_tied(
            tensors, "cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"
        )
        _drop_tied(tensors, "cls.predictions.decoder.bias", "cls.predictions.bias")
        config = BERT.config_from_hf(model.config)
        ours = cls(config).to(next(model.parameters()))
        renames = bert_renames(config.n_layer, "bert.") + [
            ("cls.predictions.transform.dense", "transform"),
            ("cls.predictions.transform.LayerNorm", "transform_norm"),
            ("cls.predictions.bias", "bias"),
        ]
        load_weights(ours, tensors, renames)
        return ours.eval()


def _drop_tied(tensors: dict[str, Tensor], name: str, twin: str) -> None:
    """Remove ``name`` from ``tensors`` after checking it equals ``twin`` (a tied copy)."""
    if name in tensors:
        if twin not in tensors or not torch.equal(tensors[name], tensors[twin]):
            raise ValueError(
                f"{name} must be tied to (equal to) {twin}: untied heads are not supported"
            )
        del tensors[name]


class BERTForSequenceClassification(nn.Module):
    """BERT with a classifier on the pooled ``[CLS]`` vector: ``linear(dropout(pool(h)))``.

    Args:
        config: a :class:`BERTConfig` (with the pooler).
        num_labels: number of classes.

    Shape:
        forward: input_ids (B, T) -> logits (B, num_labels).
    """

    def __init__(self, config: BERTConfig, num_labels: int) -> None:
        super().__init__()
        _checks.positive_int(num_labels, "num_labels")
        self.bert = BERT(dataclasses.replace(config, add_pooler=True))
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        self.apply(functools.partial(init_weights, std=config.init_std))

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Class scores: (B, T) -> (B, num_labels)."""
        hidden = self.bert(input_ids, token_type_ids, attention_mask)  # (B, T, d_model)
        return self.classifier(self.dropout(self.bert.pool(hidden)))  # (B, num_labels)

    @classmethod
    def from_hf(cls, model: nn.Module) -> BERTForSequenceClassification:
        """A copy of a ``transformers`` ``BertForSequenceClassification``.

        Its ``classifier_dropout`` is honoured (Hugging Face falls back to
        ``hidden_dropout_prob`` when it is None, as mtlib's own classifier does).
        """
        hf_config: Any = model.config
        config = BERT.config_from_hf(hf_config)
        ours = cls(config, hf_config.num_labels).to(next(model.parameters()))
        p = getattr(hf_config, "classifier_dropout", None)
        ours.dropout.p = config.dropout if p is None else float(p)
        load_weights(ours, dict(model.state_dict()), bert_renames(config.n_layer, "bert."))
        return ours.eval()


def mask_tokens(
    input_ids: Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Collection[int] = (),
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's masking rule: choose 15% of the tokens; of those, 80% -> [MASK], 10% -> random, 10% kept.

    Each non-special token is chosen independently with probability ``mask_prob``. A chosen
    token becomes ``mask_id`` with probability 0.8, a random non-special token with probability
    0.1, and stays itself with probability 0.1; the model must predict the original at every
    chosen position (and only there). The random and kept tokens stop the model from assuming
    that only ``[MASK]`` positions matter, since fine-tuning inputs contain no ``[MASK]``.

    Args:
        input_ids: token ids (B, T); special tokens ([CLS], [SEP], [PAD], ...) are never chosen.
        mask_id: id of ``[MASK]``.
        vocab_size: random replacements are drawn uniformly from ``[0, vocab_size)`` minus the
            special ids.
        special_ids: ids never chosen nor drawn as replacements.
        mask_prob: probability that a token is chosen.
        generator: random generator, for reproducible masks.

    Returns:
        ``(inputs, labels)``, both (B, T): the corrupted inputs, and the original ids at chosen
        positions with :data:`IGNORE_INDEX` (-100) elsewhere.
    """
    _checks.token_ids(input_ids, "input_ids")
    _checks.probability(mask_prob, "mask_prob")
    special = torch.tensor(sorted(set(special_ids) | {mask_id}), dtype=torch.long)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[special[special < vocab_size]] = False
    candidates = allowed.nonzero().squeeze(1)  # (V',) ids a random replacement may take
    if len(candidates) == 0:
        raise ValueError("no token id is left for random replacements: check special_ids")
    device = input_ids.device
    ids = input_ids.cpu()
    u = torch.rand(ids.shape + (2,), generator=generator)  # (B, T, 2): choose, then how
    chosen = (u[..., 0] < mask_prob) & ~torch.isin(ids, special)  # (B, T)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    random_ids = candidates[torch.randint(len(candidates), ids.shape, generator=generator)]
    inputs = torch.where(chosen & (u[..., 1] < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (u[..., 1] >= 0.8) & (u[..., 1] < 0.9), random_ids, inputs)
    return inputs.to(device), labels.to(device)
