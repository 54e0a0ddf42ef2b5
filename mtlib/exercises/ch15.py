"""Chapter 15, Transformer-XL: self-checks for the rel-shift trick and the memory update.

- :func:`check_rel_shift`: realign position scores computed against distances ``K-1 .. 0``
  so that column ``j`` holds the score of key ``j`` (query ``i`` sits at ``i + M``);
- :func:`check_update_memory`: the next memory of one layer: the last ``mem_len`` hidden
  states of ``[memory; segment]``, detached from the graph.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mtlib.exercises._core import _Case, _check, _describe, _fail, _learner_line

__all__ = ["check_rel_shift", "check_update_memory"]

# --------------------------------------------------------------------------------------------
# 1. The rel-shift trick
# --------------------------------------------------------------------------------------------


def _causal(t: int, k: int) -> torch.Tensor:
    """(T, K) True where key j is at or before query i (query i sits at i + K - T)."""
    return torch.ones(t, k, dtype=torch.bool).tril(diagonal=k - t)


def _gather(x: torch.Tensor, column: Callable[[int, int, int, int], int]) -> torch.Tensor:
    """out[..., i, j] = x[..., i, column(i, j, T, K)] on the causal entries, 0 above them."""
    *_, t, k = x.shape
    out = torch.zeros_like(x)
    for i in range(t):
        for j in range(i + k - t + 1):
            c = min(max(column(i, j, t, k), 0), k - 1)  # a mistake may point outside: clamp
            out[..., i, j] = x[..., i, c]
    return out


def _pad_trick(x: torch.Tensor, *, right: bool = False, drop_last: bool = False) -> torch.Tensor:
    """The pad-and-reshape trick, or its two usual slips (pad on the right, drop the wrong row)."""
    *lead, t, k = x.shape
    padded = torch.nn.functional.pad(x, (0, 1) if right else (1, 0))  # (..., T, K + 1)
    padded = padded.reshape(*lead, k + 1, t)  # (..., K + 1, T): the same buffer, rows of T
    kept = padded[..., :-1, :] if drop_last else padded[..., 1:, :]  # (..., K, T)
    return _causal_only(kept.reshape(*lead, t, k))  # (..., T, K)


def _causal_only(x: torch.Tensor) -> torch.Tensor:
    """x with the entries above the causal diagonal zeroed (they are never checked)."""
    return x.masked_fill(~_causal(*x.shape[-2:]), 0.0)


def _shifted(x: torch.Tensor, *, mistake: str = "") -> torch.Tensor:
    """The reference (or a known mistake) with the entries above the causal diagonal zeroed."""
    if mistake == "ascending":  # read column c as distance c
        return _gather(x, lambda i, j, t, k: i + k - t - j)
    if mistake == "no_memory":  # distance i - j, forgetting that query i sits at i + M
        return _gather(x, lambda i, j, t, k: k - 1 - (i - j))
    if mistake == "off_by_one":  # distance i + M - j - 1
        return _gather(x, lambda i, j, t, k: k - (i + k - t - j))
    return _gather(x, lambda i, j, t, k: k - 1 - (i + k - t - j))


def _rel_shift_cases() -> list[_Case]:
    gen = torch.Generator().manual_seed(15)
    cases = []
    for description, shape in (
        ("T = 3 queries, K = 5 keys (2 in memory)", (3, 5)),
        ("batch 2, 3 heads, T = 4, K = 11 (7 in memory)", (2, 3, 4, 11)),
        ("no memory: T = K = 6", (6, 6)),
    ):
        cases.append(
            _Case(
                description,
                (torch.randn(*shape, generator=gen, dtype=torch.float64),),
                hint="try your function on a matrix of its own distances (x[..., i, c] = K - 1 - c, "
                "as in section 15.4) and check that row i reads T_mem + i - j in each column "
                "j <= i + T_mem (T_mem = K - T)",
            )
        )
    return cases


def check_rel_shift(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(x) -> out``: the rel-shift of Transformer-XL's position scores.

    ``x`` has shape ``(..., T, K)`` (``K = T_mem + T`` keys, what the book calls ``T_k``);
    ``x[..., i, c]`` is query ``i``'s score against distance ``K - 1 - c``. Query ``i`` sits at
    position ``i + T_mem`` (``T_mem = K - T`` memory slots first), so key ``j`` is at distance
    ``i + T_mem - j``. Return ``out`` of the same shape with
    ``out[..., i, j]`` = the score for that distance, for every ``j <= i + M``; the entries above
    are never attended to and are not checked. The pad-and-reshape trick or an explicit gather
    both pass.

    Recognised mistakes: reading the columns as distances ``0 .. K-1`` (no flip), forgetting
    the memory offset ``T_mem``, a shift off by one, padding the zero column on the right,
    dropping the last row of the padded buffer instead of the first, a cast to float32.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    if not callable(fn):
        raise TypeError(f"check_rel_shift takes your function, got {_describe(fn)}")

    def causal_part(x: torch.Tensor) -> Any:
        out = fn(x)
        if isinstance(out, torch.Tensor) and out.shape == x.shape:
            keep = _causal(*x.shape[-2:])  # (T, K)
            return out.masked_fill(~keep, 0.0)  # only the causal entries are compared
        return out

    _check(
        "check_rel_shift",
        causal_part,
        _rel_shift_cases(),
        _shifted,
        atol=1e-12,
        mistakes={
            "column c of x is distance K - 1 - c (the table runs from the farthest distance "
            "down to 0), not distance c": lambda x: _shifted(x, mistake="ascending"),
            "query i sits at position i + M after the M memory slots: key j is at distance "
            "i + M - j, not i - j": lambda x: _shifted(x, mistake="no_memory"),
            "off by one: the diagonal j = i + M is distance 0, the last column of x": lambda x: (
                _shifted(x, mistake="off_by_one")
            ),
            "the zero column goes on the LEFT (pad (1, 0)): padded on the right, the rows "
            "shift the wrong way": lambda x: _pad_trick(x, right=True),
            "after reading the padded buffer with rows of T, drop its FIRST row ([..., 1:, :]), "
            "not the last": lambda x: _pad_trick(x, drop_last=True),
            "your values are right only to float32 precision: keep x's dtype (float64 here), "
            "do not cast": lambda x: _shifted(x).float().double(),
        },
    )


# --------------------------------------------------------------------------------------------
# 2. The memory update
# --------------------------------------------------------------------------------------------


def check_update_memory(fn: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]) -> None:
    """Check ``fn(mem, hidden, mem_len) -> new_mem`` for one layer.

    ``mem`` (B, M, d) is the layer's memory, ``hidden`` (B, T, d) what entered the layer for the
    current segment. The next memory is the last ``mem_len`` positions of ``[mem; hidden]``
    (fewer if there are fewer; an empty (B, 0, d) tensor if ``mem_len`` is 0), shape
    (B, min(mem_len, M + T), d), detached from the graph: no gradient may flow into a previous segment.

    ``fn`` must leave its arguments as they were: ``hidden.detach_()`` takes the caller's
    ``hidden`` (a layer's input, part of the graph) out of the graph, which silently cuts the
    gradient of every earlier layer, and writing into ``mem`` changes a tensor the caller still
    holds.

    Recognised mistakes: keeping the oldest positions, keeping only the segment, ``[-0:]``
    keeping everything when ``mem_len`` is 0, forgetting to detach, dropping the old memory,
    detaching ``hidden`` in place, writing into ``mem``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    name = "check_update_memory"
    if not callable(fn):
        raise TypeError(f"{name} takes your function, got {_describe(fn)}")
    gen = torch.Generator().manual_seed(15)
    cases = [  # (description, B, M, T, d, mem_len)
        ("empty memory, segment of 4, mem_len 6", 2, 0, 4, 3, 6),
        ("memory of 4, segment of 4, mem_len 6 (drop the 2 oldest)", 2, 4, 4, 3, 6),
        ("memory of 6, segment of 3, mem_len 6", 3, 6, 3, 5, 6),
        ("mem_len 2 shorter than the segment of 5", 1, 2, 5, 3, 2),
        ("mem_len 0: no memory at all", 2, 3, 4, 3, 0),
    ]
    for number, (description, b, m, t, d, mem_len) in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({description})"
        mem = torch.randn(b, m, d, generator=gen, dtype=torch.float64)
        leaf = torch.randn(b, t, d, generator=gen, dtype=torch.float64, requires_grad=True)
        hidden = leaf * 1.0  # part of a graph, as a layer's input is
        both = torch.cat([mem, hidden.detach()], dim=1)  # (B, M + T, d)
        want = both[:, max(0, m + t - mem_len) :]  # (B, min(mem_len, M + T), d)
        mem_before, hidden_before = mem.clone(), hidden.detach().clone()
        try:
            got = fn(mem, hidden, mem_len)
        except Exception as error:  # the learner's bug, reported in words
            what = f"your function raised {type(error).__name__}: {error}"
            stub = isinstance(error, NotImplementedError)
            raise _fail(name, where, what + ("" if stub else _learner_line(error))) from None
        if not hidden.requires_grad:
            raise _fail(
                name, where, "your function took the caller's hidden out of the graph "
                "(hidden.detach_() or hidden.requires_grad_(False)): in a model every earlier "
                "layer would silently lose its gradient",
                "hidden.detach() returns a detached copy and leaves hidden as it was",
            )  # fmt: skip
        if not (torch.equal(mem, mem_before) and torch.equal(hidden.detach(), hidden_before)):
            which = "mem" if not torch.equal(mem, mem_before) else "hidden"
            raise _fail(
                name, where, f"your function wrote into {which}, a tensor the caller still holds",
                "build the new memory as a new tensor (torch.cat, then a slice)",
            )  # fmt: skip
        if not isinstance(got, torch.Tensor):
            empty = " (for mem_len 0: an empty (B, 0, d) tensor, not None)" if mem_len == 0 else ""
            raise _fail(name, where, f"expected a torch.Tensor{empty}, got {_describe(got)}")
        if got.shape == both.shape and mem_len < m + t:
            hint = (
                "mem_len 0 means an empty memory: x[:, -0:] is the whole tensor, use "
                "x[:, max(0, L - mem_len):]"
                if mem_len == 0
                else "keep only the last mem_len positions"
            )
            raise _fail(name, where, f"you kept all {m + t} positions", hint)
        if (
            m > 0
            and mem_len > t
            and got.shape == hidden.shape
            and torch.equal(got, hidden.detach())
        ):
            raise _fail(
                name, where, "you returned only the current segment",
                "the memory is [mem; hidden] (concatenated along dim 1), then its last mem_len",
            )  # fmt: skip
        if tuple(got.shape) != tuple(want.shape):
            raise _fail(
                name, where, f"expected shape {tuple(want.shape)}, got {tuple(got.shape)}",
                "the memory is the last min(mem_len, M + T) positions of [mem; hidden]",
            )  # fmt: skip
        # an empty view made under no_grad may keep the flag: only a non-empty one is attached
        if got.requires_grad and got.numel() > 0:
            raise _fail(
                name, where, "the new memory is still attached to the graph",
                "detach it: the next segment must not backpropagate into this one",
            )  # fmt: skip
        if torch.equal(got, want):
            continue
        if m + t > mem_len > 0 and torch.equal(got, both[:, :mem_len]):
            raise _fail(
                name, where, "you kept the oldest positions",
                "the memory slides forward: keep the most recent mem_len positions",
            )  # fmt: skip
        raise _fail(
            name, where, "values differ from the expected memory",
            "concatenate memory first, then the segment, along the time axis (dim 1)",
        )  # fmt: skip
    print(f"{name}: all {len(cases)} cases passed.")
