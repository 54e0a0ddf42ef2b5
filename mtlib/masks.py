"""Attention masks: one convention, and the conversions from PyTorch's other one.

**The convention.** Everywhere in mtlib a mask is a *boolean* tensor where ``True`` means
"this query may attend to this key". It is broadcastable to the attention scores, whose shape
is ``(batch, heads, q_len, k_len)``, so a padding mask is ``(B, 1, 1, k_len)`` and a causal
mask is ``(q_len, k_len)``. This is the boolean convention of
:func:`torch.nn.functional.scaled_dot_product_attention`, with two differences, both checked
by :func:`check_mask`:

- A mask has at least 2 dimensions, the last two being ``(q_len, k_len)``: a 1-D mask is
  refused (the keys of every sequence, or the sequences of a batch?); the same keys for every
  query and every sequence are ``mask[None, :]``, shape ``(1, k_len)``.
- A 2-D mask always means ``(q_len, k_len)``, the same for every sequence, never a
  ``(batch, k_len)`` padding mask. When the batch size equals ``q_len`` the two cannot be told
  apart by shape, so there a 2-D mask is refused as ambiguous unless both readings give the
  same result (all its rows equal) or it is exactly ``causal_mask(q_len, k_len)``. Write a
  padding mask ``(B, 1, 1, k_len)`` (:func:`padding_mask`) and a mask shared by every sequence
  ``(1, 1, q_len, k_len)``, and nothing is ambiguous.

**Masks are not biases.** A float or integer tensor passed as a mask is refused with a
``TypeError`` that says how to convert it: a 0/1 float mask silently added to the scores (as
``torch.tril(torch.ones(T, T))`` would be) lets every query see the future. Additive float
biases (ALiBi, T5's relative positions) go in the separate ``bias=`` argument of the attention
functions; :func:`to_additive` turns a boolean mask into the equivalent bias when one is needed.

**PyTorch's other convention.** :class:`torch.nn.MultiheadAttention`'s boolean
``key_padding_mask`` and ``attn_mask`` mark with ``True`` the positions to *ignore*.
:func:`from_key_padding_mask` and :func:`from_attn_mask` are the only places in mtlib where
the sign flips.

**Rows with nothing to attend to** (a padded query under a padding-and-causal mask) produce
zero weights in mtlib's attention, never NaN. A mask that is the same for every sequence (2-D,
or with a batch dimension of 1 used on a batch of several) and leaves some query with nothing
to attend to is almost always a bug: PyTorch's sign (``~causal_mask(T)``), a causal mask
without its diagonal (``tril(diagonal=-1)``), an all-False mask. :func:`check_mask` refuses it
(a ``ValueError``, even on a batch of one) and says which of these it looks like. To give such
a row zeros on purpose, give the mask the batch dimension of the scores
(``mask.expand(B, 1, q_len, k_len)``) or forbid the keys with a ``-inf`` ``bias``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtlib import _checks

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


def causal_mask(
    q_len: int, k_len: int | None = None, *, device: torch.device | str | None = None
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
    q_len = _checks.positive_int(q_len, "q_len")
    k_len = q_len if k_len is None else _checks.positive_int(k_len, "k_len")
    if k_len < q_len:
        raise ValueError(
            f"k_len must be >= q_len={q_len} (queries are the last positions), got {k_len}"
        )
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)  # (Tq, Tk)
    return ones.tril(diagonal=k_len - q_len)  # (Tq, Tk)


def padding_mask(lengths: Tensor, max_len: int | Tensor | None = None) -> Tensor:
    """Mask that hides the padding at the end of each sequence in a batch.

    Args:
        lengths: Integer tensor of shape ``(B,)``: the number of real tokens per sequence.
        max_len: Padded length ``T``: an int, or a 0-d integer tensor such as ``lengths.max()``.
            Defaults to ``lengths.max()``.

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
    if isinstance(max_len, Tensor) and max_len.dim() == 0 and not max_len.dtype.is_floating_point:
        max_len = int(max_len)  # e.g. lengths.max()
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
    _checks.token_ids(tokens, "tokens")
    if isinstance(pad_id, Tensor) and pad_id.dim() == 0 and not pad_id.dtype.is_floating_point:
        pad_id = int(pad_id)  # e.g. a tensor(0) from a vocabulary
    if isinstance(pad_id, bool) or not isinstance(pad_id, int):
        raise TypeError(f"pad_id must be an int (the padding token's id), got {type(pad_id).__name__}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Turn a boolean mask into the equivalent additive bias: 0 where allowed, -inf elsewhere.

    Args:
        mask: Bool mask (True = may attend), any shape.
        dtype: Floating dtype of the result.

    Returns:
        Float tensor of the same shape as ``mask``.
    """
    _check_bool(mask, "mask")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype (the bias holds -inf), got {dtype}")
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill(~mask, float("-inf"))


def combine(*masks: Tensor | None) -> Tensor | None:
    """Combine boolean masks: a key is allowed only if every mask allows it (logical AND).

    Args:
        *masks: Bool masks, mutually broadcastable; ``None`` entries are skipped.

    Returns:
        The combined bool mask (broadcast shape), or None if all are None.

    Example:
        >>> combine(causal_mask(3), None, padding_mask(torch.tensor([2]), 3)).shape
        torch.Size([1, 1, 3, 3])
    """
    present = [m for m in masks if m is not None]
    for m in present:
        _check_bool(m, "each mask")
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(f"masks must broadcast against each other, got shapes {shapes}") from None
    out = present[0]
    for m in present[1:]:
        out = out & m  # broadcast
    return out


def from_key_padding_mask(key_padding_mask: Tensor) -> Tensor:
    """Convert PyTorch's boolean ``key_padding_mask`` (True = IGNORE) to mtlib's convention.

    This and :func:`from_attn_mask` are the only places where the sign flips.

    Args:
        key_padding_mask: Bool tensor of shape ``(B, Tk)``, True marks padding to ignore.

    Returns:
        Bool tensor of shape ``(B, 1, 1, Tk)``, True = may attend.
    """
    fix = "A 0/1 mask converts with .bool(); a float one is an additive bias: bias=kpm[:, None, None, :]"
    _check_bool(key_padding_mask, "key_padding_mask", fix, sign="True = ignore, PyTorch's sign")
    if key_padding_mask.dim() != 2:
        raise ValueError(
            f"key_padding_mask must have shape (batch, k_len), got {tuple(key_padding_mask.shape)}"
        )
    return ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk), True = may attend


def from_attn_mask(attn_mask: Tensor, num_heads: int | None = None) -> Tensor:
    """Convert ``nn.MultiheadAttention``'s boolean ``attn_mask`` (True = IGNORE) to mtlib's.

    Args:
        attn_mask: Bool tensor of shape ``(Tq, Tk)`` or ``(B * num_heads, Tq, Tk)``, True marks
            positions to ignore.
        num_heads: Needed only for the 3-D form, to split ``B * num_heads`` into ``(B, H)``.

    Returns:
        Bool tensor (True = may attend) of shape ``(Tq, Tk)`` or ``(B, H, Tq, Tk)``.
    """
    fix = "A 0/1 mask converts with .bool(); a float one is an additive bias: pass it as bias="
    _check_bool(attn_mask, "attn_mask", fix, sign="True = ignore, PyTorch's sign")
    if attn_mask.dim() not in (2, 3):
        raise ValueError(
            f"attn_mask must have shape (q_len, k_len) or (batch * num_heads, q_len, k_len), got {tuple(attn_mask.shape)}"
        )
    if attn_mask.dim() == 2:
        return ~attn_mask  # (Tq, Tk)
    if num_heads is None or attn_mask.shape[0] % num_heads != 0:
        raise ValueError(
            f"a 3-D attn_mask of shape {tuple(attn_mask.shape)} needs num_heads dividing its first dim, got num_heads={num_heads}"
        )
    bh, q_len, k_len = attn_mask.shape
    return ~attn_mask.reshape(bh // num_heads, num_heads, q_len, k_len)  # (B, H, Tq, Tk)


def _check_bool(mask: object, name: str, fix: str = "", sign: str = "True = may attend") -> None:
    """Refuse anything but a bool tensor, saying how to convert the common mistakes."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a bool Tensor ({sign}), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        kind = "float" if mask.dtype.is_floating_point else "integer"
        fix = fix or (
            f"A 0/1 {kind} mask such as torch.tril(torch.ones(T, T)) converts with mask.bool(); "
            "PyTorch's key_padding_mask (True = ignore) with masks.from_key_padding_mask; "
            "an additive float bias (ALiBi, T5) goes in bias=, not mask="
        )
        raise TypeError(f"{name} must be a bool Tensor ({sign}), got dtype {mask.dtype}. {fix}")


def check_mask(
    mask: object,
    q_len: int,
    k_len: int,
    name: str = "mask",
    *,
    batch_shape: tuple[int | None, ...] = (None, None),
) -> None:
    """Check that ``mask`` is a bool mask that broadcasts to the scores and hides nothing by mistake.

    The scores have shape ``(*batch_shape, q_len, k_len)``; by default ``(B, H, q_len, k_len)``
    with any ``B`` and ``H``. The mask may have fewer dimensions (broadcasting from the right)
    but each of its dimensions must be 1 or equal to the scores' one: it may never make the
    scores bigger. It has at least 2 dimensions: a 1-D mask is refused (write ``(1, k_len)``
    for the same keys everywhere). Does nothing if ``mask`` is None.

    A 2-D mask means ``(q_len, k_len)``, the same for every sequence. When the scores' batch
    size ``batch_shape[0]`` equals ``q_len`` (and is > 1), a ``(batch, k_len)`` padding mask
    has that shape too and would be misread silently; so such a 2-D mask is refused as
    ambiguous unless it reads the same either way: all its rows equal, or exactly
    ``causal_mask(q_len, k_len)`` (a padding mask equal to it is vanishingly unlikely). The
    message says how to write a padding mask (``(batch, 1, 1, k_len)``, :func:`padding_mask`)
    and a shared mask (``(1, 1, q_len, k_len)``), which are never ambiguous.

    A mask that is the same for every sequence and leaves a query with no key at all is refused:
    a 2-D ``(q_len, k_len)`` mask, or one whose batch dimension is 1 (or missing) when the
    scores have a batch of more than one (``batch_shape[0] > 1``). ``~causal_mask(T)``
    (PyTorch's sign) does that to the first query, and so does ``tril(diagonal=-1)`` (a causal
    mask without its diagonal); the message says which one the mask looks like, because the two
    have different fixes (inverting the second shows every query its future). A mask built
    from the data (a batch dimension > 1, or a batch of one) may have such rows, e.g. padded
    queries under a causal mask; they get zero weights.

    Args:
        mask: The mask to check, or None.
        q_len: Number of queries.
        k_len: Number of keys.
        name: The argument name used in error messages.
        batch_shape: Leading dimensions of the scores; None entries accept any size.

    Raises:
        TypeError: If ``mask`` is not a bool tensor (the message says how to convert it).
        ValueError: If ``mask`` does not broadcast to the scores, is 1-D, is an ambiguous
            2-D mask (see above), or leaves a query with no key in every sequence.
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
    _check_bool(mask, name)
    assert isinstance(mask, Tensor)  # for the type checker; _check_bool raised otherwise
    shape_ok = 2 <= mask.dim() <= len(target) and all(
        m == 1 or t is None or m == t
        for m, t in zip(reversed(mask.shape), reversed(target), strict=False)
    )
    batch = batch_shape[0] if batch_shape else None  # the scores' batch size (None: unknown)
    if not shape_ok:
        hint = ""
        if mask.dim() == 1:
            hint = (
                f". A 1-D mask is refused (keys of which sequence?): for the same keys for every "
                f"query and sequence write {name}[None, :], shape (1, k_len)"
            )
        elif mask.dim() == 2 and mask.shape[0] == batch and mask.shape[1] == k_len:
            advice = _padding_advice(name, batch_shape)
            hint = f". It looks like a (batch, k_len) padding mask: {advice}"
        raise ValueError(
            f"{name} must be broadcastable to {expected}, got {tuple(mask.shape)}{hint}"
        )
    if (
        mask.dim() == 2
        and mask.shape[0] == q_len == batch
        and q_len > 1
        and not _reads_the_same_either_way(mask, q_len, k_len)
    ):
        shared = ", ".join(["None"] * len(batch_shape))
        ones = "1, " * len(batch_shape)
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} is ambiguous: a 2-D mask means (q_len, k_len), "
            f"the same for every sequence, but here batch = q_len = {q_len}, so it may be a "
            f"(batch, k_len) padding mask: {_padding_advice(name, batch_shape)}; for a mask "
            f"shared by every sequence write {name}[{shared}], shape ({ones}q_len, k_len)"
        )
    if _same_for_every_sequence(mask, target) and not bool(mask.any(dim=-1).all()):
        rows = mask.reshape(-1, *mask.shape[-2:])  # (N, Tq or 1, Tk): its 2-D slices
        empty = ~rows.any(dim=-1)  # (N, Tq or 1): queries with no key
        first = int(empty.any(dim=-1).nonzero()[0])  # the first slice with an empty row
        table, row = rows[first], int(empty[first].nonzero()[0])  # and its first empty query
        raise ValueError(
            f"{name} lets query {row} attend to no key in every sequence: True means MAY attend "
            f"here. {_empty_row_advice(table, q_len, k_len)}"
        )


def _padding_advice(name: str, batch_shape: tuple[int | None, ...]) -> str:
    """How to write a padding mask for scores of shape ``(*batch_shape, q_len, k_len)``."""
    index = f"{name}[:, {'None, ' * len(batch_shape)}:]"  # (B, 1, ..., 1, k_len)
    if len(batch_shape) == 2:
        return f"build it with masks.padding_mask(lengths) or {index}, shape (batch, 1, 1, k_len)"
    return f"give it the shape (batch, {'1, ' * (len(batch_shape) - 1)}1, k_len): {index}"


def _reads_the_same_either_way(mask: Tensor, q_len: int, k_len: int) -> bool:
    """Whether a 2-D ``mask`` means the same as ``(q_len, k_len)`` and as ``(batch, k_len)``.

    True if all its rows are equal (then both readings give the same result), or if it is
    exactly ``causal_mask(q_len, k_len)`` (the common case: a padding mask equal to it is
    vanishingly unlikely).
    """
    if bool((mask == mask[:1]).all()):
        return True
    return k_len >= q_len and torch.equal(mask, causal_mask(q_len, k_len, device=mask.device))


def _same_for_every_sequence(mask: Tensor, target: tuple[int | None, ...]) -> bool:
    """True if ``mask`` cannot depend on the data: 2-D, or broadcast over a batch of several."""
    if mask.dim() == 2:
        return True
    if len(target) <= 2:  # scores without a batch dimension
        return False
    batch = target[0]  # the scores' batch size (None: unknown)
    mask_batch = mask.shape[0] if mask.dim() == len(target) else 1  # missing: broadcast
    return mask_batch == 1 and batch is not None and batch > 1


def _empty_row_advice(table: Tensor, q_len: int, k_len: int) -> str:
    """What a (q_len, k_len) table with an empty row most likely is, and its fix."""
    if tuple(table.shape) == (q_len, k_len) and k_len >= q_len:
        causal = causal_mask(q_len, k_len, device=table.device)  # (Tq, Tk)
        if torch.equal(table, causal.tril(diagonal=k_len - q_len - 1)):
            return (
                "It is a causal mask without its diagonal (j < i, tril(diagonal=-1)): a token must "
                "be allowed to attend to itself, so use masks.causal_mask (tril() keeps the "
                "diagonal). Do not invert it: that would show every query its future"
            )
        if torch.equal(table, ~causal):
            return (
                "It is ~causal_mask, PyTorch's sign (True = ignore): convert it with "
                "masks.from_attn_mask, or build it with masks.causal_mask"
            )
    if not bool(table.any()):
        return (
            "It is all False, which forbids every key. If it has PyTorch's sign (True = ignore), "
            "convert it with masks.from_attn_mask or masks.from_key_padding_mask"
        )
    return (
        "If it has PyTorch's sign (True = ignore), convert it with masks.from_attn_mask or "
        "masks.from_key_padding_mask; if not, check which keys each query should see (a causal "
        "mask keeps its diagonal) rather than inverting it"
    )
