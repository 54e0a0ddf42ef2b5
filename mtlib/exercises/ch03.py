"""Chapter 3, scaled dot-product attention: the function, a self-attention layer, entropy.

Besides comparing with a reference, these checkers recognise the classic mistakes (a missing
``1/sqrt(d_k)``, a softmax over the queries, a mask used with the wrong sign, ``d_model`` in
place of ``d_k``, ``log2`` in place of ``ln``) and name them in the hint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from mtlib.exercises._core import _Case, _check, _fail

__all__ = ["check_attention_entropy", "check_scaled_dot_product_attention", "check_self_attention_layer"]

Reference = Callable[..., torch.Tensor]


# --------------------------------------------------------------------------------------------
# 1. softmax(q k^T / sqrt(d_k)) v
# --------------------------------------------------------------------------------------------


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    axis: int = -1,
    flip_mask: bool = False,
) -> torch.Tensor:
    """The reference (in float64), and, with the keyword arguments, the classic mistakes."""
    q, k, v = q.double(), k.double(), v.double()
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(mask if flip_mask else ~mask, float("-inf"))
    return scores.softmax(dim=axis) @ v  # (..., Tq, d_v)


def _sdpa_mistakes() -> dict[str, Reference]:
    return {
        "your output is attention WITHOUT the scale: divide the scores q @ k^T by sqrt(d_k)": lambda q, k, v, mask=None: (
            _attention(q, k, v, mask, scale=1.0)
        ),
        "you divided by d_k: the scale is 1 / sqrt(d_k), not 1 / d_k": lambda q, k, v, mask=None: (
            _attention(q, k, v, mask, scale=1.0 / q.shape[-1])
        ),
        "your softmax normalises over the queries: each query's weights over the keys (the last axis "
        "of the scores) must sum to 1": lambda q, k, v, mask=None: _attention(q, k, v, mask, axis=-2),
        "you divided by sqrt(d_v), the width of the values: d_k is the width of q and k, q.shape[-1]": (
            lambda q, k, v, mask=None: _attention(q, k, v, mask, scale=v.shape[-1] ** -0.5)
        ),
        "your mask has the wrong sign: True means 'may attend', so fill the scores where the mask is "
        "False with -inf": lambda q, k, v, mask=None: (
            _attention(q, k, v, mask, flip_mask=True) if mask is not None else _attention(q, k, v)
        ),
        "you zeroed the masked weights AFTER the softmax, so the rows no longer sum to 1: fill the "
        "masked scores with -inf BEFORE the softmax": lambda q, k, v, mask=None: (
            _masked_after_softmax(q, k, v, mask) if mask is not None else _attention(q, k, v)
        ),
    }


def _masked_after_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mistake of multiplying the weights by the mask without renormalising."""
    q, k, v = q.double(), k.double(), v.double()
    weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)  # (..., Tq, Tk)
    return (weights * mask) @ v  # (..., Tq, d_v)


