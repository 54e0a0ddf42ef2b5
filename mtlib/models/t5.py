"""T5: the text-to-text encoder-decoder (Raffel et al., 2020).

T5 is chapter 8's encoder-decoder with a handful of choices that differ from the 2017 paper,
each named where it is made below:

- **no biases anywhere**: not in the attention projections, not in the feed-forward layers,
  not in the norms;
- **RMS layer norm** (:class:`RMSNorm`, Hugging Face's ``T5LayerNorm``): divide by the root
  mean square of the features and multiply by a learned gain; no mean subtraction, no bias;
- **pre-norm residuals**: ``x = x + dropout(sublayer(norm(x)))``, plus one final norm per stack;
- **relative position bias** instead of position embeddings: a learned scalar per (bucket of
  ``key_pos - query_pos``, head) is added to the attention logits
  (:class:`~mtlib.positional.RelativePositionBias`). It is computed once per stack, by the first
  layer in T5's code, and shared by all layers of that stack; the encoder's is bidirectional,
  the decoder's unidirectional. Cross-attention has no position bias;
- **no scaling of the attention logits** (``scale=1.0``): T5 initialises the query projection
  with a standard deviation ``sqrt(d_model * d_kv)`` times smaller, which absorbs the usual
  ``1 / sqrt(d_kv)`` (see ``T5._init_weights``);
- **feed-forward** ``wo(relu(wi(x)))``, or T5 v1.1's gated GELU
  ``wo(gelu_tanh(wi_0(x)) * wi_1(x))`` (``feed_forward_proj="gated-gelu"``);
- **one shared token embedding** for encoder and decoder; the LM head is that same matrix
  (``tie_word_embeddings=True``, the original T5) or a matrix of its own (T5 v1.1). With the
  tied head the decoder output is first multiplied by ``d_model ** -0.5``: the embedding is
  initialised with standard deviation 1 (an input vector as large as the RMS-normed residual
  stream), so as an output matrix it would give logits ``sqrt(d_model)`` times too large.

Attention is mtlib's :class:`~mtlib.attention.MultiHeadAttention` (``bias=False, scale=1.0``,
``head_dim=d_kv``), caches are :class:`~mtlib.blocks.DecoderCache` (a growing self-attention
:class:`~mtlib.attention.KVCache` and a static one for the encoder memory). The heads' width
``num_heads * d_kv`` need not be ``d_model``: it is in t5-small/base/large, not in the T5 v1.1
and Flan-T5 checkpoints (Flan-T5-small: ``d_model`` 512, 6 heads of 64, gated GELU, own head),
which :meth:`T5.from_hf` loads too. What it refuses is listed in :meth:`T5.config_from_hf`.

Names follow Hugging Face's where they carry meaning (``shared``, ``relative_attention_bias``,
``wi``/``wo``, ``final_layer_norm``, ``lm_head``), so :meth:`T5.from_hf` is the short table
:data:`HF_RENAMES` after :func:`hf_layer_names` has numbered T5's sub-layers by role.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import _checks
from mtlib.attention import MultiHeadAttention
from mtlib.blocks import DecoderCache, GELUTanh
from mtlib.models import _seq2seq
from mtlib.models.bert import attention_mask_to_bool
from mtlib.positional import RelativePositionBias

__all__ = [
    "T5Config",
    "T5",
    "T5Block",
    "T5Stack",
    "T5FeedForward",
    "RMSNorm",
    "t5_loss",
    "HF_RENAMES",
    "hf_layer_names",
]

#: The feed-forward kinds: "relu" (T5) and "gated-gelu" (T5 v1.1, GELU in its tanh form).
FEED_FORWARD_PROJ = ("relu", "gated-gelu")

#: Hugging Face T5 names that differ from ours, as (theirs, ours) pairs, applied after
#: :func:`hf_layer_names` has replaced ``layer.<i>`` by the sub-layer's role.
HF_RENAMES: list[tuple[str, str]] = [
    ("self_attention.SelfAttention.q", "self_attn.q_proj"),
    ("self_attention.SelfAttention.k", "self_attn.k_proj"),
    ("self_attention.SelfAttention.v", "self_attn.v_proj"),
    ("self_attention.SelfAttention.o", "self_attn.out_proj"),
    ("self_attention.layer_norm", "self_attn_norm"),
    ("cross_attention.EncDecAttention.q", "cross_attn.q_proj"),
    ("cross_attention.EncDecAttention.k", "cross_attn.k_proj"),
    ("cross_attention.EncDecAttention.v", "cross_attn.v_proj"),
    ("cross_attention.EncDecAttention.o", "cross_attn.out_proj"),
    ("cross_attention.layer_norm", "cross_attn_norm"),
    ("feed_forward.DenseReluDense", "ff"),
    ("feed_forward.layer_norm", "ff_norm"),
]

#: The sub-layers of a T5 block in Hugging Face's order (``layer.0``, ``layer.1``, ...).
_HF_ROLES = {
    "encoder": ("self_attention", "feed_forward"),
    "decoder": ("self_attention", "cross_attention", "feed_forward"),
}


@dataclass
class T5Config:
    """Sizes and switches of a T5. The defaults are t5-small (:meth:`small`)."""

    vocab_size: int = 32128  # token ids (32000 SentencePiece pieces + 100 sentinels, padded)
    d_model: int = 512  # model width
    d_kv: int = 64  # width of one attention head; num_heads * d_kv may differ from d_model
    d_ff: int = 2048  # feed-forward hidden width
    num_layers: int = 6  # encoder blocks
    num_decoder_layers: int | None = None  # decoder blocks; None -> num_layers
    num_heads: int = 8  # attention heads
    relative_attention_num_buckets: int = 32  # buckets of relative positions (>= 4)
    relative_attention_max_distance: int = 128  # distance from which all share the last bucket
    dropout: float = 0.1  # on embeddings, attention weights, hidden units and residuals
    layer_norm_eps: float = 1e-6  # RMSNorm epsilon
    feed_forward_proj: str = "relu"  # "relu" (T5) or "gated-gelu" (T5 v1.1)
    tie_word_embeddings: bool = True  # LM head = shared embedding, output scaled by d_model**-0.5
    pad_token_id: int = 0  # padding; also what finished rows are filled with by generate
    eos_token_id: int = 1  # end of sequence
    decoder_start_token_id: int = 0  # first decoder input (T5 starts from the pad id)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads",
                     "relative_attention_num_buckets", "relative_attention_max_distance"):  # fmt: skip
            _checks.positive_int(getattr(self, name), name)
        if self.num_decoder_layers is not None:
            _checks.positive_int(self.num_decoder_layers, "num_decoder_layers")
        if self.relative_attention_num_buckets < 4:
            raise ValueError(
                "relative_attention_num_buckets must be >= 4 (half of them per direction in the "
                f"encoder), got {self.relative_attention_num_buckets}"
            )
        exact = self.relative_attention_num_buckets // 2  # the decoder's exact range
        if self.relative_attention_max_distance <= exact:
            raise ValueError(
                f"relative_attention_max_distance must exceed relative_attention_num_buckets // 2 "
                f"= {exact}, got {self.relative_attention_max_distance}"
            )
        _checks.probability(self.dropout, "dropout")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")
        if self.feed_forward_proj not in FEED_FORWARD_PROJ:
            raise ValueError(
                f"feed_forward_proj must be one of {FEED_FORWARD_PROJ}, got {self.feed_forward_proj!r}"
            )
        for name in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value < self.vocab_size
            ):
                raise ValueError(
                    f"{name} must be an int in [0, vocab_size={self.vocab_size}), got {value!r}"
                )

    @property
    def decoder_layers(self) -> int:
        """Number of decoder blocks (``num_decoder_layers``, or ``num_layers`` if None)."""
        return self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers

    @classmethod
    def small(cls, **overrides: Any) -> T5Config:
        """t5-small (Raffel et al., 2020): 6 + 6 layers, d_model 512, 8 heads of 64, d_ff 2048,
        ReLU, tied head, 32128 ids; 60,506,624 parameters."""
        return replace(cls(), **overrides)

    @classmethod
    def flan_small(cls, **overrides: Any) -> T5Config:
        """Flan-T5-small (T5 v1.1 shapes; Chung et al., 2022): 8 + 8 layers, d_model 512, 6 heads
        of 64 (384 != 512), d_ff 1024, gated GELU, untied head, 32128 ids; 76,961,152 parameters."""
        flan = cls(d_ff=1024, num_layers=8, num_decoder_layers=8, num_heads=6,
                   feed_forward_proj="gated-gelu", tie_word_embeddings=False)  # fmt: skip
        return replace(flan, **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> T5Config:
        """A T5 that trains on a CPU in a minute: 2 + 2 layers, d_model 64, 4 heads of 16,
        d_ff 128, 128 ids, no dropout (override ``vocab_size`` for your tokenizer)."""
        small = cls(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                    num_decoder_layers=2, num_heads=4, dropout=0.0)  # fmt: skip
        return replace(small, **overrides)


class RMSNorm(nn.Module):
    """T5's layer norm: ``weight * x / sqrt(mean(x**2) + eps)`` over the last dimension.

    Unlike :class:`torch.nn.LayerNorm` there is no mean subtraction and no bias (Zhang and
    Sennrich, 2019). The mean square is computed in float32, as T5 does for half precision.

    Args:
        d_model: the normalised width.
        eps: added to the mean square.

    Shape:
        forward: (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain; no bias
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` (..., d_model) by its root mean square."""
        mean_square = x.float().pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return self.weight * (x * torch.rsqrt(mean_square + self.eps)).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class T5FeedForward(nn.Module):
    """T5's feed-forward network, without biases.

    - ``gated=False`` (T5): ``wo(dropout(relu(wi(x))))``;
    - ``gated=True`` (T5 v1.1, "gated-gelu"): ``wo(dropout(gelu_tanh(wi_0(x)) * wi_1(x)))``.

    Args:
        d_model: input and output width.
        d_ff: hidden width.
        dropout: on the hidden units.
        gated: use the gated GELU.

    Shape:
        forward: (..., d_model) -> (..., d_model).
    """

    def __init__(self, d_model: int, d_ff: int, *, dropout: float = 0.0, gated: bool = False):
        super().__init__()
        self.gated = gated
        if gated:
            self.wi_0 = nn.Linear(d_model, d_ff, bias=False)  # gate, through the GELU
            self.wi_1 = nn.Linear(d_model, d_ff, bias=False)  # linear part
            self.act: nn.Module = GELUTanh()
        else:
            self.wi = nn.Linear(d_model, d_ff, bias=False)
            self.act = nn.ReLU()
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the network to every position of ``x`` (..., d_model)."""
        if self.gated:
            hidden = self.act(self.wi_0(x)) * self.wi_1(x)  # (..., d_ff)
        else:
            hidden = self.act(self.wi(x))  # (..., d_ff)
        return self.wo(self.dropout(hidden))  # (..., d_model)


def _clamp_float16(x: Tensor) -> Tensor:
    """Hugging Face T5's guard for float16: clamp the residual stream after each sub-layer.

    A float16 tensor is clamped to ``+-finfo.max`` (65,504), or to ``+-(finfo.max - 1000)`` when
    it already holds an infinity, which replaces the infinities by finite values before the next
    RMS norm turns them into NaN. Other dtypes pass unchanged: T5 was trained in bfloat16, whose
    range is float32's, and real checkpoints (t5-large and up) do overflow float16's range.
    """
    if x.dtype != torch.float16:
        return x
    top = torch.finfo(x.dtype).max
    bound = torch.where(torch.isinf(x).any(), top - 1000, top)  # a 0-d tensor, no host sync
    return torch.clamp(x, min=-bound, max=bound)


class T5Block(nn.Module):
    """One T5 layer, pre-norm: self-attention, [cross-attention,] feed-forward::

        x = x + dropout(self_attn(self_attn_norm(x), bias=position_bias))
        x = x + dropout(cross_attn(cross_attn_norm(x), memory))    # decoder only
        x = x + dropout(ff(ff_norm(x)))

    In float16 each of the three sums is clamped as Hugging Face does (``_clamp_float16``),
    so a residual stream beyond float16's range gives the same finite logits as ``transformers``.

    Args:
        config: a :class:`T5Config`.
        cross_attention: give the block a cross-attention sub-layer (decoder blocks).
    """

    def __init__(self, config: T5Config, *, cross_attention: bool) -> None:
        super().__init__()
        c = config
        self.self_attn_norm = RMSNorm(c.d_model, c.layer_norm_eps)
        # no biases, and no 1/sqrt(d_kv) on the logits (T5's initialisation absorbs it)
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, head_dim=c.d_kv, dropout=c.dropout, bias=False, scale=1.0)  # fmt: skip
        self.cross_attn_norm: RMSNorm | None = None
        self.cross_attn: MultiHeadAttention | None = None
        if cross_attention:
            self.cross_attn_norm = RMSNorm(c.d_model, c.layer_norm_eps)
            self.cross_attn = MultiHeadAttention(c.d_model, c.num_heads, head_dim=c.d_kv, dropout=c.dropout, bias=False, scale=1.0)  # fmt: skip
        self.ff_norm = RMSNorm(c.d_model, c.layer_norm_eps)
        gated = c.feed_forward_proj == "gated-gelu"
        self.ff = T5FeedForward(c.d_model, c.d_ff, dropout=c.dropout, gated=gated)
        self.dropout = nn.Dropout(c.dropout)

    def forward(
        self,
        x: Tensor,
        position_bias: Tensor,
        *,
        mask: Tensor | None = None,
        is_causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Run the block on ``x`` (B, T, d_model) -> (B, T, d_model).

        Args:
            x: input (B, T, d_model); with a cache, only the new positions.
            position_bias: the stack's relative position bias (1, H, T, T_keys).
            mask: bool self-attention mask (True = may attend), e.g. padding (B, 1, 1, T).
            is_causal: decoder self-attention (new positions are the last ones).
            memory: encoder output (B, T_enc, d_model), for cross-attention.
            memory_mask: bool mask over the memory (B, 1, 1, T_enc).
            cache: the block's :class:`~mtlib.blocks.DecoderCache`, updated in place.
        """
        own, cross = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        h = self.self_attn_norm(x)
        h = self.self_attn(h, mask=mask, bias=position_bias, is_causal=is_causal, cache=own)[0]
        x = _clamp_float16(x + self.dropout(h))
        if self.cross_attn is not None and self.cross_attn_norm is not None:
            if memory is None:
                raise ValueError("memory (the encoder output) is needed by a decoder block")
            h = self.cross_attn_norm(x)
            h = self.cross_attn(h, memory, memory, mask=memory_mask, cache=cross)[0]  # no bias
            x = _clamp_float16(x + self.dropout(h))
        return _clamp_float16(x + self.dropout(self.ff(self.ff_norm(x))))


class T5Stack(nn.Module):
    """The encoder or the decoder: blocks sharing one relative position bias, then a final norm.

    Args:
        config: a :class:`T5Config`.
        num_layers: how many blocks.
        is_decoder: causal self-attention, unidirectional position buckets, cross-attention.
    """

    def __init__(self, config: T5Config, num_layers: int, *, is_decoder: bool) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.relative_bias = RelativePositionBias(
            config.num_heads,
            num_buckets=config.relative_attention_num_buckets,
            max_distance=config.relative_attention_max_distance,
            bidirectional=not is_decoder,  # a decoder only looks back
        )
        blocks = [T5Block(config, cross_attention=is_decoder) for _ in range(num_layers)]
        self.blocks = nn.ModuleList(blocks)
        self.final_layer_norm = RMSNorm(config.d_model, config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Embedded tokens (B, T, d_model) -> hidden states (B, T, d_model).

        Args:
            x: token embeddings (B, T, d_model); with a cache, only the new positions.
            mask: bool self-attention mask (B, 1, 1, T) for the encoder's padding.
            memory: encoder output (decoder only).
            memory_mask: bool mask over the memory (B, 1, 1, T_enc).
            cache: one :class:`~mtlib.blocks.DecoderCache` per block (decoder only).
        """
        past = 0 if cache is None else cache[0].length  # positions already decoded
        length = x.shape[1]
        bias = self.relative_bias(length, past + length)  # (1, H, T, past + T), one for all blocks
        x = self.dropout(x)
        for i, block in enumerate(self.blocks):
            x = block(x, bias, mask=mask, is_causal=self.is_decoder, memory=memory,
                      memory_mask=memory_mask, cache=None if cache is None else cache[i])  # fmt: skip
        return self.dropout(self.final_layer_norm(x))


class T5(nn.Module):
    """T5 for conditional generation: ``logits = lm_head(decoder(shared[y], encoder(shared[x])))``.

    Args:
        config: a :class:`T5Config`.

    Shape:
        forward: input_ids (B, T_enc), decoder_input_ids (B, T_dec) -> logits (B, T_dec, vocab).
    """

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.config = config
        self.shared = nn.Embedding(config.vocab_size, config.d_model)  # encoder and decoder
        self.encoder = T5Stack(config, config.num_layers, is_decoder=False)
        self.decoder = T5Stack(config, config.decoder_layers, is_decoder=True)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.shared.weight  # one (vocab_size, d_model) matrix
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """T5's initialisation (Mesh TensorFlow, T5X): each matrix has standard deviation
        ``fan_in ** -0.5``, except the query projection, ``(d_model * d_kv) ** -0.5``: the
        ``1 / sqrt(d_kv)`` that other Transformers put on the logits is folded in here.
        Embedding N(0, 1); norms 1. An untied head (T5 v1.1) is a matrix like the others,
        ``d_model ** -0.5`` (T5X's fan-in default), so the logits start at about unit scale
        without the tied head's rescale. Hugging Face draws it from N(0, 1) instead, which
        makes the initial logits ``sqrt(d_model)`` times too large (chapter 14, section 14.6)."""
        c = self.config
        nn.init.normal_(self.shared.weight, std=1.0)
        if not c.tie_word_embeddings:
            nn.init.normal_(self.lm_head.weight, std=c.d_model**-0.5)
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                nn.init.normal_(module.q_proj.weight, std=(c.d_model * c.d_kv) ** -0.5)
                for proj in (module.k_proj, module.v_proj):
                    nn.init.normal_(proj.weight, std=c.d_model**-0.5)
                nn.init.normal_(module.out_proj.weight, std=(c.num_heads * c.d_kv) ** -0.5)
            elif isinstance(module, T5FeedForward):
                for name in ("wi", "wi_0", "wi_1"):
                    if hasattr(module, name):
                        nn.init.normal_(getattr(module, name).weight, std=c.d_model**-0.5)
                nn.init.normal_(module.wo.weight, std=c.d_ff**-0.5)
            elif isinstance(module, RelativePositionBias):
                nn.init.normal_(module.relative_attention_bias.weight, std=c.d_model**-0.5)

    def num_parameters(self) -> int:
        """Number of parameters (a tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self) -> list[DecoderCache]:
        """An empty cache for :meth:`decode`: one :class:`~mtlib.blocks.DecoderCache` per
        decoder block (self-attention keys/values grow; the encoder memory is projected once)."""
        return [DecoderCache() for _ in self.decoder.blocks]

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Run the encoder.

        Args:
            input_ids: token ids (B, T_enc), each in [0, vocab_size).
            attention_mask: Hugging Face's convention, (B, T_enc), 1 = token, 0 = padding.

        Returns:
            The memory, (B, T_enc, d_model).
        """
        _checks.token_ids(input_ids, "input_ids", self.config.vocab_size)
        mask = attention_mask_to_bool(
            attention_mask, input_ids, length="T_enc"
        )  # (B, 1, 1, T_enc) or None
        return self.encoder(self.shared(input_ids), mask=mask)  # (B, T_enc, d_model)

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        *,
        cache: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Run the decoder and the LM head.

        Args:
            decoder_input_ids: token ids (B, T_dec); with a cache, only the new tokens.
            memory: the encoder output (B, T_enc, d_model).
            attention_mask: the encoder's mask (B, T_enc), 1 = token, 0 = padding.
            cache: from :meth:`new_cache`, updated in place.

        Returns:
            Logits (B, T_dec, vocab_size).
        """
        c = self.config
        _checks.token_ids(decoder_input_ids, "decoder_input_ids", c.vocab_size)
        memory = _seq2seq.check_memory(memory, decoder_input_ids.shape[0], c.d_model)
        source = memory.new_zeros(memory.shape[:2], dtype=torch.long)  # (B, T_enc) for the shape
        memory_mask = attention_mask_to_bool(
            attention_mask, source, length="T_enc"
        )  # (B, 1, 1, T_enc) or None
        cache = _seq2seq.check_cache(cache, len(self.decoder.blocks))
        y = self.decoder(self.shared(decoder_input_ids), memory=memory, memory_mask=memory_mask,
                         cache=cache)  # fmt: skip  # (B, T_dec, d_model)
        if c.tie_word_embeddings:
            y = y * c.d_model**-0.5  # the N(0, 1) embedding as output matrix: rescale (see top)
        return self.lm_head(y)  # (B, T_dec, vocab_size)

    def forward(
        self, input_ids: Tensor, decoder_input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Logits of every decoder position (teacher forcing).

        Args:
            input_ids: encoder token ids (B, T_enc).
            decoder_input_ids: decoder token ids (B, T_dec), usually the labels shifted right
                after ``decoder_start_token_id``.
            attention_mask: (B, T_enc), 1 = token, 0 = padding (Hugging Face's convention).

        Returns:
            Logits (B, T_dec, vocab_size).
        """
        _checks.token_ids(decoder_input_ids, "decoder_input_ids", self.config.vocab_size)
        _checks.token_ids(input_ids, "input_ids", self.config.vocab_size)
        _seq2seq.check_same_batch(input_ids, decoder_input_ids)
        memory = self.encode(input_ids, attention_mask)  # (B, T_enc, d_model)
        return self.decode(decoder_input_ids, memory, attention_mask)

    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        attention_mask: Tensor | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        *,
        use_cache: bool = True,
    ) -> Tensor:
        """Decode from ``decoder_start_token_id``, one token at a time, in eval mode.

        Greedy (``do_sample=False``) gives the tokens of ``transformers``' ``generate`` with
        ``num_beams=1``: a row that has emitted ``eos_token_id`` is filled with
        ``pad_token_id``, and decoding stops early when every row has finished.

        Args:
            input_ids: encoder token ids (B, T_enc).
            max_new_tokens: at most this many tokens after the start token, >= 0.
            attention_mask: (B, T_enc), 1 = token, 0 = padding.
            do_sample: draw from the softmax instead of taking the argmax.
            temperature: > 0, divides the logits.
            top_k: keep only the k most likely tokens (None: all).
            generator: random generator for sampling.
            use_cache: feed one token per step with a KV cache (the encoder memory projected
                once per block); False decodes the whole prefix every step (same tokens).

        Returns:
            Decoder token ids (B, 1 + n), n <= max_new_tokens, starting with the start token.
        """
        _checks.token_ids(input_ids, "input_ids", self.config.vocab_size)
        c = self.config
        return _seq2seq.generate(self, input_ids, max_new_tokens, attention_mask,
                                 start_id=c.decoder_start_token_id, eos_id=c.eos_token_id,
                                 pad_id=c.pad_token_id, do_sample=do_sample,
                                 temperature=temperature, top_k=top_k, generator=generator,
                                 use_cache=use_cache)  # fmt: skip

    @classmethod
    def config_from_hf(cls, hf_config: Any) -> T5Config:
        """The :class:`T5Config` of a Hugging Face ``T5Config`` (only its attributes are read).

        Both T5 (ReLU, tied head, ``num_heads * d_kv == d_model``) and T5 v1.1 / Flan-T5
        (``feed_forward_proj="gated-gelu"``, an LM head of its own, any ``d_kv``) are read.
        ``tie_word_embeddings`` follows whether Hugging Face scales the decoder output by
        ``d_model ** -0.5`` (``scale_decoder_outputs`` in transformers >= 5, which always ties
        the weights and keeps the T5 / T5 v1.1 difference in that flag; ``tie_word_embeddings``
        before); that scale is the only difference in the forward pass.

        Not implemented, and refused: any other ``feed_forward_proj`` ("gelu", "silu",
        "gated-silu", "gated-relu", ...), and a config with ``is_decoder=True`` or
        ``is_encoder_decoder=False`` (a decoder-only or encoder-only T5). Fields that only
        matter for initialisation (``initializer_factor``), for other heads
        (``classifier_dropout``) or for ``transformers``' own generation (``use_cache``) are
        not read.

        Raises:
            ValueError: on a feed-forward kind other than relu / gated-gelu, or on a config that
                is not an encoder-decoder.
        """
        proj = getattr(hf_config, "feed_forward_proj", None)
        if proj not in FEED_FORWARD_PROJ:
            raise ValueError(
                f"config.feed_forward_proj must be one of {FEED_FORWARD_PROJ} (mtlib implements "
                f"no other T5 feed-forward), got {proj!r}"
            )
        decoder_only = getattr(hf_config, "is_decoder", False)
        if decoder_only or not getattr(hf_config, "is_encoder_decoder", True):
            raise ValueError(
                "config must be an encoder-decoder T5 (is_decoder=False, is_encoder_decoder=True): "
                "mtlib's T5 has no decoder-only or encoder-only variant"
            )
        d_model, heads, d_kv = hf_config.d_model, hf_config.num_heads, hf_config.d_kv
        tied = getattr(hf_config, "scale_decoder_outputs", hf_config.tie_word_embeddings)
        start = getattr(hf_config, "decoder_start_token_id", None)
        pad = hf_config.pad_token_id
        eos = hf_config.eos_token_id
        return T5Config(
            vocab_size=hf_config.vocab_size,
            d_model=d_model,
            d_kv=d_kv,
            d_ff=hf_config.d_ff,
            num_layers=hf_config.num_layers,
            num_decoder_layers=hf_config.num_decoder_layers,
            num_heads=heads,
            relative_attention_num_buckets=hf_config.relative_attention_num_buckets,
            relative_attention_max_distance=hf_config.relative_attention_max_distance,
            dropout=float(hf_config.dropout_rate),
            layer_norm_eps=float(hf_config.layer_norm_epsilon),
            feed_forward_proj=proj,
            tie_word_embeddings=bool(tied),
            pad_token_id=pad,
            eos_token_id=eos[0] if isinstance(eos, list) else eos,
            decoder_start_token_id=pad if start is None else start,
        )

    @classmethod
    def from_hf(cls, model: nn.Module) -> T5:
        """Build a T5 with the weights of a Hugging Face ``T5ForConditionalGeneration``.

        Reads only ``model.config`` and ``model.state_dict()`` (mtlib does not import
        ``transformers``): sub-layers are named by role (:func:`hf_layer_names`), names go
        through :data:`HF_RENAMES`, and :func:`mtlib.loading.load_weights` checks every shape
        and that nothing is left out.

        Returns:
            A T5 on the model's device and dtype, in its train/eval mode, computing the same
            logits (equal in eval mode; in training the dropout draws differ).

        Raises:
            TypeError: if ``model`` is not a module with a ``config``.
            ValueError: on an unsupported config, a tied config whose head differs from the
                embedding, or a tensor that is missing, unexpected or misshapen (named).
        """
        if not isinstance(model, nn.Module) or not hasattr(model, "config"):
            raise TypeError(
                f"model must be a transformers T5ForConditionalGeneration, got {type(model).__name__}"
            )
        config = cls.config_from_hf(model.config)
        state = dict(model.state_dict())
        shared = state.get("shared.weight")
        for name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            copy = state.pop(name, None)  # the shared embedding again, under the stacks' names
            if copy is not None and shared is not None and not torch.equal(copy, shared):
                raise ValueError(f"{name} differs from shared.weight: T5 shares one embedding")
        head = state.get("lm_head.weight")
        if config.tie_word_embeddings:
            if head is not None and shared is not None and not torch.equal(head, shared):
                raise ValueError(
                    "lm_head.weight differs from shared.weight, but the config ties them "
                    "(the decoder output would be scaled by d_model**-0.5)"
                )
            if head is None and shared is not None:
                state["lm_head.weight"] = shared  # ours is the same Parameter: fill both names
        ours = cls(config).to(next(iter(state.values())))
        _seq2seq.load_renamed(ours, state, hf_layer_names(state), HF_RENAMES)
        return ours.train(model.training)


def hf_layer_names(names: Iterable[str]) -> dict[str, str]:
    """Rename Hugging Face T5's numbered sub-layers by role, and move the position bias.

    ``encoder.block.3.layer.1.X`` becomes ``encoder.blocks.3.feed_forward.X`` (the encoder's
    ``layer.1`` is its feed-forward, the decoder's is its cross-attention), and the first
    block's ``SelfAttention.relative_attention_bias`` becomes the stack's ``relative_bias``
    (the one every block uses). Other names pass through.

    Args:
        names: Hugging Face's tensor names.

    Returns:
        ``{their name: intermediate name}``, which :data:`HF_RENAMES` then maps to ours.
    """
    out: dict[str, str] = {}
    for theirs in names:
        name = theirs
        bias = re.fullmatch(r"(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.(relative_attention_bias\.weight)", name)  # fmt: skip
        layer = re.fullmatch(r"(encoder|decoder)\.block\.(\d+)\.layer\.(\d+)\.(.*)", name)
        if bias is not None:
            name = f"{bias[1]}.relative_bias.{bias[2]}"
        elif layer is not None:
            stack, block, index, rest = layer[1], layer[2], int(layer[3]), layer[4]
            roles = _HF_ROLES[stack]
            role = roles[index] if index < len(roles) else f"layer.{index}"  # unknown: reported
            name = f"{stack}.blocks.{block}.{role}.{rest}"
        out[theirs] = name
    return out


def t5_loss(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    """Mean token cross-entropy over the labels that are not ``ignore_index``.

    Args:
        logits: (B, T, vocab_size).
        labels: (B, T) long; ``ignore_index`` (Hugging Face's -100) marks positions to skip.

    Returns:
        A scalar tensor.
    """
    _checks.float_tensor(logits, "logits", "(batch, T, vocab_size)", (None, None, None))
    if not isinstance(labels, Tensor) or labels.shape != logits.shape[:2]:
        got = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(
            f"labels must have shape {tuple(logits.shape[:2])} like logits[..., 0], got {got}"
        )
    flat = logits.reshape(-1, logits.shape[-1])  # (B * T, V)
    return F.cross_entropy(flat, labels.reshape(-1), ignore_index=ignore_index)
