"""Chapter 6, positional encoding: the sinusoidal rows at given positions, the RoPE rotation,
the ALiBi bias at given positions.

Besides comparing with a reference, these checkers recognise the typical mistakes (sine and
cosine swapped, an exponent without the 2 or without ``/ d``, channels paired the wrong way,
a rotation in the wrong direction; ALiBi slopes off by one head or in reverse order, the
positions given ignored, a signed distance, -inf on future keys, Bloom's ``m * j`` form) and
name them in the hint. Every RoPE and ALiBi case has ``T != Dh`` or ``Tq != Tk``, and every
sinusoidal case but one has ``len(positions) != d_model``.

The inputs are CPU tensors (or Python numbers). A result on another device (computed on the
GPU) is moved back before the comparison; a tensor that cannot be read back (``meta``) and a
device mismatch inside the learner's code get a worded failure with a device hint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mtlib.exercises._core import _Case, _check

__all__ = [
    "check_alibi_positions",
    "check_rope_rotation",
    "check_sinusoidal_positions",
]

# --------------------------------------------------------------------------------------------
# 1. The sinusoidal table
# --------------------------------------------------------------------------------------------


def _sinusoidal_at(
    positions: torch.Tensor,
    d_model: int,
    base: float = 10000.0,
    *,
    swap: bool = False,
    exponent: str = "2i/d",
    halves: bool = False,
) -> torch.Tensor:
    """The table's rows for the given positions (float64, ``(len(positions), d_model)``)."""
    pos = positions.double()[:, None]  # (n, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)  # (d/2,) pair index
    power = {"2i/d": 2 * i / d_model, "i/d": i / d_model, "2i": 2 * i, "4i/d": 4 * i / d_model}[
        exponent
    ]
    angles = pos / base**power  # (n, d/2)
    first, second = (
        (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
    )
    if halves:
        return torch.cat([first, second], dim=-1)  # (n, d): [sin ... | cos ...]
    return torch.stack([first, second], dim=-1).flatten(-2)  # (n, d): sin cos sin cos ...


_HALVES_HINT = (
    "you put all sines first and all cosines second, [sin | cos]: that is equivalent up to a "
    "permutation of channels (tensor2tensor, fairseq and Marian use it), but this exercise asks "
    "for the paper's interleaving, column 2i the sine and column 2i + 1 the cosine of one angle"
)
_EXPONENT_4I_HINT = (
    "your exponent is 4i / d_model: i already counts in steps of 2 (2i = 0, 2, 4, ...), so do "
    "not double it again"
)


def check_sinusoidal_positions(fn: Callable[[torch.Tensor, int, float], torch.Tensor]) -> None:
    """Check ``fn(positions, d_model, base)``: the sinusoidal rows for the given positions.

    ``positions`` is a 1-D int64 tensor of any positions (not ``0 .. n-1``, unsorted, possibly
    repeated, up to 123457); the result is a float64 tensor of shape ``(len(positions),
    d_model)`` with ``out[r, 2i] = sin(p / base^(2i / d_model))`` and ``out[r, 2i + 1] =
    cos(p / base^(2i / d_model))`` for ``p = positions[r]``. The last case has positions above
    10^5, where angles computed in float32 are off by about 1e-3.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "positions 0..6, d_model=10, base=10000",
            (torch.arange(7), 10, 10000.0),
            hint="compare a few entries with section 6.2's equation by hand: one row per "
            "position, column 2i the sine and column 2i + 1 the cosine of one angle",
        ),
        _Case(
            "positions [12, 3, 40, 0, 7, 7], d_model=6, base=10000",
            (torch.tensor([12, 3, 40, 0, 7, 7]), 6, 10000.0),
            hint="row r is the encoding of position positions[r], whatever the order",
        ),
        _Case(
            "positions [5, 1, 9], d_model=16, base=500",
            (torch.tensor([5, 1, 9]), 16, 500.0),
            hint="the frequencies are base^(-2i / d_model) for the base you are given",
        ),
        _Case(
            "positions [0, 1, 4096, 65535, 100000, 123457], d_model=12, base=10000",
            (torch.tensor([0, 1, 4096, 65535, 100000, 123457]), 12, 10000.0),
            hint="the error grows with the position: an angle near 10^5 rad kept in float32 "
            "(about 7 significant digits) is off by about 1e-3, so the angles must be float64 "
            "from the start, not converted at the end",
        ),
    ]
    mistakes = {
        "sine and cosine are swapped: even columns (0, 2, ...) are sines, odd columns cosines": (
            lambda p, d, b: _sinusoidal_at(p, d, b, swap=True)
        ),
        "your exponent is i / d_model: it is 2i / d_model, where i counts (sine, cosine) pairs": (
            lambda p, d, b: _sinusoidal_at(p, d, b, exponent="i/d")
        ),
        "your exponent is 2i without dividing by d_model: almost every frequency is then zero": (
            lambda p, d, b: _sinusoidal_at(p, d, b, exponent="2i")
        ),
        _EXPONENT_4I_HINT: lambda p, d, b: _sinusoidal_at(p, d, b, exponent="4i/d"),
        _HALVES_HINT: lambda p, d, b: _sinusoidal_at(p, d, b, halves=True),
        "your row for position p equals the reference row for p + 1: position p is the angle "
        "p * omega_i, nothing added": lambda p, d, b: _sinusoidal_at(p + 1, d, b),
        "you used positions 0 .. n-1 instead of the positions given": (
            lambda p, d, b: _sinusoidal_at(torch.arange(len(p)), d, b)
        ),
        "you used 10000 whatever the base: the frequencies are base^(-2i / d_model)": (
            lambda p, d, b: _sinusoidal_at(p, d)
        ),
    }
    _check(
        "check_sinusoidal_positions",
        fn,
        cases,
        _sinusoidal_at,
        mistakes=mistakes,
        dtype=torch.float64,
    )


# --------------------------------------------------------------------------------------------
# 2. The RoPE rotation
# --------------------------------------------------------------------------------------------


def _rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    halves: bool = False,
    halves_out: bool = False,
    sign: float = 1.0,
    exponent: str = "2i/d",
    ignore_positions: bool = False,
) -> torch.Tensor:
    """The reference rotation (float64, pairs (2i, 2i+1)) and the typical mistakes."""
    x = x.double()
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)  # (Dh/2,)
    theta = 10000.0 ** -({"2i/d": 2 * i / d, "i/d": i / d}[exponent])  # (Dh/2,)
    pos = torch.arange(x.shape[-2]) if ignore_positions else positions
    angles = pos.double()[:, None] * theta  # (T, Dh/2)
    cos, sin = torch.cos(angles), sign * torch.sin(angles)
    if halves:
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
    if halves_out:  # the right pairs, written back as section 6.4's rope writes its output
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def check_rope_rotation(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(x, positions)``: RoPE with the paper's pairing of neighbouring channels.

    ``x`` has shape ``(..., T, Dh)``; ``positions`` is an int64 tensor of shape ``(T,)`` (not
    necessarily ``0 .. T-1``). The pair ``(x[2i], x[2i+1])`` of the token at position ``m`` is
    rotated counter-clockwise by the angle ``m * theta_i``, ``theta_i = 10000^(-2i / Dh)``:
    ``(a, b) -> (a cos - b sin, a sin + b cos)``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(6)
    cases = [
        _Case(
            "x (2, 5, 6), positions 0..4",
            (torch.randn(2, 5, 6, generator=g), torch.arange(5)),
            hint="rotate each pair (x[2i], x[2i+1]) by the angle position * theta_i",
        ),
        _Case(
            "x (3, 2, 4, 8), positions [7, 3, 10, 0]",
            (torch.randn(3, 2, 4, 8, generator=g), torch.tensor([7, 3, 10, 0])),
            hint="use the positions you are given, one per row of x (the second-to-last axis)",
        ),
        _Case(
            "x (1, 3, 4), positions [100, 101, 102]",
            (torch.randn(1, 3, 4, generator=g), torch.tensor([100, 101, 102])),
            hint="theta_i = 10000^(-2i / Dh) with i the pair index 0 .. Dh/2 - 1",
        ),
    ]
    mistakes = {
        "you paired channel i with channel i + Dh/2 (the 'rotate half' convention of Llama): this "
        "exercise pairs neighbours, (x[2i], x[2i+1]), as the paper does": (
            lambda x, p: _rope(x, p, halves=True)
        ),
        "your pairs are right, (x[2i], x[2i+1]), but the output is in halves, [all first "
        "results | all second results], as torch.cat writes section 6.4's rotate-half output: "
        "the rotated pair goes back into channels 2i and 2i + 1": (
            lambda x, p: _rope(x, p, halves_out=True)
        ),
        "your rotation goes the wrong way (clockwise): (a, b) -> (a cos - b sin, a sin + b cos)": (
            lambda x, p: _rope(x, p, sign=-1.0)
        ),
        "your exponent is i / Dh: theta_i = 10000^(-2i / Dh), i the pair index": (
            lambda x, p: _rope(x, p, exponent="i/d")
        ),
        "you used positions 0 .. T-1 instead of the positions given": (
            lambda x, p: _rope(x, p, ignore_positions=True)
        ),
    }
    _check("check_rope_rotation", fn, cases, _rope, atol=1e-4, mistakes=mistakes)  # float32 angles


# --------------------------------------------------------------------------------------------
# 3. The ALiBi bias
# --------------------------------------------------------------------------------------------


def _alibi_at(
    num_heads: int,
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    *,
    first_slope_one: bool = False,
    sign: float = -1.0,
    slope_per_head: bool = True,
    form: str = "|i-j|",
    reversed_slopes: bool = False,
    future_inf: bool = False,
) -> torch.Tensor:
    """The bias for queries and keys at the given positions (float64, (1, H, Tq, Tk))."""
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)  # (H,)
    if not slope_per_head:
        slopes = 2.0**-h  # 1/2, 1/4, ... whatever the number of heads
    else:
        slopes = 2.0 ** (-8.0 * (h - 1 if first_slope_one else h) / num_heads)  # (H,)
    if reversed_slopes:
        slopes = slopes.flip(0)  # the shallowest head first
    q_pos = q_positions.double()[:, None]  # (Tq, 1)
    k_pos = k_positions.double()[None, :]  # (1, Tk)
    distance = {  # (Tq, Tk)
        "|i-j|": (q_pos - k_pos).abs(),
        "i-j": q_pos - k_pos,
        "bloom": -k_pos.expand(len(q_pos), -1),  # -m * (-j) = m * j: Bloom's bias
        "mpt": (k_pos.max() - k_pos).expand(len(q_pos), -1),  # -m * (j_last - j): MPT's
    }[form]
    bias = sign * slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)
    if future_inf:
        bias = bias.masked_fill(k_pos > q_pos, float("-inf"))
    return bias


def _alibi_mistakes(
    alibi: Callable[..., torch.Tensor], queries: str
) -> list[tuple[str, Callable[..., torch.Tensor]]]:
    """The named ALiBi mistakes, for ``alibi(num_heads, queries, keys, **mistake)``: (hint,
    mistake) pairs; a hint may name several mistakes."""
    named: dict[str, Any] = {
        "your slopes start at 1: the first head's slope is 2^(-8/h), not 2^0": (
            lambda h, q, k: alibi(h, q, k, first_slope_one=True)
        ),
        queries: lambda h, q, k: alibi(h, q, k, queries_first=True),
        "your bias has the wrong sign: distant keys are penalised, -m * |i - j|": (
            lambda h, q, k: alibi(h, q, k, sign=1.0)
        ),
        "your slopes are 2^-n whatever the number of heads h: they are 2^(-8n/h), so that "
        "every model's slopes span 2^(-8/h) .. 2^-8": lambda h, q, k: alibi(
            h, q, k, slope_per_head=False
        ),
        "your bias is -m_n * (i - j) or -m_n * (j - i), without the absolute value: keys on one "
        "side of the query then get a positive bias; ALiBi uses |i - j|": [
            lambda h, q, k: alibi(h, q, k, form="i-j"),
            lambda h, q, k: alibi(h, q, k, form="i-j", sign=1.0),
        ],
        "your slopes are in reverse order: head 1 has the steepest slope, 2^(-8/h), head h the "
        "shallowest, 2^-8": lambda h, q, k: alibi(h, q, k, reversed_slopes=True),
        "you put -inf on the keys after the query: that is the causal mask's job (mask= or "
        "is_causal=); the bias is -m_n * |i - j| everywhere": lambda h, q, k: alibi(
            h, q, k, future_inf=True
        ),
        "your bias is +m_n * j, Bloom's form (the open question asks when it gives the same "
        "weights); this exercise asks for -m_n * |i - j|": lambda h, q, k: alibi(h, q, k, form="bloom"),
        "your bias is -m_n * (j_last - j), MPT's form, the distance to the last key (the open "
        "question asks when it gives the same weights); this exercise asks for -m_n * |i - j|": (
            lambda h, q, k: alibi(h, q, k, form="mpt")
        ),
    }
    return [(hint, m) for hint, ms in named.items() for m in (ms if isinstance(ms, list) else [ms])]


def _alibi_given(
    num_heads: int,
    q_positions: torch.Tensor,
    k_positions: torch.Tensor,
    *,
    queries_first: bool = False,
    **mistake: Any,
) -> torch.Tensor:
    """The reference for explicit positions; ``queries_first``: the positions ignored, queries
    the last ``Tq`` of keys ``0 .. Tk-1`` (what ``alibi_bias(H, Tq, Tk)`` gives)."""
    if queries_first:
        k_len = len(k_positions)
        q_positions, k_positions = (
            torch.arange(k_len - len(q_positions), k_len),
            torch.arange(k_len),
        )
    return _alibi_at(num_heads, q_positions, k_positions, **mistake)


def check_alibi_positions(fn: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(num_heads, q_positions, k_positions)``: ALiBi's bias for given positions.

    ``q_positions`` (``(Tq,)``) and ``k_positions`` (``(Tk,)``) are int64 tensors of any
    positions: a cache that dropped some keys, keys in any order, positions near 10^6. Head
    ``n = 1 .. h`` (``h = num_heads``, a power of two) has slope ``m_n = 2^(-8n / h)``; the
    result, of shape ``(1, h, Tq, Tk)`` and any floating dtype, is
    ``-m_n * |q_positions[a] - k_positions[b]|`` at ``[0, n - 1, a, b]``, with no ``-inf``
    (that is the mask's job).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "H=4, queries at [5, 6, 7], keys at 0..7",
            (4, torch.tensor([5, 6, 7]), torch.arange(8)),
            hint="bias[0, n-1, a, b] = -m_n * |i - j| with i = q_positions[a], j = k_positions[b]",
        ),
        _Case(
            "H=8, query at [9], keys at [0, 1, 2, 6, 7, 8, 9] (3..5 dropped from the cache)",
            (8, torch.tensor([9]), torch.tensor([0, 1, 2, 6, 7, 8, 9])),
            hint="use the positions you are given: key column b sits at k_positions[b]",
        ),
        _Case(
            "H=2, queries at [3, 0, 4], keys at [4, 1, 3, 0, 2]",
            (2, torch.tensor([3, 0, 4]), torch.tensor([4, 1, 3, 0, 2])),
            hint="the order of the rows and columns is the order of the positions given",
        ),
        _Case(
            "H=16, queries at [1000003, 1000004], keys at 999998..1000004",
            (16, torch.tensor([1_000_003, 1_000_004]), torch.arange(999_998, 1_000_005)),
            hint="only the distance matters: subtract the positions before scaling by the slope "
            "(in float32, m * i - m * j near 10^6 loses the small difference)",
        ),
    ]
    mistakes = _alibi_mistakes(
        _alibi_given,
        "you ignored the positions given: your bias is the one for queries at the last Tq of "
        "keys 0 .. Tk-1 (what alibi_bias(H, Tq, Tk) gives); use q_positions and k_positions",
    )
    _check("check_alibi_positions", fn, cases, _alibi_given, mistakes=mistakes)
