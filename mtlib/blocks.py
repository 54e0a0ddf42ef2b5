"""The Transformer's blocks: feed-forward, encoder block and decoder block.

Each block is one box of the paper's figure 1: attention, then a position-wise feed-forward
network, each wrapped in a residual connection and a LayerNorm. Where the LayerNorm goes is
the one flag that the text names, ``norm_first``:

- **Post-LN** (``norm_first=False``, the original paper):
  ``x = norm(x + dropout(sublayer(x)))``;
- **Pre-LN** (``norm_first=True``, GPT-2 and most models since):
  ``x = x + dropout(sublayer(norm(x)))``.

Submodule names follow PyTorch's ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``
(``self_attn``, ``norm1``, ``dropout1``, ...), so :meth:`EncoderBlock.from_torch` and
:meth:`DecoderBlock.from_torch` are a short table of name pairs (:data:`ENCODER_LAYER_PAIRS`,
:data:`DECODER_LAYER_PAIRS`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib.attention import KVCache, MultiHeadAttention

__all__ = [
    "ACTIVATIONS",
    "FeedForward",
    "EncoderBlock",
    "DecoderBlock",
    "DecoderCache",
    "ENCODER_LAYER_PAIRS",
    "DECODER_LAYER_PAIRS",
    "attention_pairs",
    "copy_weights",
    "torch_layer_config",
]

# The activations FeedForward knows, as module classes (no lambdas on modules).
# "swiglu" is SiLU applied to a gate that multiplies a second projection (Shazeer, 2020).
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swiglu": nn.SiLU}

# A weight table row: (our parameter name, the reference's name, chunk). ``chunk`` is None for
# a plain copy, or 0/1/2 to take the q/k/v third of a packed ``in_proj`` tensor.
NamePair = tuple[str, str, int | None]


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")


def _check_input(x: object, d_model: int, name: str) -> None:
    """Check that ``x`` is a floating tensor of shape (B, T, d_model)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor of shape (batch, seq_len, d_model={d_model}), "
                        f"got {type(x).__name__}")  # fmt: skip
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point Tensor, got dtype {x.dtype}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must have shape (batch, seq_len, d_model={d_model}), "
                         f"got {tuple(x.shape)}")  # fmt: skip


