"""The Transformer's blocks: feed-forward, encoder block and decoder block.

Each block is one box of the paper's figure 1: attention, then a position-wise feed-forward
network, each wrapped in a residual connection and a LayerNorm. Where the LayerNorm goes is
the one flag that the text names, ``norm_first``:

- **Post-LN** (``norm_first=False``, the original paper):
  ``x = norm(x + dropout(sublayer(x)))``;
- **Pre-LN** (``norm_first=True``, GPT-2 and most models since):
  ``x = x + dropout(sublayer(norm(x)))``.

Every block is built from one :class:`BlockConfig`, the same object (or its subclass
:class:`~mtlib.transformer.TransformerConfig`) that configures a whole model.

Submodule names follow PyTorch's ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``
(``self_attn``, ``norm1``, ``dropout1``, ...), so loading PyTorch's weights is the short table
:data:`TORCH_RENAMES` (see :mod:`mtlib.loading`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import _checks
from mtlib.attention import KVCache, MultiHeadAttention, _check_batch_first
from mtlib.loading import load_weights, split_in_proj

__all__ = [
    "ACTIVATIONS",
    "GELUTanh",
    "BlockConfig",
    "FeedForward",
    "EncoderBlock",
    "DecoderBlock",
    "DecoderCache",
    "TORCH_RENAMES",
    "load_torch_layers",
    "torch_layer_config",
]


class GELUTanh(nn.GELU):
    """GELU with the tanh approximation, as GPT-2 uses (Hugging Face's ``"gelu_new"``)."""

    def __init__(self) -> None:
        super().__init__(approximate="tanh")


#: The activations FeedForward knows, as module classes (no lambdas on modules). "gelu" is the
#: exact GELU (BERT, ViT), "gelu_tanh" its tanh approximation (GPT-2). "swiglu" is SiLU applied
#: to a gate that multiplies a second projection (Shazeer, 2020).
ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "gelu_tanh": GELUTanh,
    "swiglu": nn.SiLU,
}

#: PyTorch's Transformer-layer names that differ from ours, as (theirs, ours) pairs. Its packed
#: ``in_proj_weight`` is unpacked by :func:`mtlib.loading.split_in_proj`.
TORCH_RENAMES: list[tuple[str, str]] = [
    ("linear1", "ff.linear1"),
    ("linear2", "ff.linear2"),
    ("multihead_attn", "cross_attn"),
]


@dataclass
class BlockConfig:
    """Sizes and switches of a Transformer block; every block of a model shares one.

    The defaults are the paper's base model.
    """

    d_model: int = 512  # model width
    num_heads: int = 8  # attention heads h; d_model % h == 0
    d_ff: int = 2048  # feed-forward hidden width
    dropout: float = 0.1  # on attention weights, feed-forward hidden units and residuals
    activation: str = "relu"  # "relu", "gelu", "gelu_tanh" or "swiglu"
    norm_first: bool = False  # False: Post-LN (the paper); True: Pre-LN
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (PyTorch's default)
    bias: bool = True  # biases in linear layers and LayerNorms

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "d_ff"):
            _checks.positive_int(getattr(self, name), name)
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        _checks.probability(self.dropout, "dropout")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}"
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")


def _layer_norm(config: BlockConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)


def _check_input(x: object, d_model: int, name: str) -> Tensor:
    return _checks.float_tensor(
        x, name, f"(batch, seq_len, d_model={d_model})", (None, None, d_model)
    )


