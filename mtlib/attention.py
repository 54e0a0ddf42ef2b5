"""Attention: scaled dot-product, multi-head and additive (Bahdanau).

Read this file from top to bottom; it follows the book:

1. :func:`masked_softmax`: a softmax that ignores masked keys (chapter 5).
2. :func:`scaled_dot_product_attention`: ``softmax(Q K^T / sqrt(d_k) + bias) V``, written out
   (chapter 3).
3. :class:`KVCache`: the keys and values a decoder keeps between steps (chapters 10, 12).
4. :class:`MultiHeadAttention`: ``h`` attentions side by side on learned projections (chapter 4),
   with an explicit path (the code above) and a fused path (PyTorch's kernel), proven equal.
5. :class:`AdditiveAttention`: ``v^T tanh(W_q q + W_k k)``, the attention of chapter 1.
6. :func:`tiled_attention`: exact attention block by block with an online softmax, never
   holding the ``(Tq, Tk)`` matrix (FlashAttention's idea; chapter 12).

Masks follow :mod:`mtlib.masks`: ``mask`` is a bool tensor, True = "may attend", broadcastable
to the scores ``(batch, heads, q_len, k_len)`` with at least 2 dimensions; a float or integer
mask is refused, and so is a 2-D mask that could be a ``(batch, k_len)`` padding mask (see
:func:`mtlib.masks.check_mask`). An additive float ``bias`` (ALiBi, T5's relative positions) is
a separate argument; both may be given. A query with nothing to attend to gets zero weights and
a zero attention output, never NaN, when the mask comes from the data (it has the batch
dimension of the scores) or from a ``-inf`` bias; a mask shared by every sequence (2-D, or with
a batch dimension of 1 on a batch of several) that leaves a query nothing is refused with a
``ValueError`` as a likely bug (PyTorch's sign, a causal mask without its diagonal).

float16 and bfloat16 inputs: the explicit path computes the scores, the softmax and the
weighted sum in float32 (``q k^T`` overflows float16's 65504 long before the scaling) and
returns the output and weights in the inputs' dtype, as PyTorch's kernels do.

Input checks live at the end of the file: they only raise errors, so the teaching code can be
read without them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import _checks
from mtlib import masks as _masks
from mtlib.loading import load_weights, split_in_proj
from mtlib.positional import RotaryEmbedding

__all__ = [
    "masked_softmax",
    "scaled_dot_product_attention",
    "KVCache",
    "MultiHeadAttention",
    "AdditiveAttention",
    "tiled_attention",
]

NEG_INF = float("-inf")
_HALF = (torch.float16, torch.bfloat16)  # the explicit path computes these in float32


# --------------------------------------------------------------------------------------------
# 1. Softmax over the allowed keys only
# --------------------------------------------------------------------------------------------


def masked_softmax(
    scores: Tensor, *, mask: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    """Softmax over the last dimension that gives masked keys exactly zero weight.

    Masked scores are set to ``-inf`` (never a large negative number such as -1e9, which still
    leaks weight when every key of a row is masked). A row with nothing to attend to would be
    ``softmax([-inf, ..., -inf]) = NaN``; here it gets all-zero weights instead, with finite
    gradients. Which rows are empty is read from ``mask`` and ``bias`` (every key masked, or
    given a ``-inf`` bias), never from the scores: a score that is itself ``-inf`` or NaN (an
    overflow, e.g. in float16) gives NaN as it does in ``torch.softmax``, with or without a
    mask. (:func:`scaled_dot_product_attention` computes float16 and bfloat16 scores in float32,
    so they do not overflow.) ``mask`` is not shape-checked here and may have empty rows.

    Args:
        scores: Attention scores of shape ``(..., Tq, Tk)``.
        mask: Bool mask, True = may attend, broadcastable to ``scores``.
        bias: Additive float bias broadcastable to ``scores`` (``-inf`` also forbids a key).

    Returns:
        Weights of shape ``(..., Tq, Tk)``; each row sums to 1, or to 0 if the mask and bias
        forbid all of its keys.
    """
    if mask is not None:
        _masks._check_bool(mask, "mask")
    forbidden = None if mask is None else ~mask  # broadcastable to (..., Tq, Tk)
    if bias is not None:
        bias = bias.to(scores.dtype)
        scores = scores + bias  # (..., Tq, Tk)
        forbidden = bias == NEG_INF if forbidden is None else forbidden | (bias == NEG_INF)
    if mask is not None:
        scores = scores.masked_fill(~mask, NEG_INF)  # (..., Tq, Tk)
    if mask is None and bias is None:
        return scores.softmax(dim=-1)  # (..., Tq, Tk)
    assert forbidden is not None  # for the type checker: a mask or a bias was given
    empty = forbidden.all(dim=-1, keepdim=True)  # (..., Tq or 1, 1): nothing to attend to
    weights = scores.masked_fill(empty, 0.0).softmax(dim=-1)  # a finite row keeps the grad finite
    return weights.masked_fill(empty, 0.0)  # (..., Tq, Tk), fully masked rows -> 0


# --------------------------------------------------------------------------------------------
# 2. Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V
# --------------------------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None = None,
    bias: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Scaled dot-product attention, written out step by step.

    Computes ``softmax(q k^T * scale + bias, masked) v`` with ``scale = 1 / sqrt(d_k)`` by
    default. How it relates to :func:`torch.nn.functional.scaled_dot_product_attention`
    (each point is checked by a test):

    - ``mask`` (bool, True = may attend) is PyTorch's boolean ``attn_mask``, and ``bias`` is its
      float ``attn_mask``; here both can be given at once.
    - ``mask`` needs at least 2 dimensions (for the same keys everywhere write
      ``mask[None, :]``, shape ``(1, Tk)``), and a 2-D mask is ``(Tq, Tk)``, the same for
      every sequence: when the batch size (the first leading dimension) equals ``Tq`` it is
      refused as ambiguous (it could be a ``(B, Tk)`` padding mask) unless its rows are all
      equal or it is exactly ``causal_mask(Tq, Tk)``; see :func:`mtlib.masks.check_mask`.
    - ``is_causal`` is PyTorch's when ``Tq == Tk``. When ``Tq < Tk`` the queries are the *last*
      ``Tq`` positions (as with a KV cache, :func:`mtlib.masks.causal_mask`), whereas PyTorch
      aligns them with the first ones. ``Tq > Tk`` is refused (the first queries would see
      no key); PyTorch's alignment is ``mask=torch.ones(Tq, Tk, dtype=torch.bool).tril()``.
      It may be combined with ``mask``.
    - ``dropout_p`` and ``scale`` are PyTorch's; everything after the tensors is keyword-only.
    - A query with nothing to attend to gets a zero output (PyTorch's kernels give NaN or,
      in recent versions, zeros depending on the backend) when its mask comes from the data
      (a batch dimension of the scores' size) or a ``-inf`` bias. A mask shared by every
      sequence (2-D, or a batch dimension of 1 on a batch of several) that leaves a query
      nothing raises ``ValueError`` instead: that is almost always a bug.
    - float16 and bfloat16 inputs are computed in float32 and the results cast back, so the
      scores cannot overflow and the error is no worse than PyTorch's.
    - It can return the attention weights.

    Args:
        q: Queries of shape ``(..., Tq, d_k)``.
        k: Keys of shape ``(..., Tk, d_k)``.
        v: Values of shape ``(..., Tk, d_v)``.
        mask: Bool mask, True = may attend, broadcastable to the scores ``(..., Tq, Tk)``, with
            at least 2 dimensions (see above).
        bias: Additive float bias broadcastable to the scores, with at least 2 dimensions.
        is_causal: Also forbid keys after each query (see above); needs ``Tk >= Tq``.
        dropout_p: Dropout probability applied to the weights, in [0, 1). Applied whenever
            > 0: pass 0.0 at evaluation time.
        scale: Positive factor applied to ``q k^T``. Defaults to ``1 / sqrt(d_k)``.
        return_weights: Also return the attention weights.

    Returns:
        ``out`` of shape ``(..., Tq, d_v)``, or ``(out, weights)`` with ``weights`` of shape
        ``(..., Tq, Tk)`` (after dropout: the weights that actually multiplied ``v``, in float32
        for half inputs, then cast), both in the dtype of ``q``.

    Raises:
        TypeError: If a tensor is not a float tensor, or ``mask`` is not a bool tensor.
        ValueError: If the shapes, dtypes or devices do not fit, the mask is 1-D, ambiguous or
            hides a query in every sequence, ``is_causal`` is set with ``Tq > Tk``, or
            ``dropout_p`` or ``scale`` is out of range.
    """
    _check_sdpa_inputs(q, k, v, mask, bias, dropout_p, scale, is_causal=is_causal)
    if is_causal:
        mask = _masks.combine(mask, _masks.causal_mask(q.shape[-2], k.shape[-2], device=q.device))
    dtype = q.dtype
    if dtype in _HALF:  # q k^T can pass float16's 65504 before scaling: work in float32
        q, k, v = q.float(), k.float(), v.float()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)
    weights = masked_softmax(scores, mask=mask, bias=bias)  # (..., Tq, Tk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (..., Tq, Tk)
    out = weights @ v  # (..., Tq, d_v)
    if dtype in _HALF:
        out, weights = out.to(dtype), weights.to(dtype)  # back to the inputs' dtype
    return (out, weights) if return_weights else out