class FeedForward(nn.Module):
    """Position-wise feed-forward network, applied to every token independently.

    - ``"relu"`` / ``"gelu"``: ``linear2(dropout(act(linear1(x))))``, as in the paper and in
      PyTorch's layers (same submodule names).
    - ``"swiglu"``: ``w2(dropout(silu(w1(x)) * w3(x)))``, the gated variant of Llama
      (names as in Llama's checkpoints: ``w1`` the gate, ``w3`` the up projection, ``w2`` down).

    Args:
        d_model: input and output width.
        d_ff: hidden width.
        dropout: dropout on the hidden activations.
        activation: ``"relu"``, ``"gelu"`` or ``"swiglu"``.
        bias: whether the linear layers have biases.

    Shape:
        forward: (..., d_model) -> (..., d_model).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        bias: bool = True,
    ) -> None:
        super().__init__()
        _check_activation(activation)
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
        if self.gated:
            hidden = self.activation(self.w1(x)) * self.w3(x)  # (..., d_ff)
            return self.w2(self.dropout(hidden))
        hidden = self.activation(self.linear1(x))  # (..., d_ff)
        return self.linear2(self.dropout(hidden))


class EncoderBlock(nn.Module):
    """One encoder layer: self-attention, then feed-forward, each with residual + LayerNorm.

    Post-LN (``norm_first=False``, the paper)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(ff(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(ff(norm2(x)))

    Args:
        d_model: model width.
        num_heads: number of attention heads.
        d_ff: hidden width of the feed-forward network.
        dropout: dropout on attention weights, feed-forward hidden units and both residuals.
        activation: feed-forward activation, see :class:`FeedForward`.
        norm_first: Pre-LN if True, Post-LN if False.
        layer_norm_eps: LayerNorm epsilon.
        bias: whether linear layers and LayerNorms have biases.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.ff = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Run the block.

        Args:
            x: input of shape (B, T, d_model).
            mask: bool mask (True = may attend) or float bias, broadcastable to
                (B, H, T, T); e.g. a padding mask (B, 1, 1, T).

        Returns:
            Tensor of shape (B, T, d_model).
        """
        _check_input(x, self.d_model, "x")
        if self.norm_first:  # Pre-LN
            x = x + self._attention(self.norm1(x), mask)
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:  # Post-LN
            x = self.norm1(x + self._attention(x, mask))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return x

    def _attention(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """Self-attention sub-layer, before the residual: (B, T, d) -> (B, T, d)."""
        out, _ = self.self_attn(x, mask=mask)
        return self.dropout1(out)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderBlock:
        """Build an :class:`EncoderBlock` with the weights and settings of a PyTorch layer.

        Args:
            layer: an ``nn.TransformerEncoderLayer`` built with ``batch_first=True`` and a
                ``"relu"`` or ``"gelu"`` activation.

        Returns:
            A block on the layer's device and dtype computing the same function.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"layer must be an nn.TransformerEncoderLayer, got {type(layer).__name__}")
        block = cls(**torch_layer_config(layer)).to(layer.linear1.weight)
        copy_weights(block, dict(layer.named_parameters()), ENCODER_LAYER_PAIRS)
        return block


@dataclass
class DecoderCache:
    """What one :class:`DecoderBlock` keeps between decoding steps.

    Attributes:
        self_attn: keys and values of the tokens decoded so far, (B, H, t, Dh), appended to
            at every step.
        cross_attn: the encoder memory projected to keys and values, (B, H, S, Dh), computed
            on the first step and reused (a static cache).
    """

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=functools.partial(KVCache, static=True))

    @property
    def length(self) -> int:
        """Number of target positions decoded so far."""
        return self.self_attn.length

    def reset(self) -> None:
        """Empty both caches."""
        self.self_attn.reset()
        self.cross_attn.reset()

    def reorder(self, index: Tensor) -> None:
        """Keep the batch rows ``index`` (beam search: follow each beam's parent).

        Args:
            index: long tensor of shape (B',) of rows to keep, in order.
        """
        for cache in (self.self_attn, self.cross_attn):
            if cache.filled:
                cache.k = cache.k.index_select(0, index)  # (B', H, T, Dh)
                cache.v = cache.v.index_select(0, index)  # (B', H, T, Dh)


class DecoderBlock(nn.Module):
    """One decoder layer: masked self-attention, cross-attention to the encoder, feed-forward.

    Post-LN (``norm_first=False``)::

        x = norm1(x + dropout1(self_attn(x)))
        x = norm2(x + dropout2(cross_attn(x, memory)))
        x = norm3(x + dropout3(ff(x)))

    Pre-LN (``norm_first=True``)::

        x = x + dropout1(self_attn(norm1(x)))
        x = x + dropout2(cross_attn(norm2(x), memory))
        x = x + dropout3(ff(norm3(x)))

    Args: as :class:`EncoderBlock`.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.ff = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Run the block.

        Args:
            x: target representations of shape (B, T, d_model); with a cache, only the new
                positions.
            memory: encoder output of shape (B, S, d_model).
            self_mask: mask for self-attention, broadcastable to (B, H, T, t + T) where t is
                the number of cached positions; usually ``causal_mask(T, t + T)``. The block
                adds no causal mask itself.
            memory_mask: mask for cross-attention, broadcastable to (B, H, T, S); usually
                the source padding mask (B, 1, 1, S).
            cache: a :class:`DecoderCache`, updated in place.

        Returns:
            Tensor of shape (B, T, d_model).
        """
        _check_input(x, self.d_model, "x")
        _check_input(memory, self.d_model, "memory")
        if memory.shape[0] != x.shape[0]:
            raise ValueError(f"memory must have shape (batch={x.shape[0]}, src_len, d_model) like x, "
                             f"got {tuple(memory.shape)}")  # fmt: skip
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        if self.norm_first:  # Pre-LN
            x = x + self._self_attention(self.norm1(x), self_mask, self_cache)
            x = x + self._cross_attention(self.norm2(x), memory, memory_mask, cross_cache)
            x = x + self.dropout3(self.ff(self.norm3(x)))
        else:  # Post-LN
            x = self.norm1(x + self._self_attention(x, self_mask, self_cache))
            x = self.norm2(x + self._cross_attention(x, memory, memory_mask, cross_cache))
            x = self.norm3(x + self.dropout3(self.ff(x)))
        return x

    def _self_attention(self, x: Tensor, mask: Tensor | None, cache: KVCache | None) -> Tensor:
        """Masked self-attention sub-layer, before the residual: (B, T, d) -> (B, T, d)."""
        out, _ = self.self_attn(x, mask=mask, cache=cache)
        return self.dropout1(out)

    def _cross_attention(
        self, x: Tensor, memory: Tensor, mask: Tensor | None, cache: KVCache | None
    ) -> Tensor:
        """Cross-attention sub-layer, before the residual: (B, T, d) -> (B, T, d)."""
        out, _ = self.cross_attn(x, memory, memory, mask=mask, cache=cache)
        return self.dropout2(out)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderBlock:
        """Build a :class:`DecoderBlock` with the weights and settings of a PyTorch layer.

        Args:
            layer: an ``nn.TransformerDecoderLayer`` built with ``batch_first=True`` and a
                ``"relu"`` or ``"gelu"`` activation.

        Returns:
            A block on the layer's device and dtype computing the same function.
        """
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(f"layer must be an nn.TransformerDecoderLayer, got {type(layer).__name__}")
        block = cls(**torch_layer_config(layer)).to(layer.linear1.weight)
        copy_weights(block, dict(layer.named_parameters()), DECODER_LAYER_PAIRS)
        return block


# --------------------------------------------------------------------------------------------
# Loading PyTorch's layers: a table of name pairs and one copy function.
# --------------------------------------------------------------------------------------------


def attention_pairs(ours: str, theirs: str) -> list[NamePair]:
    """Name pairs for one ``nn.MultiheadAttention`` loaded into a :class:`MultiHeadAttention`.

    PyTorch packs W_Q, W_K, W_V into one ``in_proj_weight`` of shape (3 d_model, d_model);
    chunk 0, 1, 2 of it are our ``q_proj``, ``k_proj``, ``v_proj``.

    Args:
        ours: prefix of our attention module, e.g. ``"cross_attn"``.
        theirs: prefix of PyTorch's, e.g. ``"multihead_attn"``.

    Returns:
        List of (our name, their name, chunk) rows.
    """
    rows: list[NamePair] = []
    for kind in ("weight", "bias"):
        rows += [
            (f"{ours}.q_proj.{kind}", f"{theirs}.in_proj_{kind}", 0),
            (f"{ours}.k_proj.{kind}", f"{theirs}.in_proj_{kind}", 1),
            (f"{ours}.v_proj.{kind}", f"{theirs}.in_proj_{kind}", 2),
            (f"{ours}.out_proj.{kind}", f"{theirs}.out_proj.{kind}", None),
        ]
    return rows


def _plain_pairs(pairs: Iterable[tuple[str, str]]) -> list[NamePair]:
    """Rows for parameters copied as they are, weights and biases."""
    return [(f"{o}.{kind}", f"{t}.{kind}", None) for o, t in pairs for kind in ("weight", "bias")]


# nn.TransformerEncoderLayer -> EncoderBlock
ENCODER_LAYER_PAIRS: list[NamePair] = attention_pairs("self_attn", "self_attn") + _plain_pairs([
    ("ff.linear1", "linear1"),
    ("ff.linear2", "linear2"),
    ("norm1", "norm1"),
    ("norm2", "norm2"),
])  # fmt: skip

# nn.TransformerDecoderLayer -> DecoderBlock (PyTorch calls the cross-attention multihead_attn)
DECODER_LAYER_PAIRS: list[NamePair] = (
    attention_pairs("self_attn", "self_attn")
    + attention_pairs("cross_attn", "multihead_attn")
    + _plain_pairs([
        ("ff.linear1", "linear1"),
        ("ff.linear2", "linear2"),
        ("norm1", "norm1"),
        ("norm2", "norm2"),
        ("norm3", "norm3"),
    ])
)  # fmt: skip


@torch.no_grad()
def copy_weights(module: nn.Module, source: dict[str, Tensor], pairs: Iterable[NamePair]) -> None:
    """Copy ``source`` tensors into ``module``'s parameters following a table of name pairs.

    Every copy is shape-checked. A row whose two names are both absent is skipped (a bias
    that neither side has); afterwards every parameter of ``module`` must have been written
    and every tensor of ``source`` read, so nothing is silently left at its random init.

    Args:
        module: the module to fill (ours).
        source: the reference's tensors by name, e.g. ``dict(layer.named_parameters())``.
        pairs: rows (our name, their name, chunk); ``chunk`` in {0, 1, 2} takes that third of
            a packed q/k/v tensor along dim 0.

    Raises:
        ValueError: on a name present on one side only, a shape mismatch, or a parameter
            left unwritten / a source tensor left unread.
    """
    ours = dict(module.named_parameters())
    written: set[str] = set()
    read: set[str] = set()
    for our_name, their_name, chunk in pairs:
        if our_name not in ours and their_name not in source:
            continue
        if our_name not in ours or their_name not in source:
            raise ValueError(f"{our_name} <- {their_name}: present on one side only")
        value = source[their_name]
        if chunk is not None:
            value = value.chunk(3, dim=0)[chunk]  # (d_out, ...) third of the packed tensor
        if ours[our_name].shape != value.shape:
            raise ValueError(f"shape mismatch copying {their_name} into {our_name}: "
                             f"{tuple(value.shape)} vs ours {tuple(ours[our_name].shape)}")  # fmt: skip
        ours[our_name].copy_(value)
        written.add(our_name)
        read.add(their_name)
    if set(ours) - written or set(source) - read:
        raise ValueError(f"weight table incomplete: ours not written {sorted(set(ours) - written)}, "
                         f"theirs not read {sorted(set(source) - read)}")  # fmt: skip


def _torch_activation(layer: nn.Module) -> str:
    """Name of a PyTorch Transformer layer's activation ("relu" or "gelu")."""
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"layer.activation must be relu or gelu to be loaded, got {act!r}")


def torch_layer_config(layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> dict:
    """The constructor arguments of our block that match a PyTorch Transformer layer.

    Args:
        layer: an ``nn.TransformerEncoderLayer`` or ``nn.TransformerDecoderLayer``.

    Returns:
        Keyword arguments for :class:`EncoderBlock` / :class:`DecoderBlock`.
    """
    if not layer.self_attn.batch_first:
        raise ValueError("layer must be built with batch_first=True (mtlib is batch-first)")
    return {
        "d_model": layer.self_attn.embed_dim,
        "num_heads": layer.self_attn.num_heads,
        "d_ff": layer.linear1.out_features,
        "dropout": layer.dropout.p,
        "activation": _torch_activation(layer),
        "norm_first": layer.norm_first,
        "layer_norm_eps": layer.norm1.eps,
        "bias": layer.linear1.bias is not None,
    }
