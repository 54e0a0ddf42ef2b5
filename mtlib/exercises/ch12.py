"""Chapter 12, efficient attention: self-checks for the online softmax and a growing KV cache.

- :func:`check_online_softmax`: merge the running state ``(m, l, acc)`` of two blocks of keys
  (running max, sum of exponentials, weighted sum of values) into the state of both, exactly
  as FlashAttention's inner loop does (Milakov & Gimelshein, 2018; Dao et al., 2022);
- :func:`check_kv_cache_append`: write new keys into a preallocated buffer after the cached
  ones, growing it geometrically when full, so that a generation copies ``O(T)`` positions.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from mtlib.exercises._core import CheckFailed, _call, _Case, _describe, _fail, _learner_line

__all__ = ["check_kv_cache_append", "check_online_softmax"]

NEG_INF = float("-inf")

# --------------------------------------------------------------------------------------------
# 1. Online softmax: merging two blocks' states
# --------------------------------------------------------------------------------------------


def _state(scores: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(m, l, acc) of one block: scores (..., n), values (n, d_v)."""
    m = scores.amax(dim=-1, keepdim=True)  # (..., 1)
    safe = m.masked_fill(m == NEG_INF, 0.0)
    p = torch.exp(scores - safe)  # (..., n)
    return m, p.sum(dim=-1, keepdim=True), p @ values


def _merge(
    m_a: torch.Tensor,
    l_a: torch.Tensor,
    acc_a: torch.Tensor,
    m_b: torch.Tensor,
    l_b: torch.Tensor,
    acc_b: torch.Tensor,
    *,
    rule: str = "right",
) -> torch.Tensor:
    """The merged state packed as one tensor ``cat([m, l, acc], -1)``; ``rule`` makes mistakes."""
    m = torch.maximum(m_a, m_b)
    if rule == "last_max":  # keeps the second block's max as the reference
        m = m_b
    safe = m.masked_fill(m == NEG_INF, 0.0)
    a, b = torch.exp(m_a - safe), torch.exp(m_b - safe)
    if rule == "flipped":  # exp(m - m_i) instead of exp(m_i - m)
        a, b = torch.exp(safe - m_a), torch.exp(safe - m_b)
    if rule == "no_rescale":
        a, b = torch.ones_like(a), torch.ones_like(b)
    if rule == "first_only":  # assumes the second block always brings the larger maximum
        b = torch.ones_like(b)
    l_scale = (torch.ones_like(a), torch.ones_like(b)) if rule == "acc_only" else (a, b)
    length = l_a * l_scale[0] + l_b * l_scale[1]
    acc = acc_a * a + acc_b * b
    return torch.cat([m, length, acc], dim=-1)