def _fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    bias: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None = None,
) -> Tensor:
    """The same as :func:`scaled_dot_product_attention`, through PyTorch's fused kernel.

    PyTorch's kernel never builds the ``(Tq, Tk)`` weights. Rows with nothing to attend to are
    opened to every key for the call (so no version of the kernel can produce NaN) and their
    output is set to zero afterwards, matching the explicit path.

    Args:
        q: ``(B, H, Tq, Dh)``. k, v: ``(B, H, Tk, Dh)``.
        mask: Bool mask broadcastable to ``(B, H, Tq, Tk)``, or None.
        bias: Float bias broadcastable to ``(B, H, Tq, Tk)``, or None.
        dropout_p: Dropout probability on the weights (0.0 at evaluation time).
        is_causal: Causal masking done by the kernel itself; only with no mask/bias and Tq == Tk.
        scale: Factor on ``q k^T``; None means ``1 / sqrt(Dh)``.

    Returns:
        ``(B, H, Tq, Dh)``.
    """
    if mask is None and bias is None:
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )
    attn_mask: Tensor
    if bias is None:
        assert mask is not None
        empty = ~mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
        attn_mask = mask | empty  # (..., Tq, Tk)
    else:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, NEG_INF)  # (..., Tq, Tk)
        empty = (attn_mask == NEG_INF).all(dim=-1, keepdim=True)  # (..., Tq, 1)
        attn_mask = attn_mask.masked_fill(empty, 0.0)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale
    )  # (B, H, Tq, Dh)
    return out.masked_fill(empty, 0.0)  # (B, H, Tq, Dh)


