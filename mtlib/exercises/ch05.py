"""Chapter 5, masking: self-checks for a causal mask, a padding mask and the two combined.

Every mask follows the book's convention: a *bool* tensor, ``True`` = "this query may attend to
this key", broadcastable to the scores ``(batch, heads, q_len, k_len)``. The checkers compare
your mask entry by entry with a reference and recognise the classic mistakes (a diagonal off by
one, the upper triangle instead of the lower, PyTorch's opposite sign, a 0/1 float mask,
padding applied to the queries instead of the keys, a missing head dimension) and name them.
A hint says what your mask does, not what to type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from mtlib.exercises._core import CheckFailed, _call, _Case, _describe, _fail

__all__ = ["check_causal_mask", "check_combined_mask", "check_padding_mask"]

Maker = Callable[..., torch.Tensor]
ShapeHint = Callable[[torch.Tensor, torch.Tensor], str]

_FLOAT_HINT = (
    "return a bool tensor (True = may attend). A 0/1 float or integer mask is not a boolean "
    "mask: PyTorch's scaled_dot_product_attention ADDS a float attn_mask to the scores, so the "
    "future leaks; use .bool() or build the mask with comparisons"
)
_ADDITIVE_HINT = (
    "your mask is an additive bias (0 where allowed, -inf where not). PyTorch would add it to "
    "the scores correctly, but this book's mask is the boolean table itself (True = may attend); "
    "mtlib.masks.to_additive turns the one into the other"
)
_DEVICE_HINT = (
    "the checker's inputs are on the CPU: create your tensors where the inputs are, e.g. "
    "torch.arange(n, device=lengths.device), rather than on a fixed device"
)


def _dtype_hint(got: torch.Tensor) -> str:
    """A float 0/-inf tensor is an additive bias (it works); a 0/1 one is the float-mask trap."""
    if got.dtype.is_floating_point and got.numel():
        values = got.detach().cpu()
        if bool(((values == 0) | (values == float("-inf"))).all()) and bool((values == float("-inf")).any()):
            return _ADDITIVE_HINT
    return _FLOAT_HINT


def _entry(index: tuple[int, ...], names: Sequence[str]) -> str:
    return ", ".join(f"{n} {i}" for n, i in zip(names, index, strict=True))


def _run(
    checker: str,
    fn: Callable[..., Any],
    cases: Sequence[_Case],
    reference: Maker,
    mistakes: dict[str, Maker],
    names: Sequence[str],
    shape_hint: str | ShapeHint | None = None,
) -> None:
    """Call ``fn`` on every case; compare its bool mask with ``reference`` and known mistakes.

    A wrong shape is reported with ``shape_hint`` (a text, or a function of the mask returned
    and the one expected), wrong entries with the case's hint.
    """
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        try:
            got = _call(checker, where, fn, case)
        except CheckFailed as error:  # a device mismatch deserves its own hint
            what = str(error).partition("\nHint: ")[0].removeprefix(f"{checker} failed on {where}: ")
            if "device" not in what:
                raise
            raise _fail(checker, where, what, _DEVICE_HINT) from None
        if not isinstance(got, torch.Tensor):
            raise _fail(checker, where, f"expected a torch.Tensor, got {_describe(got)}", "return a tensor, not a list")
        if got.dtype != torch.bool:
            raise _fail(checker, where, f"expected a bool tensor, got dtype {got.dtype}", _dtype_hint(got))
        expected = reference(*case.args, **case.kwargs)
        for hint, mistake in mistakes.items():
            wrong = mistake(*case.args, **case.kwargs)
            if wrong.shape != expected.shape or not torch.equal(wrong, expected):
                if got.shape == wrong.shape and torch.equal(got.cpu(), wrong):
                    raise _fail(checker, where, "your mask equals a known mistake", hint)
        if tuple(got.shape) != tuple(expected.shape):
            hint = shape_hint(got, expected) if callable(shape_hint) else shape_hint or case.hint
            raise _fail(checker, where, f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}", hint)
        wrong_at = (got.cpu() != expected).nonzero()
        if len(wrong_at):
            index = tuple(wrong_at[0].tolist())
            said = "True (may attend)" if bool(got[index]) else "False (masked)"
            should = "True" if bool(expected[index]) else "False"
            raise _fail(
                checker,
                where,
                f"{len(wrong_at)} entries differ from the reference; the first is at "
                f"{_entry(index, names)}: you return {said}, expected {should}",
                case.hint,
            )
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 1. The causal mask
# --------------------------------------------------------------------------------------------


def _causal(n: int, diagonal: int = 0) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal)  # (n, n): key j <= query i + diagonal


def check_causal_mask(fn: Callable[[int], torch.Tensor]) -> None:
    """Check ``fn(n)``: the ``(n, n)`` causal mask, True where query ``i`` may attend key ``j <= i``.

    Cases: n = 1, 4 and 7. Recognised mistakes: the upper triangle (the future instead of the
    past), a diagonal off by one in either direction (the next token visible, or a token that
    cannot see itself), PyTorch's opposite sign (True = ignore), a float or integer 0/1 mask, an
    additive 0/-inf bias instead of a mask, a size fixed instead of ``n``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    mistakes: dict[str, Maker] = {
        "you allow the next token too (diagonal off by one): query i may attend keys j <= i, "
        "not j <= i + 1; this mask leaks one step of the future": lambda n: _causal(n, 1),
        "your mask hides the diagonal: a token must be allowed to attend to itself (j <= i, "
        "not j < i), otherwise the first query has nothing to attend to": lambda n: _causal(n, -1),
        "your mask is the upper triangle: each query sees itself and the FUTURE. Rows are "
        "queries, columns are keys: which of the two indices may be the larger one?": (
            lambda n: _causal(n).T.contiguous()
        ),
        "your mask has PyTorch's nn.MultiheadAttention sign (True = ignore); in this book True "
        "means 'may attend'": lambda n: ~_causal(n),
    }
    hint = "row i (query i) may attend the keys j = 0 .. i and no later one; look at the entry named above"
    cases = [
        _Case("n = 4", (4,), hint=hint),
        _Case("n = 1", (1,), hint="a single token may attend to itself"),
        _Case("n = 7", (7,), hint=hint),
    ]
    _run("check_causal_mask", fn, cases, _causal, mistakes, ("query", "key"), _causal_shape_hint)