def _online_cases() -> list[_Case]:
    gen = torch.Generator().manual_seed(12)
    cases = []
    for description, rows, n_a, n_b, d_v, spread in (
        ("one row, blocks of 3 and 4 keys", (1,), 3, 4, 2, 2.0),
        ("5 rows, blocks of 6 and 2 keys, d_v = 3", (5,), 6, 2, 3, 3.0),
        ("batch (2, 3) of rows, large scores (around 80)", (2, 3), 4, 5, 3, 40.0),
    ):
        scores = spread * torch.randn(*rows, n_a + n_b, generator=gen, dtype=torch.float64)
        if spread > 10:
            scores = scores.abs() + 60.0  # exp(score) alone would be ~1e35 or overflow in float32
        values = torch.randn(n_a + n_b, d_v, generator=gen, dtype=torch.float64)
        state_a = _state(scores[..., :n_a], values[:n_a])
        state_b = _state(scores[..., n_a:], values[n_a:])
        cases.append(_Case(description, (*state_a, *state_b)))
    # a first block where row 0 saw no key at all (fully masked): m = -inf, l = 0, acc = 0
    scores = torch.randn(2, 7, generator=gen, dtype=torch.float64)
    values = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    masked = scores[:, :3].clone()
    masked[0] = NEG_INF
    state_a, state_b = _state(masked, values[:3]), _state(scores[:, 3:], values[3:])
    cases.append(
        _Case(
            "row 0 of the first block fully masked (m = -inf, l = 0)",
            (*state_a, *state_b),
            hint="exp(-inf - m) = 0: a block that saw no key contributes nothing",
        )
    )
    # row 1 saw no key in EITHER block (a causal query before every key): the merged state must
    # stay m = -inf, l = 0, acc = 0; the naive merge computes -inf - (-inf) = NaN there
    scores = torch.randn(3, 8, generator=gen, dtype=torch.float64)
    values = torch.randn(8, 2, generator=gen, dtype=torch.float64)
    scores[1] = NEG_INF
    state_a, state_b = _state(scores[:, :5], values[:5]), _state(scores[:, 5:], values[5:])
    cases.append(
        _Case(
            "row 1 saw no key in either block (m = -inf in both)",
            (*state_a, *state_b),
            hint="-inf - (-inf) is NaN: where the merged m is -inf, subtract 0 instead of m "
            "(as tiled_attention does), so that the row stays m = -inf, l = 0, acc = 0",
        )
    )
    return cases


_OUTPUT_HINTS = {  # what each output is, for a mistake that no catalogued one explains
    "m": "m is the largest score over both blocks: the larger of m_a and m_b, row by row",
    "l": "l is the sum of exp(s_j - m) over both blocks: l_a and l_b, each rescaled by "
    "exp(m_block - m), then added",
    "acc": "acc is the unnormalised sum of exp(s_j - m) v_j over both blocks: acc_a and acc_b, "
    "each rescaled like its block's l (do not divide by l here)",
}