# --------------------------------------------------------------------------------------------
# 3. The KV cache
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)  # compared by identity: it holds tensors
class KVCache:
    """Projected keys and values that a :class:`MultiHeadAttention` keeps between calls.

    **Self-attention (``static=False``, the default).** When decoding one token at a time,
    each step's keys and values are appended to the cache, and the new queries attend to all
    of them. Pass a mask built with ``causal_mask(q_len, cache.length + q_len)`` when a step
    feeds several tokens; for one token per step no mask is needed (it may see everything so
    far)::

        cache = KVCache()
        for t in range(T):
            y, _ = mha(x[:, t : t + 1], cache=cache)  # cache.length == t + 1 afterwards

    **Cross-attention (``static=True``).** The keys and values come from the encoder memory,
    which does not change while decoding: the first call projects ``key``/``value`` and stores
    them; later calls reuse them instead of projecting ``key``/``value`` again. They must pass
    the memory the cache was filled from (the same tensor, or one equal to it): another memory
    raises a ``ValueError`` instead of silently attending to the previous source. Call
    :meth:`reset` before decoding a new source.

    **Growth.** Appending with ``torch.cat`` would copy the whole cache at every step, which
    costs time quadratic in the length over a generation. Instead the keys and values live in
    a preallocated buffer with room to spare: a step writes its new positions in place, and
    ``k``/``v`` are views of the filled part. When the buffer is full, a twice-as-long one
    replaces it (one copy), so a generation of ``T`` tokens copies ``O(T)`` positions in all.
    (While gradients flow through the new keys, it appends with ``torch.cat``, which autograd
    can follow.)

    **Copies.** ``copy.copy(cache)`` is a branch that can grow on its own, as a hand-written
    beam search needs: it shares the cached keys and values (never written again) but not the
    growth buffer, so its first append copies them into a buffer of its own. ``copy.deepcopy``
    copies everything.

    Attributes:
        k: Keys of shape ``(B, H, T_cached, Dh)``, or None while empty.
        v: Values of shape ``(B, H, T_cached, Dh)``, or None while empty.
        static: True for a cross-attention cache that is filled once and then only read.
    """

    k: Tensor | None = None  # (B, H, T_cached, Dh) projected keys
    v: Tensor | None = None  # (B, H, T_cached, Dh) projected values
    static: bool = False  # True: encoder memory, projected on the first call, then reused
    # (B, H, capacity, Dh) buffers whose first T_cached positions are k and v
    _buffers: tuple[Tensor, Tensor] | None = field(default=None, init=False, repr=False)
    # static: the memory the keys and values were projected from (None: filled by update())
    _source: Tensor | None = field(default=None, init=False, repr=False)

    @property
    def length(self) -> int:
        """Number of cached positions ``T_cached`` (0 when empty)."""
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def filled(self) -> bool:
        """Whether the cache holds keys and values."""
        return self.k is not None

    def __copy__(self) -> KVCache:
        """A cache with the same keys and values whose appends leave this one alone.

        A field-by-field copy would share the growth buffer: both caches would then write their
        next keys into the same positions, each overwriting what the other appended.
        """
        branch = type(self)(k=self.k, v=self.v, static=self.static)  # _buffers: None, its own later
        branch._source = self._source
        return branch

    def reset(self) -> None:
        """Empty the cache (e.g. before decoding a new batch)."""
        self.k = None
        self.v = None
        self._buffers = None
        self._source = None

    def remember_source(self, memory: Tensor) -> None:
        """Record the memory a static cache was just filled from (checked on every later call)."""
        self._source = memory.detach()

    def check_source(self, memory: Tensor) -> None:
        """Refuse a filled static cache a memory other than the one it was filled from.

        The same tensor (what a decoding loop passes at every step), a view of it, or a tensor
        equal to it (a memory recomputed at every step) is accepted. A cache filled by
        :meth:`update` directly does not know its memory and accepts any.

        Raises:
            ValueError: if ``memory`` has another shape or other values (a new source).
        """
        source = self._source
        if source is None or source is memory:
            return
        if source.shape != memory.shape or not torch.equal(source, memory.detach()):
            raise ValueError(
                f"this cross-attention (static) cache was filled from another memory of shape "
                f"{tuple(source.shape)}, not from the memory of shape {tuple(memory.shape)} "
                "passed now: call cache.reset() before decoding a new source (its keys and "
                "values would be the previous source's)"
            )

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys and values (appended unless static) and return all of them.

        Args:
            k: New keys of shape ``(B, H, T_new, Dh)``.
            v: New values of shape ``(B, H, T_new, Dh)``.

        Returns:
            ``(k, v)``, each of shape ``(B, H, T_cached + T_new, Dh)``; a static cache that is
            already filled returns what it holds.
        """
        if self.k is not None and self.v is not None:
            if self.static:
                return self.k, self.v
            if k.requires_grad or v.requires_grad:  # keep the graph: autograd follows a cat
                k = torch.cat([self.k, k], dim=2)  # (B, H, T_cached + T_new, Dh)
                v = torch.cat([self.v, v], dim=2)  # (B, H, T_cached + T_new, Dh)
            else:
                k, v = self._append(k, v)
        self.k, self.v = k, v
        return k, v

    def _append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write ``k``, ``v`` after the cached positions in the buffers (grown if full)."""
        assert self.k is not None and self.v is not None
        for name, x, old in (("k", k, self.k), ("v", v, self.v)):
            if x.dim() != 4 or _heads_shape(x) != _heads_shape(old):
                raise ValueError(
                    f"new {name} must have shape (B, H, T_new, Dh) = {_heads_shape(old)} like "
                    f"the cached one, got {tuple(x.shape)}"
                )
        t, new = self.length, k.shape[2]
        if self._buffers is None or not self._holds(self._buffers, t + new):
            size = (*self.k.shape[:2], max(2 * (t + new), 16), self.k.shape[3])
            self._buffers = (self.k.new_empty(size), self.v.new_empty(size))  # (B, H, room, Dh)
            self._buffers[0][:, :, :t] = self.k  # the one copy of the cached positions
            self._buffers[1][:, :, :t] = self.v
        buf_k, buf_v = self._buffers
        buf_k[:, :, t : t + new] = k  # in place: the cached positions are not copied
        buf_v[:, :, t : t + new] = v
        return buf_k[:, :, : t + new], buf_v[:, :, : t + new]  # (B, H, T_cached + T_new, Dh)

    def _holds(self, buffers: tuple[Tensor, Tensor], length: int) -> bool:
        """Whether ``k``/``v`` are the start of ``buffers`` and these have room for ``length``."""
        return all(
            x is not None
            and x.data_ptr() == buf.data_ptr()
            and x.stride() == buf.stride()
            and x.dtype == buf.dtype
            and _heads_shape(x) == _heads_shape(buf)
            and buf.shape[2] >= length
            for x, buf in zip((self.k, self.v), buffers, strict=True)
        )