class FeedForward(nn.Module):
    """Position-wise feed-forward network, applied to every token independently.

    - ``"relu"`` / ``"gelu"`` / ``"gelu_tanh"``: ``linear2(dropout(act(linear1(x))))``, as in the paper and in
      PyTorch's layers (same submodule names).
    - ``"swiglu"``: ``w2(dropout(silu(w1(x)) * w3(x)))``, the gated variant of Llama
      (names as in Llama's checkpoints: ``w1`` the gate, ``w3`` the up projection, ``w2`` down).

    Args:
        d_model: input and output width (an int >= 1).
        d_ff: hidden width (an int >= 1).
        dropout: dropout on the hidden activations, in [0, 1).
        activation: ``"relu"``, ``"gelu"``, ``"gelu_tanh"`` or ``"swiglu"``.
        bias: whether the linear layers have biases.

    Shape:
        forward: (..., d_model) -> (..., d_model), a floating-point tensor.

    Raises:
        TypeError: a size that is not an int; an input that is not a floating-point tensor.
        ValueError: a size < 1, a dropout outside [0, 1), an unknown activation; an input
            whose last dimension is not ``d_model``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        dropout: float = 0.0,
        activation: str = "relu",
        bias: bool = True,
    ) -> None:
        super().__init__()
        _checks.positive_int(d_model, "d_model")
        _checks.positive_int(d_ff, "d_ff")
        _checks.probability(dropout, "dropout")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.d_model = d_model
        self.activation_name = activation
        self.gated = activation == "swiglu"
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)
        if self.gated:
            self.w1 = nn.Linear(d_model, d_ff, bias=bias)  # gate
            self.w3 = nn.Linear(d_model, d_ff, bias=bias)  # up
            self.w2 = nn.Linear(d_ff, d_model, bias=bias)  # down
        else:
            self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
            self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the network to every position.

        Args:
            x: input of shape (..., d_model).

        Returns:
            Tensor of shape (..., d_model).
        """
        _checks.float_tensor(x, "x", f"(..., d_model={self.d_model})")
        if x.dim() == 0 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {tuple(x.shape)}")
        if self.gated:
            hidden = self.activation(self.w1(x)) * self.w3(x)  # (..., d_ff)
            return self.w2(self.dropout(hidden))
        hidden = self.activation(self.linear1(x))  # (..., d_ff)
        return self.linear2(self.dropout(hidden))


_B = TypeVar("_B", bound="_Block")


class _Block(nn.Module):
    """What the encoder and decoder blocks share: the residual rule and loading PyTorch's layer."""

    norm_first: bool
    torch_layer: type[nn.Module]  # the PyTorch layer this block can be loaded from

    def _residual(
        self, x: Tensor, sublayer: Callable[[Tensor], Tensor], norm: nn.Module, dropout: nn.Module
    ) -> Tensor:
        """One sub-layer with its residual connection and LayerNorm: the ``norm_first`` switch."""
        if self.norm_first:  # Pre-LN
            return x + dropout(sublayer(norm(x)))
        return norm(x + dropout(sublayer(x)))  # Post-LN

    @classmethod
    def from_torch(cls: type[_B], layer: nn.Module) -> _B:
        """Build the block with the weights and settings of the matching PyTorch layer.

        Args:
            layer: an ``nn.TransformerEncoderLayer`` (for :class:`EncoderBlock`) or
                ``nn.TransformerDecoderLayer`` (for :class:`DecoderBlock`), built with
                ``batch_first=True`` and a ``"relu"`` or ``"gelu"`` activation.

        Returns:
            A block on the layer's device and dtype, in its mode (training or eval), computing
            the same function.

        Raises:
            TypeError: If ``layer`` is not the matching PyTorch layer.
            ValueError: If ``layer`` has ``batch_first=False`` or another activation.
        """
        if not isinstance(layer, cls.torch_layer):
            raise TypeError(
                f"layer must be an nn.{cls.torch_layer.__name__}, got {type(layer).__name__}"
            )
        assert isinstance(
            layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
        )  # for mypy
        block = cls(torch_layer_config(layer)).to(next(layer.parameters())).train(layer.training)
        load_torch_layers(block, layer)
        return block


