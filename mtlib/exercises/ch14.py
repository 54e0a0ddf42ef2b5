"""Chapter 14, T5 and BART: self-checks for RMS norm, span corruption and text infilling.

- :func:`check_rms_norm`: T5's layer norm, ``weight * x / sqrt(mean(x**2) + eps)``
  (Zhang and Sennrich, 2019), safe in half precision: the mean square in float32, the result
  in ``x``'s dtype;
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

from mtlib.exercises._core import CheckFailed, _call, _Case, _describe, _fail

__all__ = ["check_rms_norm", "check_sentinel_spans", "check_text_infilling"]


# --------------------------------------------------------------------------------------------
# 1. RMS norm in half precision
# --------------------------------------------------------------------------------------------


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The exact answer, in float64 from the inputs as given (already rounded to their dtype)."""
    x = x.double()
    return weight.double() * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


#: Largest error accepted per input dtype: float32 to rounding; half precision to a few units
#: in the last place of outputs of size 1 to 3 (float16 2**-10, bfloat16 2**-7 relative).
_RMS_TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 6e-2}


def check_rms_norm(fn: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]) -> None:
    """Check ``fn(x, weight, eps)``: RMS norm over the last dimension, safe in half precision.

    ``x`` (..., d) is float32, float16 or bfloat16, ``weight`` the gain (d,) in the same dtype.
    The result has ``x``'s shape and dtype, but the mean square is computed in float32 (as T5's
    and Hugging Face's RMS norms do): in float16, ``x**2`` overflows (to inf) as soon as
    ``|x| > 255``, and the norm comes out as zeros. Recognised mistakes: the mean square in
    ``x``'s own dtype (or cast back to it before the root), the float32 result not cast back,
    a fixed ``.half()`` instead of ``x``'s dtype, LayerNorm's mean subtraction, eps outside the
    square root, no eps, eps added to the sum, the L2 norm, the gain forgotten, ``x.var``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_rms_norm"
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    g = torch.Generator().manual_seed(14)
    half_hint = ("float16's largest value is 65504, so 300**2 = 90000 is inf: where do you "
                 "square x, and in which dtype?")  # fmt: skip
    cases = [
        _Case("x (2, 3, 8) float32 with mean 1.5, a learned gain, eps 1e-6",
              (torch.randn(2, 3, 8, generator=g) * 2 + 1.5, torch.rand(8, generator=g) + 0.5, 1e-6),
              hint="over which dimension is the mean square taken, and how does the gain enter? "
                   "Compare with the formula of section 14.2"),
        _Case("tiny x (3, 6) float32, gain 2, eps 0.1 matters",
              (torch.randn(3, 6, generator=g) * 0.05, torch.full((6,), 2.0), 0.1),
              hint="eps matters here: it goes INSIDE the square root, sqrt(mean(x**2) + eps), "
                   "added once to the mean square"),
        _Case("x (4, 16) float16 with values of several hundred (their squares overflow float16), "
              "a learned gain, eps 1e-6",
              ((torch.randn(4, 16, generator=g) * 300).half(),
               (torch.rand(16, generator=g) + 0.5).half(), 1e-6), hint=half_hint),
        _Case("x (2, 5, 16) bfloat16 with values of several hundred, a learned gain, eps 1e-6",
              ((torch.randn(2, 5, 16, generator=g) * 300).bfloat16(),
               (torch.rand(16, generator=g) + 0.5).bfloat16(), 1e-6),
              hint="the result must be in x's dtype, computed with the mean square in float32"),
    ]  # fmt: skip

    def d(t: torch.Tensor) -> torch.Tensor:
        return t.double()

    def ms(x: torch.Tensor) -> torch.Tensor:
        return d(x).pow(2).mean(-1, keepdim=True)

    def half_square(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        mean_square = x.pow(2).mean(-1, keepdim=True)  # in x's dtype: inf in float16
        return d(w) * d(x) * torch.rsqrt(d(mean_square) + eps)

    def half_mean(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        mean_square = x.float().pow(2).mean(-1, keepdim=True).to(x.dtype)  # cast back too early
        return d(w) * d(x) * torch.rsqrt(d(mean_square) + eps)

    mistakes: list[tuple[str, Callable[..., torch.Tensor]]] = [
        ("the mean square must stay in float32 until the root is taken: " + half_hint, half_square),
        ("the mean square must stay in float32 until the root is taken: " + half_hint, half_mean),
        ("you subtracted the mean: that is LayerNorm. RMS norm only rescales (no centring, no bias)",
         lambda x, w, eps: d(w) * (d(x) - d(x).mean(-1, keepdim=True))
         / torch.sqrt((d(x) - d(x).mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True) + eps)),
        ("eps goes INSIDE the square root: sqrt(mean(x**2) + eps)",
         lambda x, w, eps: d(w) * d(x) / (ms(x).sqrt() + eps)),
        ("eps matters here: where is it in your formula? It goes inside the root, sqrt(mean(x**2) + eps)",
         lambda x, w, eps: d(w) * d(x) / ms(x).sqrt()),
        ("eps is added to the MEAN square, sqrt(mean(x**2) + eps); added to the sum, it is divided by d",
         lambda x, w, eps: d(w) * d(x) * x.shape[-1] ** 0.5 / torch.sqrt(d(x).pow(2).sum(-1, keepdim=True) + eps)),
        ("you divided by the L2 norm (a sum): RMS is the root of the MEAN square",
         lambda x, w, eps: d(w) * d(x) / torch.sqrt(d(x).pow(2).sum(-1, keepdim=True) + eps)),
        ("what happened to the gain `weight`?", lambda x, w, eps: _rms_norm(x, torch.ones_like(w), eps)),
        ("x.var subtracts the mean (and divides by d - 1): RMS norm needs mean(x**2), "
         "the mean square of x itself",
         lambda x, w, eps: d(w) * d(x) / torch.sqrt(d(x).var(-1, keepdim=True) + eps)),
    ]  # fmt: skip
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        x = case.args[0]
        expected = _rms_norm(*case.args)
        if not isinstance(got, torch.Tensor):
            raise _fail(checker, where, f"expected a torch.Tensor, got {_describe(got)}",
                        "return a tensor, not a list or array")  # fmt: skip
        if tuple(got.shape) != tuple(x.shape):
            raise _fail(checker, where, f"expected output shape {tuple(x.shape)}, got {tuple(got.shape)}",
                        "keep the dimension you average over (keepdim=True) so that x / rms broadcasts")  # fmt: skip
        if got.dtype != x.dtype:
            if got.dtype in (torch.float16, torch.bfloat16):
                hint = f"x is {x.dtype} here: cast back to x.dtype, not to a fixed .half() or .bfloat16()"
            elif got.is_floating_point():
                hint = ("the float32 (or float64) copy is only for computing: what dtype did x come "
                        "in? Cast the result back to it (.to(x.dtype))")  # fmt: skip
            else:
                hint = "RMS norm returns floating-point values"
            raise _fail(checker, where, f"expected dtype {x.dtype} (x's), got {got.dtype}", hint)
        tolerance = _RMS_TOLERANCE[x.dtype]
        value = got.detach().to(device="cpu", dtype=torch.float64)  # a GPU result is compared too
        if not torch.isfinite(value).all():
            bad = tuple((~torch.isfinite(value)).nonzero()[0].tolist())
            raise _fail(
                checker, where, f"output contains NaN or inf (first at index {bad})", case.hint
            )
        for hint, mistake in mistakes:
            wrong = mistake(*case.args)
            differs = not torch.allclose(wrong, expected, atol=tolerance, rtol=0, equal_nan=True)
            if differs and torch.allclose(value, wrong, atol=tolerance, rtol=0, equal_nan=True):
                raise _fail(checker, where, "your output equals a known mistake", hint)
        error = (value - expected).abs()
        if error.max() > tolerance:
            worst = tuple(torch.nonzero(error == error.max())[0].tolist())
            raise _fail(checker, where, f"values differ from the reference: largest error "
                        f"{error.max().item():.3g} at index {worst} (tolerance {tolerance:g})", case.hint)  # fmt: skip
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# Token-sequence checkers share this
# --------------------------------------------------------------------------------------------

_DEVICE_HINT = ("the inputs are CPU tensors: build any new tensor like them, e.g. "
                "tokens.new_tensor([...]), or work with Python lists (no device=device)")  # fmt: skip


def _call_on_cpu(checker: str, where: str, fn: Callable[..., Any], case: _Case) -> Any:
    """:func:`_call`, with a hint aimed at mixing the CPU inputs with tensors made on a GPU."""
    try:
        return _call(checker, where, fn, case)
    except AssertionError as error:
        if not any(k in str(error) for k in ("same device", "expected device", "device type")):
            raise
        raise CheckFailed(
            f"{str(error).split(chr(10) + 'Hint:')[0]}\nHint: {_DEVICE_HINT}"
        ) from None


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
    sentinel for every span, the sentinels counted from the end of the list, the last span never
    written out, targets without sentinels or with each sentinel after its span, noise tokens
    left in the input. The inputs are CPU tensors.

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
        got = _call_on_cpu(checker, where, fn, case)
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
        backwards = [_sentinel_spans(tokens, noise, sentinels[: len(spans)][::-1]),
                     _sentinel_spans(tokens, noise, sentinels[::-1])]  # fmt: skip
        last = (
            len(want_out) - 1 - (spans[-1][1] - spans[-1][0])
        )  # where the last span's sentinel is
        last_lost = targets == want_out[:last] and inputs in (want_in, want_in[:-1])
        after = [
            t for k, (start, end) in enumerate(spans) for t in (*tokens[start:end], sentinels[k])
        ]
        extra_end = targets[:-1] == want_out and inputs in (want_in, want_in + inputs[-1:])
        if inputs in (one_per_token, fresh_per_token):
            hint = (
                "one sentinel replaces a whole SPAN (a run of noise tokens), not each noise token"
            )
        elif len(spans) > 1 and (inputs, targets) == same:
            hint = "each span gets its OWN sentinel: the k-th span sentinel_ids[k], so the target can say which is which"
        elif len(spans) > 1 and (inputs, targets) in backwards:
            hint = (
                "the FIRST span gets sentinel_ids[0], the next sentinel_ids[1], ...: the ids count down "
                "in the vocabulary, but the list is already in order of use (no reversing)"
            )
        elif len(spans) > 1 and last_lost:
            hint = (
                "your target stops before the last span: it runs to the end of the tokens. Does your "
                "loop write out a span when the tokens end, not only when it meets a clean token?"
            )
        elif inputs == want_in and targets == after:
            hint = "which comes first in the target: a span's sentinel or the span's tokens?"
        elif extra_end:
            hint = "no </s> (or closing sentinel) here: the target ends with the last span's tokens"
        elif inputs == want_in and targets == [t for t, n in zip(tokens, noise, strict=True) if n]:
            hint = "the target lists each span AFTER its sentinel: [s0, span0..., s1, span1...]"
        elif inputs == tokens:
            hint = "the noise tokens must leave the input (replaced by the sentinels)"
        elif inputs == want_in:
            hint = "the input is right. What does the target hold for each span, and in what order?"
        else:
            hint = (
                "where do your inputs first differ from the expected ones: at a clean token, at a "
                "span's first token, or inside a span?"
            )
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
    one mask per hidden token (that is token masking), zero-length spans skipped or replacing a
    token, spans deleted without a mask (that is token deletion), slices assigned from the left
    (the later starts drift), a span at ``T`` lost. The inputs are CPU tensors.

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
        got = _call_on_cpu(checker, where, fn, case)
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
        drifting = list(tokens)  # slices assigned left to right: later starts have moved
        for s, n in spans:
            drifting[s : s + n] = [mask_id]
        zero_replaces = list(tokens)
        for s, n in reversed(spans):
            zero_replaces[s : s + max(n, 1)] = [mask_id]
        end_lost = _infill(tokens, [(s, n) for s, n in spans if s < len(tokens)], mask_id)
        if ids == per_token:
            hint = "one mask per SPAN, whatever its length (one mask per token is BERT's token masking)"
        elif ids == deleted:
            hint = "put a mask where each span was: without it this is token deletion"
        elif ids == end_lost:
            hint = "a span may start at T, after the last token: does your loop still look at position T?"
        elif ids == no_zero:
            hint = "a span of length 0 still inserts one mask (the model must learn that nothing is missing)"
        elif ids == after:
            hint = "a span of length 0 inserts its mask BEFORE tokens[start], not after it"
        elif ids == drifting:
            hint = (
                "once an earlier span has become one mask, the list is shorter: at which index does "
                "the next span start now? (edit from the right, or build a new list)"
            )
        elif ids == zero_replaces:
            hint = "a span of length 0 hides nothing: its mask goes before tokens[start], and tokens[start] stays"
        else:
            hint = (
                "where does your output first differ from the expected one, and which span (or the "
                "gap before it) does that position belong to?"
            )
        raise _fail(checker, where, f"expected {want}, got {ids}", hint)
    print(f"{checker}: all {len(cases)} cases passed.")