def _heads_shape(x: Tensor) -> tuple[int, ...]:
    """``(B, H, Dh)`` of a ``(B, H, T, Dh)`` tensor: everything but the length."""
    return (*x.shape[:2], *x.shape[3:])


# --------------------------------------------------------------------------------------------
# 4. Multi-head attention
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention, as in "Attention Is All You Need" (batch first).

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O`` with
    ``head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)``. The ``h`` heads are computed together:
    one projection of size ``h * d_head`` is split into ``h`` slices of ``d_head``, by default
    ``d_model / h`` (so the projections are ``d_model x d_model``). With ``head_dim`` the inner
    width ``h * head_dim`` is independent of ``d_model`` (T5 v1.1 / Flan-T5: ``d_model`` 512, 6
    heads of 64): ``W^Q, W^K, W^V`` map to ``h * head_dim`` and ``W^O`` maps back to ``d_model``.

    Two paths compute the same thing, and a test proves it: the explicit path calls
    :func:`scaled_dot_product_attention` above (and can return the weights); the fused path
    (``self.fused = True``, used when no weights are requested) calls PyTorch's
    :func:`torch.nn.functional.scaled_dot_product_attention`.

    Submodule names match ``nn.MultiheadAttention``'s unpacked weights; see :meth:`from_torch`.

    Args:
        d_model: Model width (``embed_dim`` in PyTorch); divisible by ``num_heads`` unless
            ``head_dim`` is given.
        num_heads: Number of heads ``h``.
        head_dim: Width ``d_head`` of one head, an int >= 1. None (the default) means
            ``d_model // num_heads``.
        kdim: Feature size of ``key``. Defaults to ``d_model``.
        vdim: Feature size of ``value``. Defaults to ``d_model``.
        dropout: Dropout probability on the attention weights (only in training), in [0, 1).
        bias: Whether the four projections have biases.
        rotary: A :class:`~mtlib.positional.RotaryEmbedding` of width ``d_head``:
            queries and keys are rotated by their positions inside each head (RoPE). Positions
            count from 0, plus the tokens already in a self-attention cache.
        scale: Positive factor on ``q k^T``; None (the default) means ``1 / sqrt(d_head)``.
            T5 uses ``1.0``: its query projection's initialisation absorbs the scaling.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
        scale: float | None = None,
        head_dim: int | None = None,
    ) -> None:
        super().__init__()
        _check_mha_config(d_model, num_heads, kdim, vdim, dropout, rotary, head_dim)
        _check_scale(scale, "1/sqrt(d_head)")
        self.scale = scale
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads if head_dim is None else head_dim  # d_head
        self.inner_dim = num_heads * self.head_dim  # all heads together; d_model by default
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.dropout = dropout
        self.fused = True  # use PyTorch's fused kernel when no weights are requested
        self.rotary = rotary
        self.q_proj = nn.Linear(d_model, self.inner_dim, bias=bias)  # W^Q for all heads
        self.k_proj = nn.Linear(self.kdim, self.inner_dim, bias=bias)  # W^K for all heads
        self.v_proj = nn.Linear(self.vdim, self.inner_dim, bias=bias)  # W^V for all heads
        self.out_proj = nn.Linear(self.inner_dim, d_model, bias=bias)  # W^O, back to d_model

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        bias: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        average_attn_weights: bool = True,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, Tq, d_model)``.
            key: ``(B, Tk, kdim)``. None means self-attention: ``key = value = query``.
            value: ``(B, Tk, vdim)``. None means ``value = key``.
            mask: Bool, True = may attend, broadcastable to ``(B, H, Tq, Tk)``: rank 2, e.g.
                ``(Tq, Tk)``; rank 4, e.g. ``(B, 1, 1, Tk)`` or ``(B, H, Tq, Tk)``; or rank 3 with
                a leading 1, ``(1, Tq, Tk)`` (another leading size is refused as ambiguous:
                batch or heads?). A 2-D mask is ``(Tq, Tk)`` for every sequence; when
                ``B == Tq`` it is refused as ambiguous (a ``(B, Tk)`` padding mask has that
                shape) unless its rows are all equal or it is exactly ``causal_mask(Tq, Tk)``:
                write ``(B, 1, 1, Tk)`` or ``(1, 1, Tq, Tk)``. Rank 1 is refused. With a
                cache, ``Tk`` counts the cached keys too.
            bias: Additive float bias broadcastable to ``(B, H, Tq, Tk)`` (ALiBi, T5).
            is_causal: Also apply ``causal_mask(Tq, Tk)`` (queries are the last positions;
                ``Tq > Tk`` raises ``ValueError``). Alone (no ``mask`` or ``bias``,
                ``Tq == Tk``, fused path) it is cheaper than passing that mask: the fused
                kernel skips fully masked blocks. Combined with a mask or bias it becomes a
                dense boolean mask (on a GPU that keeps the call off PyTorch's FlashAttention
                kernel, which takes no mask; not measured here).
            need_weights: Also return the attention weights (uses the explicit path, which
                computes float16 and bfloat16 in float32; the weights have the input's dtype).
            average_attn_weights: Average the returned weights over heads.
            cache: A :class:`KVCache`, updated in place (see its docstring).

        Returns:
            ``(out, weights)``: ``out`` of shape ``(B, Tq, d_model)``; ``weights`` of shape
            ``(B, Tq, Tk)`` (averaged) or ``(B, H, Tq, Tk)``, or None if not requested. A query
            with nothing to attend to gets a zero context, so its ``out`` is ``out_proj``'s bias
            (for a mask from the data or a ``-inf`` bias; a mask shared by every sequence
            that hides a query is refused, see :func:`mtlib.masks.check_mask`).

        Raises:
            TypeError: If an input, ``mask`` or ``cache`` has the wrong type, or ``mask`` is
                not bool.
            ValueError: If a shape, dtype or device does not fit, ``mask`` is 1-D, ambiguous
                or hides a query in every sequence, or ``is_causal`` is set with fewer keys
                than queries.
        """
        _check_mha_inputs(self, query, key, value, mask, bias, cache, is_causal)
        key = query if key is None else key  # self-attention
        value = key if value is None else value
        past = 0 if cache is None or cache.static else cache.length  # positions already cached
        q = self._split_heads(self.q_proj(query))  # (B, H, Tq, Dh)
        if self.rotary is not None:
            q = self.rotary.rotate(q, layout="BHTD", offset=past)  # (B, H, Tq, Dh)
        k, v = self._keys_values(key, value, cache, past)  # (B, H, Tk, Dh) each
        out, weights = self._attend(q, k, v, mask, bias, is_causal, need_weights)  # (B, H, Tq, Dh)
        out = self.out_proj(self._merge_heads(out))  # (B, Tq, d_model)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # (B, Tq, Tk)
        return out, weights

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, T, H * Dh)`` -> ``(B, H, T, Dh)``: one slice of the features per head."""
        batch, length, _ = x.shape
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (B, T, H, Dh)
        return x.transpose(1, 2)  # (B, H, T, Dh)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dh)`` -> ``(B, T, H * Dh)``: concatenate the heads' outputs."""
        batch, _, length, _ = x.shape
        x = x.transpose(1, 2)  # (B, T, H, Dh)
        return x.reshape(batch, length, self.inner_dim)  # (B, T, H * Dh)

    def _keys_values(
        self, key: Tensor, value: Tensor, cache: KVCache | None, past: int
    ) -> tuple[Tensor, Tensor]:
        """Project keys and values (rotated if RoPE), going through the cache when there is one."""
        if cache is not None and cache.static and cache.k is not None and cache.v is not None:
            cache.check_source(key)  # the memory it was filled from, not a new source
            return cache.k, cache.v  # encoder memory projected on an earlier step
        k = self._split_heads(self.k_proj(key))  # (B, H, Tk, Dh)
        v = self._split_heads(self.v_proj(value))  # (B, H, Tk, Dh)
        if self.rotary is not None:
            k = self.rotary.rotate(k, layout="BHTD", offset=past)  # new keys at their positions
        if cache is not None and cache.static:
            cache.remember_source(key)
        return (k, v) if cache is None else cache.update(k, v)  # (B, H, T_cached + Tk, Dh)

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        bias: Tensor | None,
        is_causal: bool,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """Run the fused or the explicit attention; returns ``(B, H, Tq, Dh)`` and the weights."""
        dropout_p = self.dropout if self.training else 0.0
        q_len, k_len = q.shape[-2], k.shape[-2]
        if is_causal and q_len == 1:  # one query, the last position: it may see every key
            is_causal = False  # (the decode step with a cache: no mask to build and apply)
        if is_causal and not (
            self.fused and not need_weights and mask is None and bias is None and q_len == k_len
        ):
            mask = _masks.combine(mask, _masks.causal_mask(q_len, k_len, device=q.device))
            is_causal = False  # the kernel cannot combine it with a mask itself
        if self.fused and not need_weights:
            return _fused_attention(q, k, v, mask, bias, dropout_p, is_causal, self.scale), None
        if mask is not None and mask.dim() == 2:  # checked; combined with the causal mask maybe
            mask = mask[None, None]  # (1, 1, Tq, Tk): the same for every sequence, unambiguously
        out, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            bias=bias,
            dropout_p=dropout_p,
            scale=self.scale,
            return_weights=True,
        )
        return out, (weights if need_weights else None)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a :class:`MultiHeadAttention` with the weights of an ``nn.MultiheadAttention``.

        Handles the packed ``in_proj_weight`` (when ``kdim == vdim == embed_dim``) and the
        separate ``q/k/v_proj_weight`` otherwise, with or without biases. The copy lives on
        ``m``'s device and dtype, in ``m``'s mode (training or eval: dropout follows).

        Args:
            m: The PyTorch module, built with ``batch_first=True`` (ours always is: a copy of a
                ``(T, B, E)`` module would take the same tensors in another layout).
                ``add_bias_kv`` and ``add_zero_attn`` are not supported.

        Returns:
            A new module computing the same function as ``m``.

        Raises:
            TypeError: If ``m`` is not an ``nn.MultiheadAttention``.
            ValueError: If ``m`` uses ``add_bias_kv`` or ``add_zero_attn``, or has
                ``batch_first=False``.
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be an nn.MultiheadAttention, got {type(m).__name__}")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError(
                "m must not use add_bias_kv or add_zero_attn: MultiHeadAttention has no equivalent"
            )
        _check_batch_first(m, "m")
        bias = m.in_proj_bias is not None
        ours = cls(m.embed_dim, m.num_heads, kdim=m.kdim, vdim=m.vdim, dropout=m.dropout, bias=bias)
        ours = ours.to(m.out_proj.weight).train(m.training)  # same device, dtype and mode
        load_weights(ours, split_in_proj(dict(m.named_parameters())))
        return ours

    def extra_repr(self) -> str:
        same = self.kdim == self.vdim == self.d_model
        dims = "" if same else f", kdim={self.kdim}, vdim={self.vdim}"
        if self.inner_dim != self.d_model:
            dims += f", head_dim={self.head_dim}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{dims}, dropout={self.dropout}, fused={self.fused}"


