"""Chapter 7, the Transformer block: self-checks for the feed-forward network, LayerNorm and
the two ways of wiring a block (Post-LN and Pre-LN).

Every case uses distinct sizes (batch != seq_len != d_model != d_ff), so a missing transpose
raises or fails. Besides comparing with a float64 reference, each checker recognises the
classic wrong answers (the activation in the wrong place, the unbiased variance, epsilon
outside the square root, Post-LN wired for Pre-LN, a missing residual) and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mtlib.exercises._core import _Case, _check

__all__ = ["check_feed_forward", "check_layer_norm", "check_post_ln_block", "check_pre_ln_block"]

Fn = Callable[..., Any]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------
# 1. The position-wise feed-forward network
# --------------------------------------------------------------------------------------------


def _ffn(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, *, act: str = "relu") -> Tensor:
    x, w1, b1, w2, b2 = (t.double() for t in (x, w1, b1, w2, b2))
    h = x @ w1 + b1  # (..., d_ff)
    if act == "relu":
        h = torch.relu(h)
    elif act == "gelu":
        h = F.gelu(h)
    elif act == "after":  # the activation after the second layer instead
        return torch.relu(h @ w2 + b2)
    elif act == "none":
        pass
    return h @ w2 + b2  # (..., d_model)


def check_feed_forward(fn: Fn) -> None:
    """Check ``fn(x, w1, b1, w2, b2)``: the position-wise ReLU network ``relu(x W1 + b1) W2 + b2``.

    Row-vector convention of the book: ``x`` is ``(..., d_model)``, ``w1`` is
    ``(d_model, d_ff)``, ``b1`` is ``(d_ff,)``, ``w2`` is ``(d_ff, d_model)``, ``b2`` is
    ``(d_model,)``; the result has the shape of ``x``. Cases: a batch of sequences, a single
    vector, and d_ff smaller than d_model. Recognised mistakes: no activation, ReLU after the
    second layer, GELU instead of ReLU.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """

    def case(seed: int, shape: tuple[int, ...], d: int, d_ff: int) -> tuple[Tensor, ...]:
        g = _gen(seed)
        x = torch.randn(*shape, d, generator=g)
        return (
            x,
            torch.randn(d, d_ff, generator=g) / d**0.5,
            torch.randn(d_ff, generator=g) * 0.5,
            torch.randn(d_ff, d, generator=g) / d_ff**0.5,
            torch.randn(d, generator=g) * 0.5,
        )

    hint = "x @ w1 + b1, then ReLU, then @ w2 + b2; w1 is already (d_model, d_ff): no transpose"
    cases = [
        _Case("batch 2, seq_len 3, d_model 4, d_ff 7", case(0, (2, 3), 4, 7), hint=hint),
        _Case("one vector, d_model 5, d_ff 9", case(1, (), 5, 9), hint=hint),
        _Case("batch 3, seq_len 2, d_model 6, d_ff 4 (d_ff < d_model)", case(2, (3, 2), 6, 4), hint=hint),
    ]
    mistakes = {
        "no activation: without the ReLU the two layers collapse into one linear map": (
            lambda *a: _ffn(*a, act="none")
        ),
        "the ReLU goes between the two layers (on the d_ff hidden units), not after the second "
        "layer: the output of a sublayer must be able to be negative": lambda *a: _ffn(*a, act="after"),
        "this is GELU; the exercise asks for the paper's ReLU, torch.relu": (
            lambda *a: _ffn(*a, act="gelu")
        ),
    }
    _check("check_feed_forward", fn, cases, _ffn, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 2. LayerNorm
# --------------------------------------------------------------------------------------------


def _layer_norm(
    x: Tensor, gamma: Tensor, beta: Tensor, eps: float, *, mistake: str = ""
) -> Tensor:
    x, gamma, beta = x.double(), gamma.double(), beta.double()
    dim = 0 if mistake == "dim" else -1
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, correction=1 if mistake == "unbiased" else 0)
    if mistake == "eps outside":
        normed = (x - mean) / (var.sqrt() + eps)
    elif mistake == "no eps":
        normed = (x - mean) / var.sqrt()
    else:
        normed = (x - mean) / (var + eps).sqrt()
    if mistake == "no affine":
        return normed
    return normed * gamma + beta


def check_layer_norm(fn: Fn) -> None:
    """Check ``fn(x, gamma, beta, eps)``: LayerNorm over the last dimension of ``x``.

    ``(x - mean) / sqrt(var + eps) * gamma + beta`` with the mean and the *biased* variance
    (divide by d) of each vector ``x[..., :]``; ``gamma`` and ``beta`` are ``(d,)``. Cases: a
    ``(2, 3, 5)`` batch, a vector with a large offset (one million + small noise,
    where ``E[x^2] - E[x]^2`` cancels catastrophically even in float64), and a nearly
    constant input where ``eps`` matters. Recognised mistakes: the unbiased variance
    (``torch.var``'s default), ``eps`` outside the square root, no ``eps``, no ``gamma``/``beta``,
    normalising over the batch dimension.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """

    def case(seed: int, shape: tuple[int, ...], scale: float, offset: float) -> tuple[Any, ...]:
        g = _gen(seed)
        x = offset + scale * torch.randn(*shape, generator=g, dtype=torch.float64)
        d = shape[-1]
        gamma = 1 + 0.5 * torch.randn(d, generator=g, dtype=torch.float64)
        return x, gamma, 0.3 * torch.randn(d, generator=g, dtype=torch.float64)

    cases = [
        _Case("x (2, 3, 5), eps 1e-5", (*case(0, (2, 3, 5), 1.0, 0.0), 1e-5)),
        _Case(
            "x (4, 6) = 1e6 + noise of std 0.1, eps 1e-5",
            (*case(1, (4, 6), 0.1, 1e6), 1e-5),
            hint="subtract the mean before squaring: E[x^2] - E[x]^2 cancels catastrophically at "
            "1e6 + small noise; and keep the input's float64 (no cast to float32)",
        ),
        _Case(
            "nearly constant x (3, 7) with std 0.01, eps 0.1",
            (*case(2, (3, 7), 0.01, 2.0), 0.1),
            hint="eps goes inside the square root: sqrt(var + eps)",
        ),
    ]
    mistakes = {
        "you used the unbiased variance (divide by d - 1, torch.var's default); LayerNorm "
        "divides by d: x.var(dim=-1, correction=0) or ((x - mean) ** 2).mean(-1)": (
            lambda *a: _layer_norm(*a, mistake="unbiased")
        ),
        "eps goes inside the square root: (x - mean) / sqrt(var + eps)": (
            lambda *a: _layer_norm(*a, mistake="eps outside")
        ),
        "you left out eps: with a nearly constant input sqrt(var) is tiny and the output explodes; "
        "divide by sqrt(var + eps)": lambda *a: _layer_norm(*a, mistake="no eps"),
        "you normalised but did not scale and shift: multiply by gamma, then add beta": (
            lambda *a: _layer_norm(*a, mistake="no affine")
        ),
        "you normalised over the batch (dim 0), as BatchNorm does; LayerNorm normalises each "
        "vector over its own features, dim=-1": lambda *a: _layer_norm(*a, mistake="dim"),
    }
    _check("check_layer_norm", fn, cases, _layer_norm, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# 3. Post-LN and Pre-LN blocks
# --------------------------------------------------------------------------------------------


def _block_case(seed: int, batch: int, seq_len: int, d: int) -> tuple[Any, ...]:
    """x and four sublayer functions: attention mixes positions (seq_len != d), ff does not."""
    g = _gen(seed)
    x = torch.randn(batch, seq_len, d, generator=g, dtype=torch.float64)
    w_attn = torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5
    w_ff = torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5
    gains = [1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64) for _ in range(2)]
    shifts = [0.2 * torch.randn(d, generator=g, dtype=torch.float64) for _ in range(2)]
    causal = torch.ones(seq_len, seq_len, dtype=torch.float64).tril()
    causal = causal / causal.sum(-1, keepdim=True)  # (T, T): average over positions <= t

    def attn(h: Tensor) -> Tensor:  # mixes positions: a causal average, then a linear map
        return (causal @ h) @ w_attn

    def ff(h: Tensor) -> Tensor:  # position-wise
        return torch.tanh(h @ w_ff)

    def norm(i: int) -> Callable[[Tensor], Tensor]:
        def apply(h: Tensor) -> Tensor:
            return F.layer_norm(h, (d,), gains[i], shifts[i])

        return apply

    return x, attn, ff, norm(0), norm(1)


def _block(x: Tensor, attn: Fn, ff: Fn, norm1: Fn, norm2: Fn, *, wiring: str) -> Tensor:
    if wiring == "post":
        x = norm1(x + attn(x))
        return norm2(x + ff(x))
    if wiring == "pre":
        x = x + attn(norm1(x))
        return x + ff(norm2(x))
    if wiring == "post no residual":
        return norm2(ff(norm1(attn(x))))
    if wiring == "pre no residual":
        return ff(norm2(attn(norm1(x))))
    if wiring == "pre norm after":  # x + norm(sublayer(x))
        x = x + norm1(attn(x))
        return x + norm2(ff(x))
    raise ValueError(wiring)


def _block_cases() -> list[_Case]:
    return [
        _Case("batch 2, seq_len 3, d_model 5", _block_case(0, 2, 3, 5)),
        _Case("batch 1, seq_len 6, d_model 4", _block_case(1, 1, 6, 4)),
        _Case("batch 3, seq_len 1, d_model 7", _block_case(2, 3, 1, 7)),
    ]


def check_post_ln_block(fn: Fn) -> None:
    """Check ``fn(x, attn, ff, norm1, norm2)``: a Post-LN block, as in the original paper.

    ``x`` is ``(B, T, d)``; ``attn``, ``ff``, ``norm1`` and ``norm2`` are functions
    ``(B, T, d) -> (B, T, d)`` (attention mixes positions). Post-LN: the norm comes after the
    residual sum, ``x = norm1(x + attn(x))``, then ``norm2(x + ff(x))``. Recognised mistakes:
    Pre-LN wiring, a missing residual, the two norms swapped.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    mistakes = {
        "this is the Pre-LN wiring (x + sublayer(norm(x))); Post-LN normalises AFTER the "
        "residual sum: norm(x + sublayer(x))": lambda *a: _block(*a, wiring="pre"),
        "there is no residual connection: add the sublayer's input to its output before the "
        "norm, norm(x + sublayer(x))": lambda *a: _block(*a, wiring="post no residual"),
        "norm1 belongs to the attention sublayer and norm2 to the feed-forward sublayer": (
            lambda x, at, ff, n1, n2: _block(x, at, ff, n2, n1, wiring="post")
        ),
    }
    reference = lambda *a: _block(*a, wiring="post")  # noqa: E731
    _check("check_post_ln_block", fn, _block_cases(), reference, mistakes=mistakes)


def check_pre_ln_block(fn: Fn) -> None:
    """Check ``fn(x, attn, ff, norm1, norm2)``: a Pre-LN block (GPT-2 and most models since).

    Same arguments as :func:`check_post_ln_block`. Pre-LN: each sublayer reads a normalised
    copy and its output is added to the unnormalised stream, ``x = x + attn(norm1(x))``, then
    ``x + ff(norm2(x))``. Recognised mistakes: Post-LN wiring, a missing residual, the norm
    applied to the sublayer's output (``x + norm(attn(x))``), the two norms swapped.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    mistakes = {
        "this is the Post-LN wiring (norm(x + sublayer(x))); Pre-LN normalises the sublayer's "
        "INPUT and adds to the raw stream: x + sublayer(norm(x))": lambda *a: _block(*a, wiring="post"),
        "there is no residual connection: the block must return x + sublayer(norm(x))": (
            lambda *a: _block(*a, wiring="pre no residual")
        ),
        "you normalised the sublayer's output (x + norm(sublayer(x))); Pre-LN normalises its "
        "input: x + sublayer(norm(x))": lambda *a: _block(*a, wiring="pre norm after"),
        "norm1 belongs to the attention sublayer and norm2 to the feed-forward sublayer": (
            lambda x, at, ff, n1, n2: _block(x, at, ff, n2, n1, wiring="pre")
        ),
    }
    reference = lambda *a: _block(*a, wiring="pre")  # noqa: E731
    _check("check_pre_ln_block", fn, _block_cases(), reference, mistakes=mistakes)
