"""Attention: scaled dot-product, multi-head and additive (Bahdanau).

Read this file from top to bottom; it follows the book:

1. :func:`masked_softmax`: a softmax that ignores masked keys (chapter 5).
2. :func:`scaled_dot_product_attention`: ``softmax(Q K^T / sqrt(d_k)) V``, written out (chapter 3).
3. :class:`KVCache`: the keys and values a decoder keeps between steps (chapter 10).
4. :class:`MultiHeadAttention`: ``h`` attentions side by side on learned projections (chapter 4),
   with an explicit path (the code above) and a fused path (PyTorch's kernel), proven equal.
5. :class:`AdditiveAttention`: ``v^T tanh(W_q q + W_k k)``, the attention of chapter 1.

Masks follow :mod:`mtlib.masks`: a bool tensor with True = "may attend", or a float tensor
that is an additive bias (0 = keep, -inf = forbid), broadcastable to the scores
``(batch, heads, q_len, k_len)``. A query with nothing to attend to gets zero weights and a
zero output, never NaN.

Input checks live at the end of the file: they only raise errors, so the teaching code can be
read without them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtlib import masks as _masks

__all__ = [
    "masked_softmax",
    "scaled_dot_product_attention",
    "KVCache",
    "MultiHeadAttention",
    "AdditiveAttention",
]


# --------------------------------------------------------------------------------------------
# 1. Softmax over the allowed keys only
# --------------------------------------------------------------------------------------------


def _empty_rows(mask: Tensor) -> Tensor:
    """True for the queries (rows) that may attend to no key at all.

    Args:
        mask: Bool mask (True = may attend) or float bias (-inf = forbid), shape ``(..., Tq, Tk)``.

    Returns:
        Bool tensor of shape ``(..., Tq, 1)``.
    """
    allowed = mask if mask.dtype == torch.bool else mask > float("-inf")  # (..., Tq, Tk)
    return ~allowed.any(dim=-1, keepdim=True)  # (..., Tq, 1)


def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Softmax over the last dimension that gives masked keys exactly zero weight.

    Masked scores are set to ``-inf`` (never a large negative number such as -1e9, which still
    leaks weight when every key of a row is masked). A row with nothing to attend to would be
    ``softmax([-inf, ..., -inf]) = NaN``; here it gets all-zero weights instead, with finite
    gradients.

    Args:
        scores: Attention scores of shape ``(..., Tq, Tk)``.
        mask: Bool mask (True = may attend) or float additive bias, broadcastable to ``scores``.

    Returns:
        Weights of shape ``(..., Tq, Tk)``; each row sums to 1, or to 0 if fully masked.
    """
    if mask is None:
        return scores.softmax(dim=-1)  # (..., Tq, Tk)
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))  # (..., Tq, Tk)
    else:
        scores = scores + mask.to(scores.dtype)  # (..., Tq, Tk), additive bias
    empty = _empty_rows(mask)  # (..., Tq, 1)
    scores = scores.masked_fill(empty, 0.0)  # a finite row keeps softmax (and its grad) finite
    weights = scores.softmax(dim=-1)  # (..., Tq, Tk)
    return weights.masked_fill(empty, 0.0)  # (..., Tq, Tk), fully masked rows -> 0