# --------------------------------------------------------------------------------------------
# 5. Additive (Bahdanau) attention
# --------------------------------------------------------------------------------------------


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al., 2015): ``score(q, k) = v^T tanh(W_q q + W_k k)``.

    Unlike dot-product attention, queries and keys may have different sizes: a small MLP
    scores every (query, key) pair.

    Args:
        qdim: Feature size of the queries.
        kdim: Feature size of the keys.
        hidden_dim: Width of the scoring MLP.
        dropout: Dropout probability on the attention weights (only in training), in [0, 1).
    """

    def __init__(self, qdim: int, kdim: int, hidden_dim: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        for name, size in (("qdim", qdim), ("kdim", kdim), ("hidden_dim", hidden_dim)):
            _checks.positive_int(size, name)
        _checks.probability(dropout, "dropout")
        self.qdim, self.kdim = qdim, kdim
        self.q_proj = nn.Linear(qdim, hidden_dim, bias=False)  # W_q
        self.k_proj = nn.Linear(kdim, hidden_dim, bias=False)  # W_k
        self.score_proj = nn.Linear(hidden_dim, 1, bias=False)  # v: one score per pair
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, *, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from each query to the keys, and average the values with those weights.

        Args:
            query: ``(B, Tq, qdim)``.
            key: ``(B, Tk, kdim)``.
            value: ``(B, Tk, vdim)``.
            mask: Bool, True = may attend, broadcastable to ``(B, Tq, Tk)``, e.g. ``(B, 1, Tk)``
                for padding: ``padding_mask(lengths)[:, 0]``. A 2-D mask is ``(Tq, Tk)``, refused
                as ambiguous when ``B == Tq`` unless it reads the same as ``(B, Tk)``, as in
                :func:`mtlib.masks.check_mask`.

        Returns:
            ``(out, weights)``: ``out`` of shape ``(B, Tq, vdim)``, ``weights`` of shape ``(B, Tq, Tk)``.
        """
        _check_additive_inputs(self, query, key, value, mask)
        q = self.q_proj(query).unsqueeze(2)  # (B, Tq, 1, hidden)
        k = self.k_proj(key).unsqueeze(1)  # (B, 1, Tk, hidden)
        scores = self.score_proj(torch.tanh(q + k)).squeeze(-1)  # (B, Tq, Tk)
        weights = self.dropout(masked_softmax(scores, mask=mask))  # (B, Tq, Tk)
        return weights @ value, weights  # (B, Tq, vdim), (B, Tq, Tk)