def _large_scores(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (4, 16), k (3, 16), v (3, 5): each query scores its own key at about 400 after the scale."""
    k = torch.randn(3, 16, generator=g)
    q = 100 * k[[0, 1, 2, 0]] + torch.randn(4, 16, generator=g)  # a naive exp(score) overflows
    return q, k, torch.randn(3, 5, generator=g)


def check_scaled_dot_product_attention(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(q, k, v, mask=None)``: ``softmax(q k^T / sqrt(d_k)) v``, with an optional mask.

    ``q`` is ``(..., Tq, d_k)``, ``k`` is ``(..., Tk, d_k)``, ``v`` is ``(..., Tk, d_v)`` and the
    result is ``(..., Tq, d_v)``. ``mask`` is a bool tensor broadcastable to ``(..., Tq, Tk)``,
    True = may attend. Cases have ``Tq != Tk`` and ``d_v != d_k`` (a missing transpose fails),
    batch and head dimensions, masks of shape ``(Tq, Tk)`` and ``(B, 1, Tk)``, and scores in the
    hundreds (a softmax written as ``exp(s) / exp(s).sum()`` overflows there). In every case
    each query may attend to at least one key: rows with nothing to attend to are chapter 5's
    subject (``mtlib`` returns zeros for them).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(3)
    mask_2d = torch.tensor(
        [[True, False, True, True, False], [False, False, True, False, False], [True, True, True, True, False]]
    )  # (Tq=3, Tk=5): every row keeps a key and loses one
    padding = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, :]  # (B=2, 1, Tk=6)
    transpose_hint = (
        "the scores are q @ k.transpose(-2, -1) / sqrt(d_k), of shape (..., q_len, k_len), with d_k = q.shape[-1]; "
        "softmax over the last axis (the keys), then @ v"
    )
    cases = [
        _Case(
            "one sequence: q (3, 4), k (5, 4), v (5, 2)",
            (torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, 2, generator=g)),
            hint=transpose_hint,
        ),
        _Case(
            "a batch: q (2, 3, 4), k (2, 6, 4), v (2, 6, 7)",
            (torch.randn(2, 3, 4, generator=g), torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 7, generator=g)),
            hint="use k.transpose(-2, -1) (not k.T) so that batch dimensions stay in front",
        ),
        _Case(
            "d_k=16 with scores in the hundreds: q (4, 16), k (3, 16), v (3, 5)",
            _large_scores(g),
            hint="exp() of a score above about 88 overflows float32 to inf, and inf / inf is NaN: take the softmax "
            "with torch.softmax (or subtract each row's maximum score before exp)",
        ),
        _Case(
            "mask (3, 5), True = may attend",
            (torch.randn(3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, 2, generator=g)),
            {"mask": mask_2d},
            hint="fill the scores where the mask is False with float('-inf') before the softmax",
        ),
        _Case(
            "batch with a padding mask of shape (2, 1, 6)",
            (torch.randn(2, 3, 4, generator=g), torch.randn(2, 6, 4, generator=g), torch.randn(2, 6, 7, generator=g)),
            {"mask": padding},
            hint="the mask broadcasts against the scores (B, Tq, Tk); padded keys get zero weight",
        ),
        _Case(
            "heads: q (2, 3, 4, 8), k (2, 3, 5, 8), v (2, 3, 5, 6) and a (4, 5) mask",
            (
                torch.randn(2, 3, 4, 8, generator=g),
                torch.randn(2, 3, 5, 8, generator=g),
                torch.randn(2, 3, 5, 6, generator=g),
            ),
            {"mask": (torch.rand(4, 5, generator=g) > 0.4) | torch.eye(4, 5, dtype=torch.bool)},
            hint=transpose_hint,
        ),
    ]
    _check("check_scaled_dot_product_attention", fn, cases, _attention, mistakes=_sdpa_mistakes())


# --------------------------------------------------------------------------------------------
# 2. A single-head self-attention layer from X
# --------------------------------------------------------------------------------------------


def _layer(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor,
    *,
    scale: float | None = None,
    output: bool = True,
) -> torch.Tensor:
    x, w_q, w_k, w_v, w_o = (t.double() for t in (x, w_q, w_k, w_v, w_o))
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
    scale = w_q.shape[1] ** -0.5 if scale is None else scale
    out = (q @ k.transpose(-2, -1) * scale).softmax(dim=-1) @ v  # (..., T, d_v)
    return out @ w_o if output else out  # (..., T, d_model)


def check_self_attention_layer(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, w_q, w_k, w_v, w_o)``: single-head self-attention with its four projections.

    Row-vector convention of the book: ``Q = X W^Q``, ``K = X W^K``, ``V = X W^V`` and the output
    is ``softmax(Q K^T / sqrt(d_k)) V W^O``. Shapes: ``x`` ``(..., T, d_model)``, ``w_q`` and
    ``w_k`` ``(d_model, d_k)``, ``w_v`` ``(d_model, d_v)``, ``w_o`` ``(d_v, d_model)``; the result
    is ``(..., T, d_model)``. All four sizes differ, so a transposed weight fails.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(4)

    def weights(d_model: int, d_k: int, d_v: int) -> tuple[torch.Tensor, ...]:
        shapes = ((d_model, d_k), (d_model, d_k), (d_model, d_v), (d_v, d_model))
        return tuple(torch.randn(*s, generator=g) / math.sqrt(s[0]) for s in shapes)

    hint = "Q = x @ w_q (weights are (d_in, d_out), rows are tokens); output = softmax(Q K^T / sqrt(d_k)) V @ w_o"
    cases = [
        _Case("T=5 tokens, d_model=6, d_k=4, d_v=3", (2 * torch.randn(5, 6, generator=g), *weights(6, 4, 3)), hint=hint),
        _Case("a batch of 2, T=7, d_model=10, d_k=9, d_v=5", (2 * torch.randn(2, 7, 10, generator=g), *weights(10, 9, 5)), hint=hint),
        _Case("one token (T=1): it can only attend to itself", (torch.randn(1, 6, generator=g), *weights(6, 4, 3)), hint=hint),
    ]
    mistakes: dict[str, Reference] = {
        "you scaled by sqrt(d_model); the scale is 1 / sqrt(d_k), d_k = w_q.shape[1]": lambda x, *w: _layer(
            x, *w, scale=x.shape[-1] ** -0.5
        ),
        "your output is attention WITHOUT the scale: divide the scores by sqrt(d_k)": lambda x, *w: _layer(x, *w, scale=1.0),
        "you scaled by sqrt(d_v), the width of the values; the scale is 1 / sqrt(d_k), d_k = w_q.shape[1]": (
            lambda x, *w: _layer(x, *w, scale=w[2].shape[1] ** -0.5)
        ),
    }

    def reference(x: torch.Tensor, *w: torch.Tensor) -> torch.Tensor:
        return _layer(x, *w)

    _check_output_width("check_self_attention_layer", fn, cases, reference)
    _check("check_self_attention_layer", fn, cases, reference, mistakes=mistakes)


def _check_output_width(checker: str, fn: Callable[..., Any], cases: Sequence[_Case], reference: Reference) -> None:
    """Name the forgotten output projection before the generic shape message."""
    for number, case in enumerate(cases, start=1):
        try:
            got = fn(*(a.clone() for a in case.args))
        except Exception:  # reported, with the case, by _check
            return
        expected = reference(*case.args)
        no_out = _layer(*case.args, output=False)
        if isinstance(got, torch.Tensor) and got.shape == no_out.shape and got.shape != expected.shape:
            where = f"case {number} of {len(cases)} ({case.description})"
            what = f"expected output shape {tuple(expected.shape)}, got {tuple(got.shape)}"
            raise _fail(checker, where, what, "the layer ends with the output projection: multiply by w_o")


# --------------------------------------------------------------------------------------------
# 3. Entropy of attention weights
# --------------------------------------------------------------------------------------------


def _entropy(weights: torch.Tensor, base: float = math.e, sign: float = 1.0) -> torch.Tensor:
    w = weights.double()
    return -sign * torch.xlogy(w, w).sum(dim=-1) / math.log(base)  # (...,)


def check_attention_entropy(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(weights)``: the entropy in nats of each row of attention weights.

    ``weights`` has shape ``(..., Tq, Tk)`` with rows summing to 1; the result has shape
    ``(..., Tq)`` with ``H = -sum_j w_j ln w_j``, taking ``0 ln 0 = 0`` (masked keys have weight
    exactly zero). A uniform row over ``n`` keys has entropy ``ln n``; a one-hot row has 0.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(5)
    cases = [
        _Case("2 uniform rows over 4 keys: ln 4 each", (torch.full((2, 4), 0.25),), hint="H = -sum_j w_j ln w_j over the keys"),
        _Case(
            "a batch of weights (2, 3, 5)",
            (torch.randn(2, 3, 5, generator=g).softmax(-1),),
            hint="sum over the keys, the last axis: one entropy per query",
        ),
        _Case(
            "rows with masked keys (weight exactly 0)",
            (torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.2, 0.3, 0.5]]),),
            hint="0 * log(0) is NaN in floating point; the limit is 0: use torch.xlogy(w, w) or mask the zeros",
        ),
    ]
    mistakes: dict[str, Reference] = {
        "you used log base 2 (bits); the book measures entropy in nats, with the natural log": lambda w: _entropy(w, base=2.0),
        "your entropy is negative: H = -sum_j w_j ln w_j": lambda w: _entropy(w, sign=-1.0),
    }
    _check("check_attention_entropy", fn, cases, _entropy, mistakes=mistakes)