def check_online_softmax(fn: Callable[..., Any]) -> None:
    """Check ``fn(m_a, l_a, acc_a, m_b, l_b, acc_b) -> (m, l, acc)``: merge two blocks' states.

    For the keys of one block, a row's state is ``m`` (its largest score, shape ``(..., 1)``),
    ``l = sum_j exp(s_j - m)`` (``(..., 1)``) and ``acc = sum_j exp(s_j - m) v_j``
    (``(..., d_v)``). The merged state is that of both blocks together: ``m`` the larger
    maximum, and each block's ``l`` and ``acc`` rescaled by ``exp(m_block - m)`` before adding.
    Then ``acc / l`` is the exact softmax-weighted average. A row that saw no key in either
    block stays ``m = -inf``, ``l = 0``, ``acc = 0``.

    Recognised mistakes: adding without rescaling, the rescale factor inverted, rescaling
    ``acc`` but not ``l``, keeping the second block's maximum, rescaling only the first block,
    NaN on a row that saw no key in either block. Any other error names the output (``m``,
    ``l`` or ``acc``) that is off and where.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    name = "check_online_softmax"
    if not callable(fn):
        raise TypeError(f"{name} takes your function, got {_describe(fn)}")
    atol = 1e-9
    mistakes = {
        "rescale each block by exp(m_block - m) before adding: its l and acc were computed "
        "against its own maximum": "no_rescale",
        "the factor is exp(m_block - m) (at most 1), not exp(m - m_block)": "flipped",
        "l needs the same rescale as acc, or acc / l is off": "acc_only",
        "m must be the larger of the two maxima (the second block's can be smaller, and "
        "exp(m_a - m_b) may then overflow)": "last_max",
        "rescale the second block too: its maximum can be smaller than the first block's, "
        "and then its l and acc need exp(m_b - m) < 1": "first_only",
    }
    cases = _online_cases()
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        out = _call(name, where, fn, case)
        if not (
            isinstance(out, tuple)
            and len(out) == 3
            and all(isinstance(t, torch.Tensor) for t in out)
        ):
            raise _fail(
                name, where, f"return a tuple of three tensors (m, l, acc), got {_describe(out)}"
            )
        expected = _merge(*case.args).split([1, 1, case.args[2].shape[-1]], dim=-1)
        for label, got, want in zip(("m", "l", "acc"), out, expected, strict=True):
            if tuple(got.shape) != tuple(want.shape):
                raise _fail(
                    name,
                    where,
                    f"your {label} has shape {tuple(got.shape)}, expected {tuple(want.shape)}",
                    "m and l keep the shape (..., 1), acc the shape (..., d_v)",
                )
            if not got.is_floating_point():
                raise _fail(
                    name, where, f"your {label} has dtype {got.dtype}, expected a float tensor"
                )
        got_all = torch.cat([t.detach().double() for t in out], dim=-1)  # (..., 2 + d_v)
        want_all = torch.cat(expected, dim=-1)
        for hint, rule in mistakes.items():
            wrong = _merge(*case.args, rule=rule)
            if not torch.allclose(
                wrong, want_all, atol=atol, rtol=0, equal_nan=True
            ) and torch.allclose(got_all, wrong, atol=atol, rtol=0, equal_nan=True):
                raise _fail(name, where, "your output equals a known mistake", hint)
        for label, got, want in zip(("m", "l", "acc"), out, expected, strict=True):
            got = got.detach().double()
            if torch.isnan(got).any():
                row = tuple(torch.isnan(got).nonzero()[0].tolist())
                raise _fail(
                    name,
                    where,
                    f"your {label} is NaN at index {row}",
                    case.hint or _OUTPUT_HINTS[label],
                )
            close = torch.isclose(got, want, atol=atol, rtol=0)  # -inf is close only to -inf
            if not close.all():
                row = tuple((~close).nonzero()[0].tolist())
                error = (got - want).abs().masked_fill(close, 0.0).nan_to_num(posinf=float("inf"))
                raise _fail(
                    name,
                    where,
                    f"your {label} is off: {got[row].item():.6g} at index {row} where "
                    f"{want[row].item():.6g} was expected (largest error {error.max().item():.3g})",
                    case.hint or _OUTPUT_HINTS[label],
                )
    print(f"{name}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 2. A KV cache that grows in place
# --------------------------------------------------------------------------------------------


def check_kv_cache_append(fn: Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(buffer, length, new) -> buffer``: append to a preallocated cache.

    ``buffer`` has shape ``(B, H, capacity, Dh)`` and holds the cached keys in its first
    ``length`` positions; ``new`` has shape ``(B, H, T_new, Dh)``. Return a buffer whose first
    ``length + T_new`` positions are the old keys followed by ``new``: the same tensor, written
    in place, when there is room (exactly full included); otherwise a new buffer at least
    twice as long (old keys copied in), with the dtype and device of ``buffer``. The check
    simulates a generation of 1- and 2-token steps on a float64 buffer, including a step that
    fills the buffer exactly, and also counts the buffers allocated, which must stay
    logarithmic in the length.

    Recognised mistakes: writing at the wrong offset, forgetting to copy the old keys into a
    new buffer, growing by a fixed amount (or by ``torch.cat``, one new buffer per step),
    growing when the buffer is exactly full, allocating without the buffer's dtype and device
    (``torch.zeros(...)`` gives float32 on the CPU: on a GPU or in half precision the cache
    silently moves or changes precision), returning only the filled part of the buffer.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing step and what was wrong.
    """
    name = "check_kv_cache_append"
    if not callable(fn):
        raise TypeError(f"{name} takes your function, got {_describe(fn)}")
    gen = torch.Generator().manual_seed(12)
    batch, heads, head_dim = 2, 3, 5
    # float64, not the default dtype: a buffer allocated without dtype= (or device=) shows
    buffer = torch.zeros(batch, heads, 4, head_dim, dtype=torch.float64)  # (B, H, capacity, Dh)
    everything = buffer[:, :, :0].clone()  # what the cache must hold
    length, allocations, steps = 0, 1, 0
    # a prompt of 3, then 1- and 2-token steps; step 2 fills the buffer of 4 exactly
    sizes = [3] + [1 + (i % 5 == 4) for i in range(90)]
    for steps, t_new in enumerate(sizes, start=1):
        new = torch.randn(batch, heads, t_new, head_dim, generator=gen, dtype=torch.float64)
        where = f"step {steps} of {len(sizes)} (length {length}, appending {t_new})"
        try:
            out = fn(buffer, length, new.clone())
        except Exception as error:  # the learner's bug, reported in words
            what = f"your function raised {type(error).__name__}: {error}"
            stub = isinstance(error, NotImplementedError)  # not written yet: no line
            raise _fail(name, where, what + ("" if stub else _learner_line(error))) from None
        everything = torch.cat([everything, new], dim=2)
        length += t_new
        if not isinstance(out, torch.Tensor):
            raise _fail(name, where, f"expected the buffer (a torch.Tensor), got {_describe(out)}")
        if out.dim() != 4 or tuple(out.shape[:2]) + (out.shape[3],) != (batch, heads, head_dim):
            raise _fail(
                name,
                where,
                f"expected a buffer of shape (B, H, capacity, Dh) = ({batch}, {heads}, *, {head_dim}), got {tuple(out.shape)}",
            )
        if out.dtype != buffer.dtype or out.device != buffer.device:
            raise _fail(
                name,
                where,
                f"the buffer you returned is {out.dtype} on {out.device}, the cache's was "
                f"{buffer.dtype} on {buffer.device}",
                "allocate the bigger buffer like the old one (buffer.new_empty(...), or dtype= "
                "and device= from buffer): a cache in float16 on a GPU must stay there",
            )
        if out.shape[2] < length:
            raise _fail(
                name,
                where,
                f"the buffer holds {out.shape[2]} positions but the cache now has {length}",
            )
        if out.data_ptr() == buffer.data_ptr() and out.shape[2] < buffer.shape[2]:
            raise _fail(
                name,
                where,
                f"you returned {out.shape[2]} of the buffer's {buffer.shape[2]} positions",
                "return the whole buffer, not its filled part: the spare room after the cached "
                "positions is where the next steps write",
            )
        held = out[:, :, :length]
        if not torch.equal(held[:, :, -t_new:], new):
            raise _fail(
                name,
                where,
                "the new keys are not at positions [length, length + T_new)",
                "write new at buffer[:, :, length : length + T_new]",
            )
        if not torch.equal(held, everything):
            first = int((held != everything).any(dim=(0, 1, 3)).nonzero()[0])
            raise _fail(
                name,
                where,
                f"cached position {first} changed",
                "when you allocate a bigger buffer, copy the old positions into it first",
            )
        if out.data_ptr() != buffer.data_ptr():
            if buffer.shape[2] >= length:
                raise _fail(
                    name,
                    where,
                    "a new buffer was allocated although the old one had room"
                    + (" (it was exactly full)" if buffer.shape[2] == length else ""),
                    "write in place when length + T_new <= capacity",
                )
            allocations += 1
            if out.shape[2] < 2 * buffer.shape[2] and out.shape[2] < 2 * length:
                raise _fail(
                    name, where,
                    f"the buffer grew from {buffer.shape[2]} to {out.shape[2]} positions",
                    "grow geometrically (e.g. to twice the needed length): growing by a fixed "
                    "amount, or with torch.cat at every step, copies O(T^2) positions in all",
                )  # fmt: skip
        buffer = out
    bound = 2 + math.ceil(math.log2(length))
    if allocations > bound:
        raise CheckFailed(
            f"{name} failed on the whole generation: {allocations} buffers for {length} positions "
            f"(at most {bound} expected)\nHint: grow geometrically, not by a fixed amount"
        )
    print(
        f"{name}: all {steps} cases (generation steps) passed; {allocations} buffers for {length} positions."
    )
