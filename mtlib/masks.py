"""Attention masks: one convention, and the conversions from PyTorch's other ones.

**The convention.** Everywhere in mtlib a mask is a *boolean* tensor where ``True`` means
"this query may attend to this key". It is broadcastable to the attention scores, whose shape
is ``(batch, heads, q_len, k_len)``, so a padding mask is ``(B, 1, 1, k_len)`` and a causal
mask is ``(q_len, k_len)``. This is the convention of
:func:`torch.nn.functional.scaled_dot_product_attention`.

**Additive biases.** A *floating-point* tensor in the place of a mask is an additive bias,
added to the scores before the softmax: ``0`` leaves a score alone, ``-inf`` forbids the key,
and any other value nudges it (relative position biases and ALiBi are biases of this kind).
:func:`to_additive` turns a boolean mask into the equivalent bias. Everything that takes a
mask in mtlib accepts either kind.

**PyTorch's other convention.** :class:`torch.nn.MultiheadAttention` uses the opposite sign:
its boolean ``key_padding_mask`` and ``attn_mask`` mark with ``True`` the positions to
*ignore*. :func:`from_key_padding_mask` and :func:`from_attn_mask` are the only places in
mtlib where the sign flips. Float masks mean the same thing (an additive bias) in both
conventions and pass through unchanged, only reshaped.

**Rows with nothing to attend to** (a query whose every key is masked, e.g. a padded query
under a padding-and-causal mask) produce zeros in mtlib's attention, never NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "causal_mask",
    "padding_mask",
    "padding_mask_from_tokens",
    "combine",
    "to_additive",
    "from_key_padding_mask",
    "from_attn_mask",
    "check_mask",
]


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def causal_mask(
    q_len: int, k_len: int | None = None, device: torch.device | str | None = None
) -> Tensor:
    """Mask that lets each query attend only to keys at or before its own position.

    When ``k_len > q_len`` the queries are the *last* ``q_len`` positions of a sequence of
    length ``k_len``, as when decoding with a KV cache: query ``i`` sits at position
    ``i + (k_len - q_len)`` and may attend key ``j`` iff ``j <= i + (k_len - q_len)``.

    Args:
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= ``q_len``. Defaults to ``q_len`` (a square mask).
        device: Where to create the mask.

    Returns:
        Bool tensor of shape ``(q_len, k_len)``, True where attending is allowed.

    Example:
        >>> causal_mask(2, 4).int()
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    q_len = _check_positive_int(q_len, "q_len")
    k_len = q_len if k_len is None else _check_positive_int(k_len, "k_len")
    if k_len < q_len:
        raise ValueError(
            f"k_len must be >= q_len={q_len} (queries are the last positions), got {k_len}"
        )
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)  # (Tq, Tk)
    return ones.tril(diagonal=k_len - q_len)  # (Tq, Tk)


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Mask that hides the padding at the end of each sequence in a batch.

    Args:
        lengths: Integer tensor of shape ``(B,)``: the number of real tokens per sequence.
        max_len: Padded length ``T``. Defaults to ``lengths.max()``.

    Returns:
        Bool tensor of shape ``(B, 1, 1, T)``, True for real tokens (keys that may be attended).

    Example:
        >>> padding_mask(torch.tensor([1, 3]), max_len=4)[:, 0, 0].int()
        tensor([[1, 0, 0, 0],
                [1, 1, 1, 0]], dtype=torch.int32)
    """
    if not isinstance(lengths, Tensor):
        raise TypeError(f"lengths must be a Tensor of shape (batch,), got {type(lengths).__name__}")
    if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be an integer tensor of shape (batch,), got {lengths.dtype} {tuple(lengths.shape)}"
        )
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    elif isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 0:
        raise ValueError(f"max_len must be a non-negative int, got {max_len!r}")
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        raise ValueError(f"lengths must lie in [0, max_len={max_len}], got {lengths.tolist()}")
    positions = torch.arange(max_len, device=lengths.device)  # (T,)
    mask = positions < lengths[:, None]  # (B, T)
    return mask[:, None, None, :]  # (B, 1, 1, T)


def padding_mask_from_tokens(tokens: Tensor, pad_id: int) -> Tensor:
    """Mask that hides padding tokens, wherever they are.

    Args:
        tokens: Integer token ids of shape ``(B, T)``.
        pad_id: The id of the padding token.

    Returns:
        Bool tensor of shape ``(B, 1, 1, T)``, True where ``tokens != pad_id``.
    """
    if not isinstance(tokens, Tensor):
        raise TypeError(
            f"tokens must be a Tensor of shape (batch, seq_len), got {type(tokens).__name__}"
        )
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (batch, seq_len), got {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a boolean mask into the equivalent additive bias (0 where allowed, -inf elsewhere).

    A float tensor is already a bias and is only cast to ``dtype``.

    Args:
        mask: Bool mask (True = may attend) or float additive bias, any shape.
        dtype: Floating dtype of the result.

    Returns:
        Float tensor of the same shape as ``mask``.
    """
    if mask.dtype != torch.bool:
        return mask.to(dtype)
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill(~mask, float("-inf"))