# --------------------------------------------------------------------------------------------
# 2. Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V
# --------------------------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Scaled dot-product attention, written out step by step.

    Computes ``softmax(q k^T * scale + mask) v`` with ``scale = 1 / sqrt(d_k)`` by default.
    Same arguments and result as :func:`torch.nn.functional.scaled_dot_product_attention`,
    except that it can return the attention weights and that a query with nothing to
    attend to gets a zero output.

    Args:
        q: Queries of shape ``(..., Tq, d_k)``.
        k: Keys of shape ``(..., Tk, d_k)``.
        v: Values of shape ``(..., Tk, d_v)``.
        mask: Bool mask (True = may attend) or float additive bias, broadcastable to the
            scores ``(..., Tq, Tk)``.
        dropout_p: Dropout probability applied to the weights, in [0, 1). Applied whenever
            > 0: pass 0.0 at evaluation time.
        scale: Factor applied to ``q k^T``. Defaults to ``1 / sqrt(d_k)``.
        return_weights: Also return the attention weights.

    Returns:
        ``out`` of shape ``(..., Tq, d_v)``, or ``(out, weights)`` with ``weights`` of shape
        ``(..., Tq, Tk)`` (after dropout: the weights that actually multiplied ``v``).
    """
    _check_sdpa_inputs(q, k, v, mask, dropout_p)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)
    weights = masked_softmax(scores, mask)  # (..., Tq, Tk)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (..., Tq, Tk)
    out = weights @ v  # (..., Tq, d_v)
    return (out, weights) if return_weights else out


def _fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, is_causal: bool
) -> Tensor:
    """The same as :func:`scaled_dot_product_attention`, through PyTorch's fused kernel.

    PyTorch's kernel never builds the ``(Tq, Tk)`` weights. Rows with nothing to attend to are
    opened to every key for the call (so no version of the kernel can produce NaN) and their
    output is set to zero afterwards, matching the explicit path.

    Args:
        q: ``(B, H, Tq, Dh)``. k, v: ``(B, H, Tk, Dh)``.
        mask: Bool mask or float bias broadcastable to ``(B, H, Tq, Tk)``, or None.
        dropout_p: Dropout probability on the weights (0.0 at evaluation time).
        is_causal: Causal masking done by the kernel itself; only with ``mask=None`` and Tq == Tk.

    Returns:
        ``(B, H, Tq, Dh)``.
    """
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=is_causal)
    empty = _empty_rows(mask)  # (..., Tq, 1)
    if mask.dtype == torch.bool:
        mask = mask | empty  # (..., Tq, Tk)
    else:
        mask = mask.masked_fill(empty, 0.0).to(q.dtype)  # (..., Tq, Tk)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p
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
    them; later calls reuse them and ignore ``key``/``value``.

    The cache grows by ``torch.cat``, which copies it at every step (quadratic in the length
    over a whole generation). That is fine for the book's sizes; production code preallocates.

    Attributes:
        k: Keys of shape ``(B, H, T_cached, Dh)``, or None while empty.
        v: Values of shape ``(B, H, T_cached, Dh)``, or None while empty.
        static: True for a cross-attention cache that is filled once and then only read.
    """

    k: Tensor | None = None  # (B, H, T_cached, Dh) projected keys
    v: Tensor | None = None  # (B, H, T_cached, Dh) projected values
    static: bool = False  # True: encoder memory, projected on the first call, then reused

    @property
    def length(self) -> int:
        """Number of cached positions ``T_cached`` (0 when empty)."""
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def filled(self) -> bool:
        """Whether the cache holds keys and values."""
        return self.k is not None

    def reset(self) -> None:
        """Empty the cache (e.g. before decoding a new batch)."""
        self.k = None
        self.v = None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store new keys and values (appended unless static) and return all of them.

        Args:
            k: New keys of shape ``(B, H, T_new, Dh)``.
            v: New values of shape ``(B, H, T_new, Dh)``.

        Returns:
            ``(k, v)``, each of shape ``(B, H, T_cached + T_new, Dh)``; a static cache that is
            already filled returns what it holds.
        """
        if self.static and self.filled:
            return self.k, self.v
        if self.filled:
            k = torch.cat([self.k, k], dim=2)  # (B, H, T_cached + T_new, Dh)
            v = torch.cat([self.v, v], dim=2)  # (B, H, T_cached + T_new, Dh)
        self.k, self.v = k, v
        return k, v


# --------------------------------------------------------------------------------------------
# 4. Multi-head attention
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """Multi-head attention, as in "Attention Is All You Need" (batch first).

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O`` with
    ``head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)``. The ``h`` heads are computed together:
    one projection of size ``d_model`` is split into ``h`` slices of ``d_head = d_model / h``.

    Two paths compute the same thing, and a test proves it: the explicit path calls
    :func:`scaled_dot_product_attention` above (and can return the weights); the fused path
    (``self.fused = True``, used when no weights are requested) calls PyTorch's
    :func:`torch.nn.functional.scaled_dot_product_attention`.

    Submodule names match ``nn.MultiheadAttention``'s unpacked weights; see :meth:`from_torch`.

    Args:
        d_model: Model width (``embed_dim`` in PyTorch); divisible by ``num_heads``.
        num_heads: Number of heads ``h``.
        kdim: Feature size of ``key``. Defaults to ``d_model``.
        vdim: Feature size of ``value``. Defaults to ``d_model``.
        dropout: Dropout probability on the attention weights (only in training), in [0, 1).
        bias: Whether the four projections have biases.
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
    ) -> None:
        super().__init__()
        _check_mha_config(d_model, num_heads, kdim, vdim, dropout)
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads  # d_head
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.dropout = dropout
        self.fused = True  # use PyTorch's fused kernel when no weights are requested
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q for all heads
        self.k_proj = nn.Linear(self.kdim, d_model, bias=bias)  # W_K for all heads
        self.v_proj = nn.Linear(self.vdim, d_model, bias=bias)  # W_V for all heads
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        average_weights: bool = True,
        cache: KVCache | None = None,
        *,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(B, Tq, d_model)``.
            key: ``(B, Tk, kdim)``. None means self-attention: ``key = value = query``.
            value: ``(B, Tk, vdim)``. None means ``value = key``.
            mask: Bool (True = may attend) or float additive bias, broadcastable to
                ``(B, H, Tq, Tk)`` with rank 2 or 4, e.g. ``(Tq, Tk)``, ``(B, 1, 1, Tk)``
                or ``(B, H, Tq, Tk)`` (a 3-D mask is ambiguous and must have a leading 1).
                With a cache, ``Tk`` counts the cached keys too.
            need_weights: Also return the attention weights (uses the explicit path).
            average_weights: Average the returned weights over heads.
            cache: A :class:`KVCache`, updated in place (see its docstring).
            is_causal: Also apply ``causal_mask(Tq, Tk)`` (queries are the last positions).
                Cheaper than passing that mask: the fused kernel skips fully masked blocks.

        Returns:
            ``(out, weights)``: ``out`` of shape ``(B, Tq, d_model)``; ``weights`` of shape
            ``(B, Tq, Tk)`` (averaged) or ``(B, H, Tq, Tk)``, or None if not requested.
        """
        _check_mha_inputs(self, query, key, value, mask, cache, is_causal)
        key = query if key is None else key  # self-attention
        value = key if value is None else value
        q = self._split_heads(self.q_proj(query))  # (B, H, Tq, Dh)
        k, v = self._keys_values(key, value, cache)  # (B, H, Tk, Dh) each
        out, weights = self._attend(q, k, v, mask, is_causal, need_weights)  # (B, H, Tq, Dh)
        out = self.out_proj(self._merge_heads(out))  # (B, Tq, d_model)
        if weights is not None and average_weights:
            weights = weights.mean(dim=1)  # (B, Tq, Tk)
        return out, weights

    def _split_heads(self, x: Tensor) -> Tensor:
        """``(B, T, d_model)`` -> ``(B, H, T, Dh)``: one slice of the features per head."""
        batch, length, _ = x.shape
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (B, T, H, Dh)
        return x.transpose(1, 2)  # (B, H, T, Dh)

    def _merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dh)`` -> ``(B, T, d_model)``: concatenate the heads' outputs."""
        batch, _, length, _ = x.shape
        x = x.transpose(1, 2)  # (B, T, H, Dh)
        return x.reshape(batch, length, self.d_model)  # (B, T, d_model)

    def _keys_values(
        self, key: Tensor, value: Tensor, cache: KVCache | None
    ) -> tuple[Tensor, Tensor]:
        """Project keys and values, going through the cache when there is one."""
        if cache is not None and cache.static and cache.filled:
            return cache.k, cache.v  # encoder memory projected on an earlier step
        k = self._split_heads(self.k_proj(key))  # (B, H, Tk, Dh)
        v = self._split_heads(self.v_proj(value))  # (B, H, Tk, Dh)
        return (k, v) if cache is None else cache.update(k, v)  # (B, H, T_cached + Tk, Dh)

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """Run the fused or the explicit attention; returns ``(B, H, Tq, Dh)`` and the weights."""
        dropout_p = self.dropout if self.training else 0.0
        q_len, k_len = q.shape[-2], k.shape[-2]
        use_fused = self.fused and not need_weights
        if is_causal and not (use_fused and mask is None and q_len == k_len):
            causal = _masks.causal_mask(q_len, k_len, device=q.device)  # (Tq, Tk)
            mask, is_causal = _masks.combine(mask, causal), False  # the kernel cannot do it alone
        if use_fused:
            return _fused_attention(q, k, v, mask, dropout_p, is_causal), None
        out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, return_weights=True)
        return out, (weights if need_weights else None)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build a :class:`MultiHeadAttention` with the weights of an ``nn.MultiheadAttention``.

        Handles the packed ``in_proj_weight`` (when ``kdim == vdim == embed_dim``) and the
        separate ``q/k/v_proj_weight`` otherwise, with or without biases. Our module is always
        batch-first; the weights do not depend on ``m.batch_first``, so the copy is valid
        either way (feed ours ``(B, T, d)`` tensors). The copy lives on ``m``'s device and dtype.

        Args:
            m: The PyTorch module. ``add_bias_kv`` and ``add_zero_attn`` are not supported.

        Returns:
            A new module computing the same function as ``m``.
        """
        if not isinstance(m, nn.MultiheadAttention):
            raise TypeError(f"m must be an nn.MultiheadAttention, got {type(m).__name__}")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError(
                "m must not use add_bias_kv or add_zero_attn: MultiHeadAttention has no equivalent"
            )
        bias = m.in_proj_bias is not None
        ours = cls(m.embed_dim, m.num_heads, kdim=m.kdim, vdim=m.vdim, dropout=m.dropout, bias=bias)
        ours = ours.to(m.out_proj.weight)  # same device and dtype
        if m.in_proj_weight is not None:
            w_q, w_k, w_v = m.in_proj_weight.chunk(3)  # packed (3 d_model, d_model)
        else:
            w_q, w_k, w_v = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        table = [("q_proj.weight", w_q), ("k_proj.weight", w_k), ("v_proj.weight", w_v),
                 ("out_proj.weight", m.out_proj.weight)]  # fmt: skip
        if bias:
            b_q, b_k, b_v = m.in_proj_bias.chunk(3)  # packed (3 d_model,)
            table += [("q_proj.bias", b_q), ("k_proj.bias", b_k), ("v_proj.bias", b_v),
                      ("out_proj.bias", m.out_proj.bias)]  # fmt: skip
        params = dict(ours.named_parameters())
        with torch.no_grad():
            for name, src in table:
                if params[name].shape != src.shape:
                    raise ValueError(
                        f"shape mismatch copying {name}: ours {tuple(params[name].shape)}, theirs {tuple(src.shape)}"
                    )
                params[name].copy_(src)
        return ours

    def extra_repr(self) -> str:
        same = self.kdim == self.vdim == self.d_model
        dims = "" if same else f", kdim={self.kdim}, vdim={self.vdim}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{dims}, dropout={self.dropout}, fused={self.fused}"


# --------------------------------------------------------------------------------------------
# 5. Additive (Bahdanau) attention
# --------------------------------------------------------------------------------------------


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al., 2015): ``score(q, k) = v^T tanh(W_q q + W_k k)``.

    Unlike dot-product attention, queries and keys may have different sizes: a small MLP
    scores every (query, key) pair.

    Args:
        query_dim: Feature size of the queries.
        key_dim: Feature size of the keys.
        hidden_dim: Width of the scoring MLP.
        dropout: Dropout probability on the attention weights (only in training), in [0, 1).
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        _check_additive_config(query_dim, key_dim, hidden_dim, dropout)
        self.W_q = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W_k = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from each query to the keys, and average the values with those weights.

        Args:
            query: ``(B, Tq, query_dim)``.
            keys: ``(B, Tk, key_dim)``.
            values: ``(B, Tk, dv)``.
            mask: Bool (True = may attend) or float additive bias, broadcastable to
                ``(B, Tq, Tk)``, e.g. ``(B, 1, Tk)`` for padding: ``padding_mask(lengths)[:, 0]``.

        Returns:
            ``(out, weights)``: ``out`` of shape ``(B, Tq, dv)``, ``weights`` of shape ``(B, Tq, Tk)``.
        """
        _check_additive_inputs(self, query, keys, values, mask)
        q = self.W_q(query).unsqueeze(2)  # (B, Tq, 1, hidden)
        k = self.W_k(keys).unsqueeze(1)  # (B, 1, Tk, hidden)
        scores = self.v(torch.tanh(q + k)).squeeze(-1)  # (B, Tq, Tk)
        weights = self.dropout(masked_softmax(scores, mask))  # (B, Tq, Tk)
        return weights @ values, weights  # (B, Tq, dv), (B, Tq, Tk)


