"""Chapter 14, T5 and BART: self-checks for RMS norm, span corruption and text infilling.

- :func:`check_rms_norm`: T5's layer norm, ``weight * x / sqrt(mean(x**2) + eps)``
  (Zhang and Sennrich, 2019): no mean subtraction, no bias;
- :func:`check_sentinel_spans`: T5's span corruption for a GIVEN noise mask: one sentinel per
  span in the input, and the target lists each span after its sentinel;
- :func:`check_text_infilling`: BART's text infilling for GIVEN spans: each span, even one of
  length 0, becomes ONE mask token.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = ["check_rms_norm", "check_sentinel_spans", "check_text_infilling"]


# --------------------------------------------------------------------------------------------
# 1. RMS norm
# --------------------------------------------------------------------------------------------


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    return weight.double() * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def check_rms_norm(fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]) -> None:
    """Check ``fn(x, weight, eps)``: RMS layer norm over the last dimension of ``x`` (..., d).

    ``weight`` is the gain (d,). Recognised mistakes: LayerNorm's mean subtraction, eps outside
    the square root, the L2 norm instead of the root MEAN square, the gain forgotten, the
    variance (``x.var``) instead of the mean square.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(14)
    cases = [
        _Case("x (2, 3, 5) with mean 1, gain 1, eps 1e-6",
              (torch.randn(2, 3, 5, generator=g, dtype=torch.float64) + 1.0,
               torch.ones(5, dtype=torch.float64), 1e-6),
              hint="divide by sqrt(mean(x**2) + eps) over the last dimension"),
        _Case("x (4, 7), a learned gain, eps 1e-6",
              (torch.randn(4, 7, generator=g, dtype=torch.float64) * 3 - 2,
               torch.rand(7, generator=g, dtype=torch.float64) + 0.5, 1e-6)),
        _Case("tiny x (3, 6), eps 0.1 matters",
              (torch.randn(3, 6, generator=g, dtype=torch.float64) * 0.05,
               torch.ones(6, dtype=torch.float64) * 2, 0.1)),
    ]  # fmt: skip

    def layer_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        centred = x.double() - x.double().mean(-1, keepdim=True)
        return w.double() * centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps)

    def eps_outside(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return (
            w.double() * x.double() / (torch.sqrt(x.double().pow(2).mean(-1, keepdim=True)) + eps)
        )

    def l2_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return w.double() * x.double() / torch.sqrt(x.double().pow(2).sum(-1, keepdim=True) + eps)

    def no_gain(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return _rms_norm(x, torch.ones_like(w), eps)

    def variance(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return w.double() * x.double() / torch.sqrt(x.double().var(-1, keepdim=True) + eps)

    mistakes = {
        "you subtracted the mean: that is LayerNorm. RMS norm only rescales (no centring, no bias)": layer_norm,
        "eps goes INSIDE the square root: sqrt(mean(x**2) + eps)": eps_outside,
        "you divided by the L2 norm (a sum): RMS is the root of the MEAN square": l2_norm,
        "multiply by the gain `weight` at the end": no_gain,
        "x.var subtracts the mean (and divides by d - 1): RMS norm needs mean(x**2), "
        "the mean square of x itself": variance,
    }
    _check("check_rms_norm", fn, cases, _rms_norm, atol=1e-5, mistakes=mistakes)


# --------------------------------------------------------------------------------------------
# Token-sequence checkers share this
# --------------------------------------------------------------------------------------------


def _as_ids(checker: str, where: str, got: Any, what: str) -> list[int]:
    if isinstance(got, torch.Tensor):
        if got.dim() != 1 or got.dtype.is_floating_point or got.dtype == torch.bool:
            raise _fail(
                checker, where, f"{what} must be a 1-D integer tensor, got {_describe(got)}"
            )
        return [int(t) for t in got.tolist()]
    if isinstance(got, (list, tuple)) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in got
    ):
        return list(got)
    raise _fail(
        checker,
        where,
        f"{what} must be a 1-D integer tensor or a list of ints, got {_describe(got)}",
    )


# --------------------------------------------------------------------------------------------
# 2. Span corruption for a given noise mask
# --------------------------------------------------------------------------------------------


def _spans(noise: Sequence[bool]) -> list[tuple[int, int]]:
    """(start, end) of each run of True."""
    out, start = [], None
    for i, flag in enumerate([*noise, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            out.append((start, i))
            start = None
    return out


def _sentinel_spans(
    tokens: list[int], noise: list[bool], sentinels: list[int]
) -> tuple[list[int], list[int]]:
    inputs, targets = [], []
    spans = _spans(noise)
    span_at = {s: (k, e) for k, (s, e) in enumerate(spans)}
    i = 0
    while i < len(tokens):
        if i in span_at:
            k, end = span_at[i]
            inputs.append(sentinels[k])
            targets += [sentinels[k], *tokens[i:end]]
            i = end
        else:
            inputs.append(tokens[i])
            i += 1
    return inputs, targets


def check_sentinel_spans(
    fn: Callable[[torch.Tensor, torch.Tensor, list[int]], tuple[Any, Any]],
) -> None:
    """Check ``fn(tokens, noise, sentinel_ids) -> (inputs, targets)``: T5's span corruption.

    ``tokens`` (T,) long, ``noise`` (T,) bool (True = corrupted; consecutive True tokens form one
    span), ``sentinel_ids`` a list of ids. The input keeps the clean tokens and replaces each
    SPAN by one sentinel, the k-th span by ``sentinel_ids[k]``; the target is each span's
    sentinel followed by its tokens. Recognised mistakes: one sentinel per noise token, the same
    sentinel for every span, targets without sentinels, noise tokens left in the input.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_sentinel_spans"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    t, f = True, False
    cases = [
        _Case("10 tokens, 2 spans of 2 and 1", (torch.arange(20, 30), torch.tensor([f, f, t, t, f, f, f, t, f, f]),
                                                [99, 98, 97])),
        _Case("9 tokens, a span at the start and one at the end",
              (torch.tensor([5, 6, 7, 8, 9, 10, 11, 12, 13]), torch.tensor([t, t, t, f, f, f, f, t, t]), [50, 49])),
        _Case("6 tokens, 3 spans of 1", (torch.tensor([4, 4, 5, 5, 6, 6]), torch.tensor([t, f, t, f, f, t]),
                                         [90, 91, 92, 93])),
    ]  # fmt: skip
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        if not isinstance(got, tuple) or len(got) != 2:
            raise _fail(checker, where, f"expected a pair (inputs, targets), got {_describe(got)}")
        tokens, noise, sentinels = case.args[0].tolist(), case.args[1].tolist(), case.args[2]
        inputs, targets = (
            _as_ids(checker, where, g, w) for g, w in zip(got, ("inputs", "targets"), strict=True)
        )
        want_in, want_out = _sentinel_spans(tokens, noise, sentinels)
        if inputs == want_in and targets == want_out:
            continue
        spans = _spans(noise)
        span_of = [sum(1 for start, _ in spans if start <= i) - 1 for i in range(len(tokens))]
        one_per_token = [
            sentinels[span_of[i]] if n else tok
            for i, (tok, n) in enumerate(zip(tokens, noise, strict=True))
        ]
        counter = iter(sentinels * len(tokens))
        fresh_per_token = [
            next(counter) if n else tok for tok, n in zip(tokens, noise, strict=True)
        ]
        same = _sentinel_spans(tokens, noise, [sentinels[0]] * len(spans))
        backwards = _sentinel_spans(tokens, noise, sentinels[: len(spans)][::-1])
        extra_end = targets[:-1] == want_out and inputs in (want_in, want_in + inputs[-1:])
        if inputs in (one_per_token, fresh_per_token):
            hint = (
                "one sentinel replaces a whole SPAN (a run of noise tokens), not each noise token"
            )
        elif len(spans) > 1 and (inputs, targets) == same:
            hint = "each span gets its OWN sentinel: the k-th span sentinel_ids[k], so the target can say which is which"
        elif len(spans) > 1 and (inputs, targets) == backwards:
            hint = "the FIRST span gets sentinel_ids[0], the next sentinel_ids[1], ... (the list is already in order of use)"
        elif extra_end:
            hint = "no </s> (or closing sentinel) here: the target ends with the last span's tokens"
        elif inputs == want_in and targets == [t for t, n in zip(tokens, noise, strict=True) if n]:
            hint = "the target lists each span AFTER its sentinel: [s0, span0..., s1, span1...]"
        elif inputs == tokens:
            hint = "the noise tokens must leave the input (replaced by the sentinels)"
        elif inputs == want_in:
            hint = "the input is right; the target is each sentinel followed by its span's tokens"
        else:
            hint = "walk the tokens: a clean token is copied; at a span's first token write its sentinel and skip the span"
        raise _fail(checker, where, f"expected inputs {want_in} and targets {want_out}, got {inputs} and {targets}",
                    hint)  # fmt: skip
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 3. Text infilling for given spans
# --------------------------------------------------------------------------------------------


def _infill(tokens: list[int], spans: list[tuple[int, int]], mask_id: int) -> list[int]:
    starts = dict(spans)
    out, i = [], 0
    while i <= len(tokens):
        if i in starts:  # one mask for the span, then skip its tokens (none for length 0)
            out.append(mask_id)
            i += starts.pop(i)
        if i < len(tokens):
            out.append(tokens[i])
        i += 1
    return out


def check_text_infilling(fn: Callable[[torch.Tensor, list[tuple[int, int]], int], Any]) -> None:
    """Check ``fn(tokens, spans, mask_id)``: BART's text infilling for given spans.

    ``tokens`` (T,) long; ``spans`` a list of ``(start, length)`` pairs, sorted, not touching,
    ``length`` possibly 0 (a mask inserted BEFORE ``tokens[start]``, hiding nothing; ``start``
    may be T: after the last token). Each span becomes ONE ``mask_id``. Recognised mistakes:
    one mask per hidden token (that is token masking), zero-length spans skipped, spans deleted
    without a mask (that is token deletion).

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_text_infilling"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    cases = [
        _Case("8 tokens, spans of 3 and 1", (torch.arange(10, 18), [(1, 3), (6, 1)], 3)),
        _Case(
            "7 tokens, a zero-length span and one of 2", (torch.arange(40, 47), [(2, 0), (4, 2)], 5)
        ),
        _Case(
            "5 tokens, spans of 0 at the very end and 2 at the start",
            (torch.arange(7, 12), [(0, 2), (5, 0)], 1),
        ),
    ]
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        tokens, spans, mask_id = case.args[0].tolist(), case.args[1], case.args[2]
        ids = _as_ids(checker, where, got, "the result")
        want = _infill(tokens, spans, mask_id)
        if ids == want:
            continue
        per_token = list(tokens)
        for s, n in spans:
            per_token[s : s + n] = [mask_id] * n
        deleted = [t for i, t in enumerate(tokens) if not any(s <= i < s + n for s, n in spans)]
        no_zero = _infill(tokens, [(s, n) for s, n in spans if n > 0], mask_id)
        after = _infill(tokens, [(s + 1 if n == 0 else s, n) for s, n in spans], mask_id)
        if ids == per_token:
            hint = "one mask per SPAN, whatever its length (one mask per token is BERT's token masking)"
        elif ids == deleted:
            hint = "put a mask where each span was: without it this is token deletion"
        elif ids == no_zero:
            hint = "a span of length 0 still inserts one mask (the model must learn that nothing is missing)"
        elif ids == after:
            hint = "a span of length 0 inserts its mask BEFORE tokens[start], not after it"
        else:
            hint = "copy the tokens in order; at each span's start write one mask and skip `length` tokens"
        raise _fail(checker, where, f"expected {want}, got {ids}", hint)
    print(f"{checker}: all {len(cases)} cases passed.")