# --------------------------------------------------------------------------------------------
# 6. Tiled attention: exact attention without the (Tq, Tk) matrix (chapter 12)
# --------------------------------------------------------------------------------------------


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    block_size: int = 128,
    scale: float | None = None,
) -> Tensor:
    """Exact attention computed block by block: FlashAttention's idea in plain PyTorch.

    The ``(Tq, Tk)`` scores are never held whole. Each block of queries visits the keys one
    block at a time and keeps three running quantities per query: the largest score so far
    ``m``, the sum ``l`` of ``exp(score - m)`` and the weighted sum of values ``acc``. When a
    block raises the maximum to ``m'``, what was summed so far is rescaled by ``exp(m - m')``,
    so at the end ``acc / l`` is exactly ``softmax(Q K^T * scale) V`` (the "online softmax").

    - Extra memory without autograd (``torch.no_grad`` / ``inference_mode``):
      ``O(block_size^2)`` per step plus the output, linear in the length. Under autograd every
      block's weights are saved for the backward pass, about as much as the explicit path
      holds; FlashAttention avoids that by recomputing the blocks in the backward pass from
      the saved per-row log-sum-exp, which this function does not do.
    - float16 and bfloat16 inputs are computed in float32 (scores, ``m``, ``l`` and ``acc``,
      as FlashAttention keeps them) and the result cast back, so the error is no worse than
      :func:`scaled_dot_product_attention`'s.

    Args:
        q: ``(..., Tq, d_k)``.
        k: ``(..., Tk, d_k)``.
        v: ``(..., Tk, d_v)``.
        causal: Query ``i`` sees keys ``j <= i + Tk - Tq`` (queries are the last positions,
            as ``is_causal`` in :func:`scaled_dot_product_attention`); key blocks entirely in
            the future are skipped. With ``Tq > Tk`` the first ``Tq - Tk`` queries see no key
            and get zeros (``is_causal`` refuses that case).
        block_size: Queries and keys per block.
        scale: Multiplies the scores; defaults to ``1 / sqrt(d_k)``.

    Returns:
        ``(..., Tq, d_v)`` in the dtype of ``q``, equal to :func:`scaled_dot_product_attention`
        up to rounding (a query with no key to see gets zeros).
    """
    _check_sdpa_inputs(q, k, v, None, None, 0.0, scale)
    _checks.positive_int(block_size, "block_size")
    factor = q.shape[-1] ** -0.5 if scale is None else scale  # 1 / sqrt(d_k) by default
    q_len, k_len = q.shape[-2], k.shape[-2]
    offset = k_len - q_len  # causal: query i sees keys j <= i + offset
    work = torch.float32 if q.dtype in _HALF else q.dtype  # half: accumulate in float32
    blocks = []
    for i in range(0, q_len, block_size):
        q_blk = q[..., i : i + block_size, :].to(work) * factor  # (..., bq, d_k)
        rows = q_blk.shape[-2]
        row_max = q_blk.new_full((*q_blk.shape[:-1], 1), NEG_INF)  # (..., bq, 1): m
        row_sum = q_blk.new_zeros((*q_blk.shape[:-1], 1))  # (..., bq, 1): l
        acc = q_blk.new_zeros((*q_blk.shape[:-1], v.shape[-1]))  # (..., bq, d_v): acc
        stop = min(k_len, i + rows + offset) if causal else k_len  # later keys: all in the future
        for j in range(0, stop, block_size):
            k_blk = k[..., j : j + block_size, :].to(work)  # (..., bk, d_k)
            scores = q_blk @ k_blk.transpose(-2, -1)  # (..., bq, bk)
            if causal:
                query_pos = torch.arange(i, i + rows, device=q.device)[:, None] + offset
                key_pos = torch.arange(j, j + scores.shape[-1], device=q.device)[None, :]
                scores = scores.masked_fill(key_pos > query_pos, NEG_INF)  # (..., bq, bk)
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))  # m'
            ref = new_max.masked_fill(new_max == NEG_INF, 0.0)  # no key seen yet: avoid inf - inf
            p = torch.exp(scores - ref)  # (..., bq, bk), unnormalised weights
            rescale = torch.exp(row_max - ref)  # (..., bq, 1): exp(m - m')
            row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ v[..., j : j + block_size, :].to(work)  # (..., bq, d_v)
            row_max = new_max
        out = acc / row_sum.masked_fill(row_sum == 0, 1.0)  # no key seen: 0 / 1 = 0
        blocks.append(out.to(q.dtype))  # (..., bq, d_v), back to the inputs' dtype
    return torch.cat(blocks, dim=-2)  # (..., Tq, d_v)