# --------------------------------------------------------------------------------------------
# Input checks: run before any computation, so that a mistake gives a message naming the
# argument and the expected shape instead of a stack trace from inside a matmul.
# --------------------------------------------------------------------------------------------


def _shape(x: Tensor) -> tuple[int, ...]:
    return tuple(x.shape)


def _check_tensor(x: object, name: str, expected: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor of shape {expected}, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a floating-point Tensor of shape {expected}, got dtype {x.dtype}"
        )


def _check_positive_int(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def _check_dropout(p: object, name: str) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1), got {p!r}")


def _check_same(tensors: dict[str, Tensor], attr: str) -> None:
    """All tensors share the same ``attr`` ("dtype" or "device").

    Dtypes are not compared under :func:`torch.autocast`, which casts them itself.
    """
    if attr == "dtype" and _autocast_enabled(next(iter(tensors.values())).device.type):
        return
    (first, ref), *rest = tensors.items()
    for name, x in rest:
        if getattr(x, attr) != getattr(ref, attr):
            raise ValueError(
                f"{name} and {first} must have the same {attr}, got {getattr(x, attr)} and {getattr(ref, attr)}"
            )


def _autocast_enabled(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 has no device_type argument
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
    except RuntimeError:  # a device autocast does not know, e.g. "meta"
        return False


def _check_sdpa_inputs(
    q: object, k: object, v: object, mask: Tensor | None, dropout_p: float
) -> None:
    _check_tensor(q, "q", "(..., q_len, d_k)")
    _check_tensor(k, "k", "(..., k_len, d_k)")
    _check_tensor(v, "v", "(..., k_len, d_v)")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k and v must have the same rank >= 2, got {_shape(q)}, {_shape(k)}, {_shape(v)}"
        )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"k must have shape (..., k_len, d_k={q.shape[-1]}) like q, got {_shape(k)}"
        )
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"v must have shape (..., k_len={k.shape[-2]}, d_v) like k, got {_shape(v)}"
        )
    try:
        batch_shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"q, k and v leading dims must broadcast, got {_shape(q)}, {_shape(k)}, {_shape(v)}"
        ) from None
    _check_same({"q": q, "k": k, "v": v}, "dtype")
    _check_same(
        {"q": q, "k": k, "v": v, **({"mask": mask} if isinstance(mask, Tensor) else {})}, "device"
    )
    _masks.check_mask(mask, q.shape[-2], k.shape[-2], "mask", batch_shape=tuple(batch_shape))
    _check_dropout(dropout_p, "dropout_p")