def combine(*masks: Tensor | None) -> Tensor | None:
    """Combine masks: a key is allowed only if every mask allows it.

    Boolean masks are combined with logical AND (with broadcasting). If any of them is an
    additive float bias, all are turned into biases (:func:`to_additive`) and summed, which
    means the same thing: ``-inf`` anywhere forbids the key.

    Args:
        *masks: Bool masks or float biases, mutually broadcastable; ``None`` entries are skipped.

    Returns:
        The combined mask (bool if all inputs are bool, else float), or None if all are None.

    Example:
        >>> combine(causal_mask(3), None, padding_mask(torch.tensor([2]), 3)).shape
        torch.Size([1, 1, 3, 3])
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    if all(m.dtype == torch.bool for m in present):
        out = present[0]
        for m in present[1:]:
            out = out & m  # broadcast
        return out
    float_dtypes = [m.dtype for m in present if m.dtype.is_floating_point]
    dtype = float_dtypes[0]
    for d in float_dtypes[1:]:
        dtype = torch.promote_types(dtype, d)
    out = to_additive(present[0], dtype)
    for m in present[1:]:
        out = out + to_additive(m, dtype)  # broadcast
    return out


def _from_torch_sign(mask: Tensor, name: str) -> Tensor:
    """The one place the sign flips: PyTorch's bool masks mark keys to IGNORE, ours keys to
    attend. A float mask is an additive bias in both conventions and is kept as it is."""
    if mask.dtype == torch.bool:
        return ~mask  # True = may attend
    if not mask.dtype.is_floating_point:
        raise TypeError(f"{name} must be bool or floating, got {mask.dtype}")
    return mask


def from_key_padding_mask(key_padding_mask: Tensor) -> Tensor:
    """Convert PyTorch's ``key_padding_mask`` (True = IGNORE) to mtlib's convention.

    This and :func:`from_attn_mask` are the only places where the sign flips.

    Args:
        key_padding_mask: Shape ``(B, Tk)``. Bool, True marks padding to ignore; or float,
            an additive bias (0 = keep, -inf = ignore), which is kept as a bias.

    Returns:
        Shape ``(B, 1, 1, Tk)``: bool with True = may attend, or the float bias reshaped.
    """
    if not isinstance(key_padding_mask, Tensor):
        raise TypeError(
            f"key_padding_mask must be a Tensor of shape (batch, k_len), got {type(key_padding_mask).__name__}"
        )
    if key_padding_mask.dim() != 2:
        raise ValueError(
            f"key_padding_mask must have shape (batch, k_len), got {tuple(key_padding_mask.shape)}"
        )
    return _from_torch_sign(key_padding_mask, "key_padding_mask")[:, None, None, :]  # (B, 1, 1, Tk)


def from_attn_mask(attn_mask: Tensor, num_heads: int | None = None) -> Tensor:
    """Convert ``nn.MultiheadAttention``'s ``attn_mask`` to mtlib's convention.

    Args:
        attn_mask: Shape ``(Tq, Tk)`` or ``(B * num_heads, Tq, Tk)``. Bool, True marks
            positions to ignore; or float, an additive bias, which is kept as a bias.
        num_heads: Needed only for the 3-D form, to split ``B * num_heads`` into ``(B, H)``.

    Returns:
        Bool (True = may attend) or float bias, of shape ``(Tq, Tk)`` or ``(B, H, Tq, Tk)``.
    """
    if not isinstance(attn_mask, Tensor):
        raise TypeError(
            f"attn_mask must be a Tensor of shape (q_len, k_len), got {type(attn_mask).__name__}"
        )
    attn_mask = _from_torch_sign(attn_mask, "attn_mask")
    if attn_mask.dim() == 2:
        return attn_mask  # (Tq, Tk)
    if attn_mask.dim() != 3:
        raise ValueError(
            f"attn_mask must have shape (q_len, k_len) or (batch * num_heads, q_len, k_len), got {tuple(attn_mask.shape)}"
        )
    if num_heads is None or attn_mask.shape[0] % num_heads != 0:
        raise ValueError(
            f"a 3-D attn_mask of shape {tuple(attn_mask.shape)} needs num_heads dividing its first dim, got num_heads={num_heads}"
        )
    bh, q_len, k_len = attn_mask.shape
    return attn_mask.reshape(bh // num_heads, num_heads, q_len, k_len)  # (B, H, Tq, Tk)


def check_mask(
    mask: Tensor | None,
    q_len: int,
    k_len: int,
    name: str = "mask",
    *,
    batch_shape: tuple[int | None, ...] = (None, None),
) -> None:
    """Check that ``mask`` is a bool mask or float bias that broadcasts to the scores.

    The scores have shape ``(*batch_shape, q_len, k_len)``; by default ``(B, H, q_len, k_len)``
    with any ``B`` and ``H``. The mask may have fewer dimensions (broadcasting from the right)
    but each of its dimensions must be 1 or equal to the scores' one: it may never make the
    scores bigger. Does nothing if ``mask`` is None.

    Args:
        mask: The mask to check, or None.
        q_len: Number of queries.
        k_len: Number of keys.
        name: The argument name used in error messages.
        batch_shape: Leading dimensions of the scores; None entries accept any size.

    Raises:
        TypeError: If ``mask`` is not a tensor, or its dtype is neither bool nor floating.
        ValueError: If ``mask`` does not broadcast to the scores' shape.
    """
    if mask is None:
        return
    target = (*batch_shape, q_len, k_len)
    labels = (
        ["batch", "heads"][: len(batch_shape)]
        if len(batch_shape) <= 2
        else [f"dim{i}" for i in range(len(batch_shape))]
    )
    parts = [lab if s is None else f"{lab}={s}" for lab, s in zip(labels, batch_shape, strict=True)]
    expected = "(" + ", ".join([*parts, f"q_len={q_len}", f"k_len={k_len}"]) + ")"
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"{name} must be a bool or float Tensor broadcastable to {expected}, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        raise TypeError(
            f"{name} must be bool (True = may attend) or a float additive bias, got {mask.dtype}; "
            f"expected a tensor broadcastable to {expected}"
        )
    shape_ok = 2 <= mask.dim() <= len(target) and all(
        m == 1 or t is None or m == t
        for m, t in zip(reversed(mask.shape), reversed(target), strict=False)
    )
    if not shape_ok:
        raise ValueError(f"{name} must be broadcastable to {expected}, got {tuple(mask.shape)}")