def _causal_shape_hint(got: torch.Tensor, expected: torch.Tensor) -> str:
    n = expected.shape[-1]
    if got.dim() > 2 and got.shape[-2:] == expected.shape and all(d == 1 for d in got.shape[:-2]):
        return f"a {tuple(got.shape)} mask is right in use (it broadcasts), but return shape (n, n) here"
    if got.dim() == 2 and got.shape[0] == got.shape[1]:
        return f"your mask is {got.shape[0]} x {got.shape[1]} for n = {n}: build it from n, for any n"
    return "return shape (n, n): one row per query, one column per key"


# --------------------------------------------------------------------------------------------
# 2. The padding mask
# --------------------------------------------------------------------------------------------


def _padding(
    lengths: torch.Tensor, max_len: int, shift: int = 0, flip: bool = False, left: bool = False
) -> torch.Tensor:
    if left:  # the real tokens at the END of each row
        real = torch.arange(max_len)[None, :] >= max_len - lengths[:, None]  # (B, T)
    else:
        real = torch.arange(max_len)[None, :] < lengths[:, None] + shift  # (B, T)
    return (~real if flip else real)[:, None, None, :]  # (B, 1, 1, T)


def check_padding_mask(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(lengths, max_len)``: the key-padding mask of a right-padded batch.

    ``lengths`` is an integer tensor ``(B,)``, the number of real tokens of each sequence; the
    result is a bool tensor of shape ``(B, 1, 1, max_len)``, True at the real tokens (keys that
    may be attended), so that it broadcasts against scores ``(B, H, q_len, max_len)``. Cases have
    ``B != max_len``, a sequence with no padding and ``max_len`` longer than every sequence.
    Recognised mistakes: ``<=`` for ``<`` (the first pad visible), the opposite sign, a mask for
    left padding, a ``(B, max_len)`` mask without the two broadcast dimensions, positions on the
    query axis, ``lengths.max()`` instead of ``max_len``, a float 0/1 mask.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    mistakes: dict[str, Maker] = {
        "your mask lets the first padding position through: position t is real when "
        "t < length (positions count from 0), not t <= length": lambda lengths, t: _padding(lengths, t, 1),
        "your mask hides one real token: position t is real when t < length, so the last real "
        "token sits at length - 1": lambda lengths, t: _padding(lengths, t, -1),
        "your mask is True at the padding: True means 'may attend', so it must be True at the real "
        "tokens (PyTorch's key_padding_mask has the opposite sign)": lambda lengths, t: _padding(lengths, t, 0, True),
        "your mask is for LEFT padding (real tokens at the end of the row); this batch is "
        "right-padded: the real tokens come first, positions 0 .. length - 1": (
            lambda lengths, t: _padding(lengths, t, left=True)
        ),
    }
    hint = "position t of sequence b is real, True, iff t < lengths[b]; look at the entry named above"
    cases = [
        _Case("lengths [3, 1, 5], max_len 5", (torch.tensor([3, 1, 5]), 5), hint=hint),
        _Case("lengths [2, 4], max_len 7 (every sequence padded)", (torch.tensor([2, 4]), 7), hint=hint),
        _Case("lengths [6], max_len 6 (no padding)", (torch.tensor([6]), 6), hint=hint),
    ]
    _run("check_padding_mask", fn, cases, _padding, mistakes, ("sequence", "head", "query", "key"), _padding_shape_hint)


def _padding_shape_hint(got: torch.Tensor, expected: torch.Tensor) -> str:
    batch, max_len = expected.shape[0], expected.shape[-1]
    if got.dim() == 2 and tuple(got.shape) == (batch, max_len):
        return (
            "return shape (B, 1, 1, max_len): a (B, max_len) mask would broadcast against the "
            "scores (B, H, q_len, k_len) as if B were q_len, silently; add the two missing dims"
        )
    if got.dim() == 4 and got.shape[-1] == 1 and got.shape[-2] == max_len:
        return (
            "your positions run along the query axis (B, 1, max_len, 1): a padding mask hides "
            "padded KEYS, which are the last axis of the scores"
        )
    if got.dim() >= 1 and got.shape[-1] != max_len:
        return (
            f"your mask has {got.shape[-1]} positions, not max_len = {max_len}: a batch may be "
            "padded beyond its longest sequence, so use max_len rather than lengths.max()"
        )
    return "return shape (B, 1, 1, max_len): it broadcasts over the heads and the queries"


# --------------------------------------------------------------------------------------------
# 3. Padding and causal together (decoder self-attention)
# --------------------------------------------------------------------------------------------


def _combined(lengths: torch.Tensor, max_len: int, *, mistake: str = "") -> torch.Tensor:
    causal = _causal(max_len)  # (T, T)
    keys = _padding(lengths, max_len)  # (B, 1, 1, T): padding of the keys
    if mistake == "or":
        return causal | keys  # (B, 1, T, T)
    if mistake == "queries":
        return causal & keys.transpose(-2, -1)  # (B, 1, T, T): padding of the queries
    if mistake == "no causal":
        return keys.expand(-1, -1, max_len, -1)  # (B, 1, T, T)
    if mistake == "no padding":
        return causal.expand(len(lengths), 1, max_len, max_len)  # (B, 1, T, T)
    if mistake == "no heads":
        return (causal & keys)[:, 0]  # (B, T, T)
    if mistake == "sign":
        return ~(causal & keys)  # (B, 1, T, T): True = ignore
    if mistake == "next token":
        return _causal(max_len, 1) & keys  # (B, 1, T, T): the diagonal off by one
    if mistake == "no diagonal":
        return _causal(max_len, -1) & keys  # (B, 1, T, T): j < i
    if mistake == "upper":
        return causal.T.contiguous() & keys  # (B, 1, T, T): j >= i
    if mistake == "first pad":
        return causal & _padding(lengths, max_len, 1)  # (B, 1, T, T): t <= length
    if mistake == "left":
        return causal & _padding(lengths, max_len, left=True)  # (B, 1, T, T): real tokens last
    return causal & keys  # (B, 1, T, T)


def check_combined_mask(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(lengths, max_len)``: the mask of decoder self-attention on a right-padded batch.

    The result is a bool tensor of shape ``(B, 1, max_len, max_len)``: query ``i`` of sequence
    ``b`` may attend key ``j`` iff ``j <= i`` (causal) and ``j < lengths[b]`` (a real token). Cases
    have ``B != max_len``. Recognised mistakes: OR instead of AND, the padding applied to the
    queries instead of the keys, the causal part or the padding part missing, PyTorch's opposite
    sign, a causal diagonal off by one (either way) or the upper triangle, ``<=`` in the padding
    part or a mask for left padding, a ``(B, T, T)`` result without the head dimension.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    mistakes: dict[str, Maker] = {
        "you combined the masks with OR: a key must be allowed by BOTH masks (logical AND, &), "
        "otherwise padding leaks through the causal part and the future through the padding part": (
            lambda lengths, t: _combined(lengths, t, mistake="or")
        ),
        "your padding hides the padded QUERIES (rows), alone or with the keys: each padded query "
        "is then left with nothing to attend to (section 5.7: NaN in naive code). Hide the padded "
        "KEYS (columns) only: a padding mask is (B, 1, 1, T), so it broadcasts over the query axis": (
            lambda lengths, t: _combined(lengths, t, mistake="queries")
        ),
        "your mask has no causal part: each query may also see later tokens": (
            lambda lengths, t: _combined(lengths, t, mistake="no causal")
        ),
        "your mask has no padding part: queries may attend to padded keys": (
            lambda lengths, t: _combined(lengths, t, mistake="no padding")
        ),
        "your mask has PyTorch's sign (True = ignore); in this book True means 'may attend'": (
            lambda lengths, t: _combined(lengths, t, mistake="sign")
        ),
        "your causal part lets each query see the next token too (j <= i + 1, a diagonal off by "
        "one): allow j <= i": (lambda lengths, t: _combined(lengths, t, mistake="next token")),
        "your causal part hides the diagonal (j < i): a token must be allowed to attend to "
        "itself, otherwise the first query has nothing to attend to": (
            lambda lengths, t: _combined(lengths, t, mistake="no diagonal")
        ),
        "your causal part is the upper triangle: each query sees itself and the FUTURE (rows are "
        "queries, columns keys)": (lambda lengths, t: _combined(lengths, t, mistake="upper")),
        "your padding part lets the first padding position through: position t is real when "
        "t < length (positions count from 0)": (
            lambda lengths, t: _combined(lengths, t, mistake="first pad")
        ),
        "your padding part is for LEFT padding (real tokens at the end of the row); this batch is "
        "right-padded: the real tokens come first": (
            lambda lengths, t: _combined(lengths, t, mistake="left")
        ),
        "your mask has shape (B, T, T): against scores (B, H, T, T) the batch axis would be "
        "read as the heads axis; keep a head dimension of size 1, (B, 1, T, T)": (
            lambda lengths, t: _combined(lengths, t, mistake="no heads")
        ),
    }
    hint = (
        "query i of sequence b may attend key j iff j <= i (causal) and j < lengths[b] (a real "
        "key); look at the entry named above"
    )
    cases = [
        _Case("lengths [4, 2, 1], max_len 4", (torch.tensor([4, 2, 1]), 4), hint=hint),
        _Case("lengths [1, 3, 3, 2], max_len 3", (torch.tensor([1, 3, 3, 2]), 3), hint=hint),
        _Case("lengths [3, 5], max_len 6", (torch.tensor([3, 5]), 6), hint=hint),
    ]
    shape_hint = "return shape (B, 1, max_len, max_len): one table per sequence, 1 for the heads"
    _run("check_combined_mask", fn, cases, _combined, mistakes, ("sequence", "head", "query", "key"), shape_hint)