def _check_mha_config(
    d_model: int, num_heads: int, kdim: int | None, vdim: int | None, dropout: float
) -> None:
    _check_positive_int(d_model, "d_model")
    _check_positive_int(num_heads, "num_heads")
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
    for name, dim in (("kdim", kdim), ("vdim", vdim)):
        if dim is not None:
            _check_positive_int(dim, name)
    _check_dropout(dropout, "dropout")


def _check_mha_inputs(
    mha: MultiHeadAttention,
    query: object,
    key: object,
    value: object,
    mask: object,
    cache: object,
    is_causal: bool,
) -> None:
    if key is None and value is not None:
        raise ValueError(
            "value was given without key: pass key too (key=None means self-attention)"
        )
    key = query if key is None else key
    value = key if value is None else value
    _check_tensor(query, "query", f"(batch, q_len, d_model={mha.d_model})")
    _check_tensor(key, "key", f"(batch, k_len, kdim={mha.kdim})")
    _check_tensor(value, "value", f"(batch, k_len, vdim={mha.vdim})")
    if query.dim() != 3 or query.shape[-1] != mha.d_model:
        raise ValueError(
            f"query must have shape (batch, q_len, d_model={mha.d_model}), got {_shape(query)}"
        )
    batch = query.shape[0]
    if key.dim() != 3 or key.shape[0] != batch or key.shape[-1] != mha.kdim:
        raise ValueError(
            f"key must have shape (batch={batch}, k_len, kdim={mha.kdim}), got {_shape(key)}"
        )
    if value.dim() != 3 or value.shape[:2] != key.shape[:2] or value.shape[-1] != mha.vdim:
        raise ValueError(
            f"value must have shape (batch={batch}, k_len={key.shape[1]}, vdim={mha.vdim}) like key, got {_shape(value)}"
        )
    weight = mha.q_proj.weight
    _check_same({"query": query, "key": key, "value": value, "parameters": weight}, "dtype")
    tensors = {"query": query, "key": key, "value": value, "parameters": weight}
    if isinstance(mask, Tensor):
        tensors["mask"] = mask
    _check_same(tensors, "device")
    k_len = _check_cache(mha, cache, batch, key.shape[1])
    if is_causal and k_len < query.shape[1]:
        raise ValueError(
            f"is_causal needs at least as many keys as queries (q_len={query.shape[1]}), got k_len={k_len}"
        )
    if isinstance(mask, Tensor) and mask.dim() == 3 and mask.shape[0] != 1:
        raise ValueError(
            f"mask of shape {_shape(mask)} is ambiguous (batch or heads?): give it rank 4, "
            f"e.g. mask[:, None] for (batch={batch}, 1, q_len, k_len)"
        )
    _masks.check_mask(mask, query.shape[1], k_len, "mask", batch_shape=(batch, mha.num_heads))