# --------------------------------------------------------------------------------------------
# Input checks: run before any computation, so that a mistake gives a message naming the
# argument and the expected shape instead of a stack trace from inside a matmul.
# --------------------------------------------------------------------------------------------


def _check_bias(bias: object, q_len: int, k_len: int, batch_shape: tuple[int | None, ...]) -> None:
    if bias is None:
        return
    expected = f"(..., q_len={q_len}, k_len={k_len})"
    if not isinstance(bias, Tensor) or not bias.dtype.is_floating_point:
        got = f"dtype {bias.dtype}" if isinstance(bias, Tensor) else type(bias).__name__
        raise TypeError(
            f"bias must be a float Tensor broadcastable to {expected} (a bool mask goes in mask=), got {got}"
        )
    target = (*batch_shape, q_len, k_len)
    if not 2 <= bias.dim() <= len(target) or any(
        b != 1 and t is not None and b != t
        for b, t in zip(reversed(bias.shape), reversed(target), strict=False)
    ):
        raise ValueError(
            f"bias must be broadcastable to {expected} without growing it, got {tuple(bias.shape)}"
        )
    if k_len > 1 and bias.shape[-1] == 1:  # the same value for every key: the softmax removes it
        raise ValueError(
            f"bias has key dimension 1 but there are k_len={k_len} keys: a bias constant over the "
            "keys cancels in the softmax, so a positional bias built for one key (alibi_bias(H, 1) "
            "or rpb(1) in a cached decoder) silently gives no positions at all; build it for every "
            "key, e.g. alibi_bias(H, q_len, k_len)"
        )


def _check_sdpa_inputs(
    q: object,
    k: object,
    v: object,
    mask: object,
    bias: object,
    dropout_p: object,
    scale: object,
    *,
    is_causal: bool = False,
) -> None:
    q = _checks.float_tensor(q, "q", "(..., q_len, d_k)")
    k = _checks.float_tensor(k, "k", "(..., k_len, d_k)")
    v = _checks.float_tensor(v, "v", "(..., k_len, d_v)")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k and v must have the same rank >= 2, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k must have shape (..., k_len, d_k={q.shape[-1]}) like q, got {tuple(k.shape)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v must have shape (..., k_len={k.shape[-2]}, d_v) like k, got {tuple(v.shape)}"
        )
    try:
        batch_shape = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    except RuntimeError:
        raise ValueError(
            f"q, k and v leading dims must broadcast, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        ) from None
    _checks.same({"q": q, "k": k, "v": v}, "dtype")
    extra = {n: t for n, t in (("mask", mask), ("bias", bias)) if isinstance(t, Tensor)}
    _checks.same({"q": q, "k": k, "v": v, **extra}, "device")
    if is_causal and k.shape[-2] < q.shape[-2]:
        raise ValueError(
            f"is_causal needs at least as many keys as queries (the queries are the last "
            f"positions), got q_len={q.shape[-2]}, k_len={k.shape[-2]}. PyTorch's is_causal "
            "(first query with first key) is mask=torch.ones(q_len, k_len, dtype=torch.bool).tril()"
        )
    _masks.check_mask(mask, q.shape[-2], k.shape[-2], "mask", batch_shape=batch_shape)
    _check_bias(bias, q.shape[-2], k.shape[-2], batch_shape)
    _checks.probability(dropout_p, "dropout_p")
    _check_scale(scale, "1/sqrt(d_k)")


def _check_scale(scale: object, default: str) -> None:
    if scale is not None and (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not 0 < scale < float("inf")
    ):
        raise ValueError(
            f"scale must be a positive finite number or None ({default}), got {scale!r}"
        )


def _check_mha_config(
    d_model: int,
    num_heads: int,
    kdim: int | None,
    vdim: int | None,
    dropout: float,
    rotary: object,
    head_dim: int | None = None,
) -> None:
    _checks.positive_int(d_model, "d_model")
    _checks.positive_int(num_heads, "num_heads")
    if head_dim is None:
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} must be divisible by num_heads={num_heads} "
                "(or give head_dim, the width of one head)"
            )
        head_dim = d_model // num_heads
    else:
        _checks.positive_int(head_dim, "head_dim")
    for name, dim in (("kdim", kdim), ("vdim", vdim)):
        if dim is not None:
            _checks.positive_int(dim, name)
    _checks.probability(dropout, "dropout")
    if rotary is not None and (
        not isinstance(rotary, RotaryEmbedding) or rotary.head_dim != head_dim
    ):
        got = (
            f"head_dim={rotary.head_dim}"
            if isinstance(rotary, RotaryEmbedding)
            else type(rotary).__name__
        )
        raise ValueError(
            f"rotary must be a RotaryEmbedding(head_dim={head_dim}) or None, got {got}"
        )


