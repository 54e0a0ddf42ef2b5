"""Chapter 6, positional encoding: the sinusoidal table, the RoPE rotation, the ALiBi bias.

Besides comparing with a reference, these checkers recognise the typical mistakes (sine and
cosine swapped, an exponent without the 2 or without ``/ d``, channels paired the wrong way,
a rotation in the wrong direction; ALiBi slopes off by one head or in reverse order, queries
placed at the wrong positions, a signed distance, -inf on future keys) and name them in the hint. Every case has ``max_len != d_model`` or ``q_len != k_len``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mtlib.exercises._core import _Case, _check

__all__ = ["check_alibi_bias", "check_rope_rotation", "check_sinusoidal_encoding"]


# --------------------------------------------------------------------------------------------
# 1. The sinusoidal table
# --------------------------------------------------------------------------------------------


def _sinusoidal(
    max_len: int,
    d_model: int,
    *,
    swap: bool = False,
    exponent: str = "2i/d",
    halves: bool = False,
) -> torch.Tensor:
    """The reference table (float64) and, with the keyword arguments, the typical mistakes."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)  # (d/2,) pair index
    power = {"2i/d": 2 * i / d_model, "i/d": i / d_model, "2i": 2 * i}[exponent]
    angles = pos / 10000.0**power  # (L, d/2)
    first, second = (
        (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
    )
    if halves:
        return torch.cat([first, second], dim=-1)  # (L, d): [sin ... | cos ...]
    return torch.stack([first, second], dim=-1).flatten(-2)  # (L, d): sin cos sin cos ...


def _column_exponent(max_len: int, d_model: int) -> torch.Tensor:
    """Mistake: every column j gets its own frequency 10000^(-j/d) (no pairs)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    j = torch.arange(d_model, dtype=torch.float64)  # (d,)
    angles = pos / 10000.0 ** (j / d_model)  # (L, d)
    return torch.where(j.long() % 2 == 0, torch.sin(angles), torch.cos(angles))


def check_sinusoidal_encoding(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check ``fn(max_len, d_model)``: the sinusoidal table of shape ``(max_len, d_model)``.

    ``PE[pos, 2i] = sin(pos / 10000^(2i / d_model))`` and
    ``PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))``: even columns sines, odd columns
    cosines, one frequency per (sine, cosine) pair.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case(
            "max_len=7, d_model=10",
            (7, 10),
            hint="PE[pos, 2i] = sin(pos / 10000^(2i / d_model)) and PE[pos, 2i + 1] = cos of the "
            "same angle: divide the position by 10000^(2i / d_model)",
        ),
        _Case(
            "max_len=50, d_model=6", (50, 6), hint="the exponent is 2i / d_model, i the pair index"
        ),
        _Case("max_len=5, d_model=16", (5, 16), hint="rows are positions, columns are channels"),
    ]
    mistakes = {
        "sine and cosine are swapped: even columns (0, 2, ...) are sines, odd columns cosines": (
            lambda n, d: _sinusoidal(n, d, swap=True)
        ),
        "your exponent is i / d_model: it is 2i / d_model, where i counts (sine, cosine) pairs, so "
        "the frequencies go from 1 down to about 1/10000": lambda n, d: _sinusoidal(
            n, d, exponent="i/d"
        ),
        "your exponent is 2i without dividing by d_model: almost every frequency is then zero": (
            lambda n, d: _sinusoidal(n, d, exponent="2i")
        ),
        "you put all sines first and all cosines second: the paper interleaves them, column 2i the "
        "sine and column 2i + 1 the cosine of the same frequency": lambda n, d: _sinusoidal(
            n, d, halves=True
        ),
        "each column has its own frequency 10000^(-j/d): columns 2i and 2i + 1 must share one "
        "frequency (a sine and a cosine of the same angle)": _column_exponent,
    }
    _check("check_sinusoidal_encoding", fn, cases, _sinusoidal, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 2. The RoPE rotation
# --------------------------------------------------------------------------------------------


def _rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    halves: bool = False,
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


def _alibi(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    first_slope_one: bool = False,
    queries_first: bool = False,
    sign: float = -1.0,
    slope_per_head: bool = True,
    signed: bool = False,
    reversed_slopes: bool = False,
    future_inf: bool = False,
) -> torch.Tensor:
    """The reference bias (float64, (1, H, Tq, Tk)) and the typical mistakes."""
    h = torch.arange(1, num_heads + 1, dtype=torch.float64)  # (H,)
    if not slope_per_head:
        slopes = 2.0**-h  # 1/2, 1/4, ... whatever the number of heads
    else:
        slopes = 2.0 ** (-8.0 * (h - 1 if first_slope_one else h) / num_heads)  # (H,)
    if reversed_slopes:
        slopes = slopes.flip(0)  # the shallowest head first
    start = 0 if queries_first else k_len - q_len
    q_pos = torch.arange(start, start + q_len, dtype=torch.float64)[:, None]  # (Tq, 1)
    k_pos = torch.arange(k_len, dtype=torch.float64)[None, :]  # (1, Tk)
    distance = q_pos - k_pos if signed else (q_pos - k_pos).abs()  # (Tq, Tk)
    bias = sign * slopes[None, :, None, None] * distance  # (1, H, Tq, Tk)
    if future_inf:
        bias = bias.masked_fill(k_pos > q_pos, float("-inf"))
    return bias


def check_alibi_bias(fn: Callable[[int, int, int], torch.Tensor]) -> None:
    """Check ``fn(num_heads, q_len, k_len)``: ALiBi's bias of shape ``(1, H, q_len, k_len)``.

    Head ``h = 1 .. H`` (``H`` a power of two) has slope ``m_h = 2^(-8h / H)``; the bias is
    ``-m_h * |i - j|`` for a query at position ``i`` and a key at position ``j``. The queries
    are the *last* ``q_len`` of the ``k_len`` positions (as when decoding with a cache), so
    query row 0 sits at position ``k_len - q_len``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    cases = [
        _Case("H=4, q_len=k_len=5", (4, 5, 5), hint="bias[0, h-1, i, j] = -m_h * |i - j|"),
        _Case(
            "H=8, q_len=3, k_len=7",
            (8, 3, 7),
            hint="the queries are the last q_len positions: row 0 is position k_len - q_len",
        ),
        _Case(
            "H=2, q_len=1, k_len=6", (2, 1, 6), hint="one query, the newest token, at position 5"
        ),
    ]
    mistakes = {
        "your slopes start at 1: the first head's slope is 2^(-8/H), not 2^0": (
            lambda h, q, k: _alibi(h, q, k, first_slope_one=True)
        ),
        "your queries sit at positions 0 .. q_len-1: they are the last q_len positions, "
        "k_len - q_len .. k_len - 1": lambda h, q, k: _alibi(h, q, k, queries_first=True),
        "your bias has the wrong sign: distant keys are penalised, -m * |i - j|": (
            lambda h, q, k: _alibi(h, q, k, sign=1.0)
        ),
        "your slopes are 2^-h whatever the number of heads: they are 2^(-8h/H), so that "
        "every model's slopes span 2^(-8/H) .. 2^-8": lambda h, q, k: _alibi(
            h, q, k, slope_per_head=False
        ),
        "your bias is -m_h * (i - j) without the absolute value: keys after the query then get a "
        "positive bias; ALiBi uses |i - j|": lambda h, q, k: _alibi(h, q, k, signed=True),
        "your slopes are in reverse order: head 1 has the steepest slope, 2^(-8/H), head H the "
        "shallowest, 2^-8": lambda h, q, k: _alibi(h, q, k, reversed_slopes=True),
        "you put -inf on the keys after the query: that is the causal mask's job (mask= or "
        "is_causal=); the bias is -m_h * |i - j| everywhere": lambda h, q, k: _alibi(
            h, q, k, future_inf=True
        ),
    }
    _check("check_alibi_bias", fn, cases, _alibi, mistakes=mistakes)