def _check_cache(mha: MultiHeadAttention, cache: object, batch: int, k_len: int) -> int:
    """Checks the cache and returns the number of keys attended to (cached ones included)."""
    if cache is None:
        return k_len
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
    if not cache.filled:
        return k_len
    expected = f"(batch={batch}, num_heads={mha.num_heads}, T_cached, head_dim={mha.head_dim})"
    for name, x in (("cache.k", cache.k), ("cache.v", cache.v)):
        if (
            not isinstance(x, Tensor)
            or x.dim() != 4
            or x.shape[:2] != (batch, mha.num_heads)
            or x.shape[3] != mha.head_dim
        ):
            shape = _shape(x) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{name} must have shape {expected}, got {shape}")
    if cache.v.shape != cache.k.shape:
        raise ValueError(
            f"cache.v must have the same shape as cache.k {_shape(cache.k)}, got {_shape(cache.v)}"
        )
    weight = mha.q_proj.weight
    _check_same({"cache.k": cache.k, "cache.v": cache.v, "parameters": weight}, "dtype")
    _check_same({"cache.k": cache.k, "cache.v": cache.v, "parameters": weight}, "device")
    return cache.length if cache.static else cache.length + k_len


def _check_additive_config(query_dim: int, key_dim: int, hidden_dim: int, dropout: float) -> None:
    _check_positive_int(query_dim, "query_dim")
    _check_positive_int(key_dim, "key_dim")
    _check_positive_int(hidden_dim, "hidden_dim")
    _check_dropout(dropout, "dropout")