def _check_mha_inputs(
    mha: MultiHeadAttention,
    query: object,
    key: object,
    value: object,
    mask: object,
    bias: object,
    cache: object,
    is_causal: bool,
) -> None:
    if key is None and value is not None:
        raise ValueError(
            "value was given without key: pass key too (key=None means self-attention)"
        )
    query = _checks.float_tensor(
        query, "query", f"(batch, q_len, d_model={mha.d_model})", (None, None, mha.d_model)
    )
    batch, q_len, k_len = query.shape[0], query.shape[1], query.shape[1]
    tensors = [("query", query)]
    if key is None and not mha.kdim == mha.vdim == mha.d_model:
        raise ValueError(
            f"key must have shape (batch={batch}, k_len, kdim={mha.kdim}) and value vdim={mha.vdim}: "
            f"self-attention (key=None) needs kdim == vdim == d_model={mha.d_model}"
        )
    if key is not None:
        key = _checks.float_tensor(
            key, "key", f"(batch={batch}, k_len, kdim={mha.kdim})", (batch, None, mha.kdim)
        )
        k_len = key.shape[1]
        value = key if value is None else value
        expected = f"(batch={batch}, k_len={k_len}, vdim={mha.vdim}) like key"
        tensors += [
            ("key", key),
            ("value", _checks.float_tensor(value, "value", expected, (batch, k_len, mha.vdim))),
        ]
    tensors.append(("parameters", mha.q_proj.weight))
    _checks.compatible(tensors)
    if mask is not None or bias is not None:
        _checks.compatible(
            [
                ("query", query),
                *((n, t) for n, t in (("mask", mask), ("bias", bias)) if isinstance(t, Tensor)),
            ],
            dtype=False,
        )
    k_len = _check_cache(mha, cache, batch, k_len)
    if is_causal and k_len < q_len:
        raise ValueError(
            f"is_causal needs at least as many keys as queries (q_len={q_len}), got k_len={k_len}: "
            "the queries are the last positions, as with a KV cache"
        )
    for name, t in (("mask", mask), ("bias", bias)):
        if isinstance(t, Tensor) and t.dim() == 3 and t.shape[0] != 1:
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} is ambiguous (batch or heads?): give it rank 4, "
                f"e.g. {name}[:, None] for (batch={batch}, 1, q_len, k_len)"
            )
    _masks.check_mask(mask, q_len, k_len, "mask", batch_shape=(batch, mha.num_heads))
    _check_bias(bias, q_len, k_len, (batch, mha.num_heads))


def _check_batch_first(m: nn.MultiheadAttention, name: str) -> None:
    """Refuses to copy a ``(T, B, E)`` PyTorch attention: the copy would take ``(B, T, E)``."""
    if not m.batch_first:
        raise ValueError(
            f"{name} has batch_first=False: it takes (T, B, E) inputs, and mtlib's copy would "
            f"take (B, T, E) ones, so the same tensors would give a wrong answer. Build the "
            f"PyTorch module with batch_first=True (same parameters: load its state_dict into "
            f"one) and transpose your inputs with x.transpose(0, 1)"
        )


def _check_cache(mha: MultiHeadAttention, cache: object, batch: int, k_len: int) -> int:
    """Checks the cache and returns the number of keys attended to (cached ones included)."""
    if cache is None:
        return k_len
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
    if cache.static and mha.rotary is not None:
        raise ValueError(
            "rotary positions apply to self-attention: a static (cross-attention) cache cannot use them"
        )
    if cache.k is None and cache.v is None:
        return k_len
    expected = f"(batch={batch}, num_heads={mha.num_heads}, T_cached, head_dim={mha.head_dim})"
    for name, x in (("cache.k", cache.k), ("cache.v", cache.v)):
        _checks.float_tensor(x, name, expected, (batch, mha.num_heads, None, mha.head_dim))
    assert cache.k is not None and cache.v is not None  # for mypy: checked just above
    if cache.v.shape != cache.k.shape:
        raise ValueError(
            f"cache.v must have the same shape as cache.k {tuple(cache.k.shape)}, got {tuple(cache.v.shape)}"
        )
    weight = mha.q_proj.weight
    for attr in ("dtype", "device"):
        _checks.same({"cache.k": cache.k, "cache.v": cache.v, "parameters": weight}, attr)
    return cache.length if cache.static else cache.length + k_len


def _check_additive_inputs(
    att: AdditiveAttention, query: object, key: object, value: object, mask: object
) -> None:
    query = _checks.float_tensor(
        query, "query", f"(batch, q_len, qdim={att.qdim})", (None, None, att.qdim)
    )
    batch = query.shape[0]
    key = _checks.float_tensor(
        key, "key", f"(batch={batch}, k_len, kdim={att.kdim})", (batch, None, att.kdim)
    )
    value = _checks.float_tensor(
        value,
        "value",
        f"(batch={batch}, k_len={key.shape[1]}, vdim) like key",
        (batch, key.shape[1], None),
    )
    tensors = {"query": query, "key": key, "value": value, "parameters": att.q_proj.weight}
    _checks.same(tensors, "dtype")
    _checks.same({**tensors, **({"mask": mask} if isinstance(mask, Tensor) else {})}, "device")
    _masks.check_mask(mask, query.shape[1], key.shape[1], "mask", batch_shape=(batch,))