class EncoderBlock(_Block):
    """One encoder layer: self-attention, then feed-forward, each with residual + LayerNorm.

    Post-LN (``norm_first=False``, the paper)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(ff(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(ff(norm2(x)))

    Args:
        config: a :class:`BlockConfig` (or a :class:`~mtlib.transformer.TransformerConfig`).
    """

    torch_layer = nn.TransformerEncoderLayer

    def __init__(self, config: BlockConfig) -> None:
        super().__init__()
        c = config
        self.d_model, self.norm_first = c.d_model, c.norm_first
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, dropout=c.dropout, bias=c.bias)
        self.ff = FeedForward(
            c.d_model, c.d_ff, dropout=c.dropout, activation=c.activation, bias=c.bias
        )
        self.norm1, self.norm2 = _layer_norm(c), _layer_norm(c)
        self.dropout1, self.dropout2 = nn.Dropout(c.dropout), nn.Dropout(c.dropout)

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Run the block on ``x`` (B, T, d_model) -> (B, T, d_model).

        A decoder-only model (GPT) is a stack of these blocks with ``is_causal=True`` and, when
        generating token by token, one :class:`~mtlib.attention.KVCache` per block.

        Args:
            x: input of shape (B, T, d_model).
            mask: bool mask (True = may attend) broadcastable to (B, H, T, T_keys); e.g. a
                padding mask (B, 1, 1, T), as :func:`mtlib.masks.padding_mask` builds it. A 2-D
                mask is always read as (T, T_keys), the same for every sequence: a (B, T)
                padding mask is refused, and when B == T a 2-D mask is refused as ambiguous
                unless it reads the same either way (equal rows, or exactly ``causal_mask``),
                so give padding masks their 4-D shape.
            is_causal: each position attends only to itself and earlier ones (with a cache,
                the new positions are the last ones).
            cache: keys and values of earlier positions, appended to in place.
        """
        _check_input(x, self.d_model, "x")

        def attend(h: Tensor) -> Tensor:
            return self.self_attn(h, mask=mask, is_causal=is_causal, cache=cache)[0]

        x = self._residual(x, attend, self.norm1, self.dropout1)
        return self._residual(x, self.ff, self.norm2, self.dropout2)

    def forward_with_weights(
        self, x: Tensor, *, mask: Tensor | None = None, is_causal: bool = False
    ) -> tuple[Tensor, Tensor]:
        """:meth:`forward` (without a cache), also returning the attention weights.

        The attention takes its explicit path to produce them; the block computes the same
        function (a test asserts it, Post-LN and Pre-LN).

        Returns:
            ``(x, weights)``: (B, T, d_model) and every head's weights (B, H, T, T).
        """
        _check_input(x, self.d_model, "x")
        weights: list[Tensor] = []

        def attend(h: Tensor) -> Tensor:
            out, w = self.self_attn(
                h, mask=mask, is_causal=is_causal, need_weights=True, average_attn_weights=False
            )
            assert w is not None  # for mypy: requested above
            weights.append(w)  # (B, H, T, T)
            return out

        x = self._residual(x, attend, self.norm1, self.dropout1)
        return self._residual(x, self.ff, self.norm2, self.dropout2), weights[0]


@dataclass
class DecoderCache:
    """What one :class:`DecoderBlock` keeps between decoding steps.

    Attributes:
        self_attn: keys and values of the tokens decoded so far, (B, H, t, Dh), appended to
            at every step.
        cross_attn: the encoder memory projected to keys and values, (B, H, S, Dh), computed
            on the first step and reused (a static cache).

    ``copy.copy`` copies both :class:`~mtlib.attention.KVCache` objects (each a branch that
    grows on its own), so a copy can be decoded further without touching the original.
    """

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=functools.partial(KVCache, static=True))

    @property
    def length(self) -> int:
        """Number of target positions decoded so far."""
        return self.self_attn.length

    def __copy__(self) -> DecoderCache:
        """A branch of this cache: its own KV caches, sharing the positions cached so far."""
        return type(self)(copy.copy(self.self_attn), copy.copy(self.cross_attn))

    def reset(self) -> None:
        """Empty both caches."""
        self.self_attn.reset()
        self.cross_attn.reset()

    def reorder(self, index: Tensor) -> None:
        """Keep the batch rows ``index`` (long, (B',)): beam search follows each beam's parent."""
        for cache in (self.self_attn, self.cross_attn):
            if cache.k is not None and cache.v is not None:
                cache.k = cache.k.index_select(0, index)  # (B', H, T, Dh)
                cache.v = cache.v.index_select(0, index)  # (B', H, T, Dh)


class DecoderBlock(_Block):
    """One decoder layer: masked self-attention, cross-attention to the encoder, feed-forward.

    Post-LN (``norm_first=False``)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(cross_attn(x, memory)))
        x = norm3(x + dropout3(ff(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(cross_attn(norm2(x), memory))
        x = x + dropout3(ff(norm3(x)))

    Args:
        config: a :class:`BlockConfig` (or a :class:`~mtlib.transformer.TransformerConfig`).
    """

    torch_layer = nn.TransformerDecoderLayer

    def __init__(self, config: BlockConfig) -> None:
        super().__init__()
        c = config
        self.d_model, self.norm_first = c.d_model, c.norm_first
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, dropout=c.dropout, bias=c.bias)
        self.cross_attn = MultiHeadAttention(c.d_model, c.num_heads, dropout=c.dropout, bias=c.bias)
        self.ff = FeedForward(
            c.d_model, c.d_ff, dropout=c.dropout, activation=c.activation, bias=c.bias
        )
        self.norm1, self.norm2, self.norm3 = _layer_norm(c), _layer_norm(c), _layer_norm(c)
        self.dropout1, self.dropout2, self.dropout3 = (nn.Dropout(c.dropout) for _ in range(3))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        *,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Run the block on ``x`` (B, T, d_model) -> (B, T, d_model).

        Args:
            x: target representations of shape (B, T, d_model); with a cache, only the new
                positions.
            memory: encoder output of shape (B, S, d_model).
            self_mask: bool mask for self-attention, broadcastable to (B, H, T, t + T) where t
                is the number of cached positions; usually ``causal_mask(T, t + T)``. The block
                adds no causal mask itself.
            memory_mask: bool mask for cross-attention, broadcastable to (B, H, T, S); usually
                the source padding mask (B, 1, 1, S). As in :meth:`EncoderBlock.forward`, a 2-D
                mask is read as (T, S), never as (B, S) (refused as ambiguous when B == T).
            cache: a :class:`DecoderCache`, updated in place.
        """
        _check_input(x, self.d_model, "x")
        expected = f"(batch={x.shape[0]}, src_len, d_model={self.d_model}) like x"
        _checks.float_tensor(memory, "memory", expected, (x.shape[0], None, self.d_model))
        own, cross = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)

        def self_attention(h: Tensor) -> Tensor:
            return self.self_attn(h, mask=self_mask, cache=own)[0]

        def cross_attention(h: Tensor) -> Tensor:
            return self.cross_attn(h, memory, memory, mask=memory_mask, cache=cross)[0]

        x = self._residual(x, self_attention, self.norm1, self.dropout1)
        x = self._residual(x, cross_attention, self.norm2, self.dropout2)
        return self._residual(x, self.ff, self.norm3, self.dropout3)


# --------------------------------------------------------------------------------------------
# Loading PyTorch's layers and stacks
# --------------------------------------------------------------------------------------------


def load_torch_layers(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy a PyTorch Transformer layer or stack into ours: unpack ``in_proj``, rename, load.

    Args:
        ours: an :class:`EncoderBlock`, :class:`DecoderBlock` or a stack of them.
        theirs: the matching ``nn.TransformerEncoderLayer``/``DecoderLayer``/``Encoder``/``Decoder``.
    """
    load_weights(ours, split_in_proj(dict(theirs.named_parameters())), TORCH_RENAMES)


def _torch_activation(layer: nn.Module) -> str:
    """Name of a PyTorch Transformer layer's activation ("relu" or "gelu")."""
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"layer.activation must be relu or gelu to be loaded, got {act!r}")


def torch_layer_config(
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer, name: str = "layer"
) -> BlockConfig:
    """The :class:`BlockConfig` of a PyTorch Transformer layer.

    Args:
        layer: an ``nn.TransformerEncoderLayer`` or ``nn.TransformerDecoderLayer``,
            built with ``batch_first=True``.
        name: what to call ``layer`` in error messages.

    Returns:
        The matching configuration.

    Raises:
        ValueError: If ``layer`` has ``batch_first=False`` or an activation other than relu or
            gelu.
    """
    _check_batch_first(layer.self_attn, f"{name}.self_attn")
    return BlockConfig(
        d_model=layer.self_attn.embed_dim,
        num_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        activation=_torch_activation(layer),
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
        bias=layer.linear1.bias is not None,
    )