def _check_additive_inputs(
    att: AdditiveAttention, query: object, keys: object, values: object, mask: object
) -> None:
    query_dim, key_dim = att.W_q.in_features, att.W_k.in_features
    _check_tensor(query, "query", f"(batch, q_len, query_dim={query_dim})")
    _check_tensor(keys, "keys", f"(batch, k_len, key_dim={key_dim})")
    _check_tensor(values, "values", "(batch, k_len, dv)")
    if query.dim() != 3 or query.shape[-1] != query_dim:
        raise ValueError(
            f"query must have shape (batch, q_len, query_dim={query_dim}), got {_shape(query)}"
        )
    batch = query.shape[0]
    if keys.dim() != 3 or keys.shape[0] != batch or keys.shape[-1] != key_dim:
        raise ValueError(
            f"keys must have shape (batch={batch}, k_len, key_dim={key_dim}), got {_shape(keys)}"
        )
    if values.dim() != 3 or values.shape[:2] != keys.shape[:2]:
        raise ValueError(
            f"values must have shape (batch={batch}, k_len={keys.shape[1]}, dv) like keys, got {_shape(values)}"
        )
    tensors = {"query": query, "keys": keys, "values": values, "parameters": att.W_q.weight}
    _check_same(tensors, "dtype")
    _check_same({**tensors, **({"mask": mask} if isinstance(mask, Tensor) else {})}, "device")
    _masks.check_mask(mask, query.shape[1], keys.shape[1], "mask", batch_shape=(batch,))
