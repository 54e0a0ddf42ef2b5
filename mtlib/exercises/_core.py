"""The machinery every checker shares: cases, comparison with a reference, clear failures.

A chapter's checkers live in ``chNN.py`` beside this file and build on :func:`_check`.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

_LIBRARIES = (str(Path(torch.__file__).parent), str(Path(__file__).parent))

__all__ = ["CheckFailed"]


class CheckFailed(AssertionError):
    """A self-check found a mistake. In Jupyter it shows only its message, not the checker's code."""

    def _render_traceback_(self) -> list[str]:  # IPython calls this instead of printing a traceback
        return [f"{type(self).__name__}: {self}"]


@dataclass
class _Case:
    """One input to a learner's function, with a short description and a hint on failure."""

    description: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    hint: str = ""


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r}"[:80]


def _fail(checker: str, where: str, what: str, hint: str = "") -> CheckFailed:
    message = f"{checker} failed on {where}: {what}"
    if hint:
        message += f"\nHint: {hint}"
    return CheckFailed(message)


def _learner_line(error: BaseException) -> str:
    """The line of the learner's own code where ``error`` was raised (no file paths), or ""."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames[1:]):  # frames[0] is the checker calling the learner's function
        if not frame.filename.startswith(_LIBRARIES) and frame.line:
            return f"\n  in your code, line {frame.lineno}: {frame.line.strip()}"
    return ""


def _compare(
    checker: str, where: str, got: Any, expected: torch.Tensor, hint: str, atol: float
) -> None:
    if not isinstance(got, torch.Tensor):
        raise _fail(
            checker,
            where,
            f"expected a torch.Tensor, got {_describe(got)}",
            "return a tensor, not a list or array",
        )
    if tuple(got.shape) != tuple(expected.shape):
        raise _fail(
            checker,
            where,
            f"expected output shape {tuple(expected.shape)}, got {tuple(got.shape)}",
            "compare the shapes: a dimension reduced over, missing, extra or in the wrong order",
        )
    if not got.is_floating_point():
        raise _fail(checker, where, f"expected a floating-point tensor, got dtype {got.dtype}")
    got = got.detach().to(device=expected.device, dtype=expected.dtype)  # a GPU result is compared too
    if not torch.isfinite(got).all():
        bad = (~torch.isfinite(got)).nonzero()[0].tolist()
        raise _fail(
            checker, where, f"output contains NaN or inf (first at index {tuple(bad)})", hint
        )
    error = (got - expected).abs()
    if error.max() > atol:
        worst = tuple(torch.nonzero(error == error.max())[0].tolist())
        raise _fail(
            checker,
            where,
            f"values differ from the reference: largest error {error.max().item():.3g} at index {worst} "
            f"(tolerance {atol:g})",
            hint,
        )


# a learner's tensor made on another device than the inputs (device=... on a GPU machine)
_DEVICE_WORDS = ("same device", "expected device", "device type", "on device")
_DEVICE_HINT = ("the inputs are CPU tensors: compute on their device (a new tensor takes "
                "device=x.device), not on the chapter's device")  # fmt: skip


def _call(checker: str, where: str, fn: Callable[..., Any], case: _Case) -> Any:
    """Call the learner's ``fn`` on copies of the case's inputs; a raise or an in-place edit of
    an input is reported in words (with the learner's line), never as a traceback."""
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
    kwargs = {k: a.clone() if isinstance(a, torch.Tensor) else a for k, a in case.kwargs.items()}
    try:
        got = fn(*args, **kwargs)
    except Exception as error:  # the learner's bug, reported in words rather than a traceback
        stub = isinstance(error, NotImplementedError)  # not written yet: no line, no hint
        what = f"your function raised {type(error).__name__}: {error}"
        hint = _DEVICE_HINT if any(w in str(error) for w in _DEVICE_WORDS) else case.hint
        raise _fail(checker, where, what + ("" if stub else _learner_line(error)), "" if stub else hint) from None
    inputs = [*zip(case.args, args, strict=True), *((case.kwargs[k], kwargs[k]) for k in kwargs)]
    for before, after in inputs:
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            raise _fail(checker, where, "your function changed its input tensor in place", "compute into a new tensor")
    return got


def _check(
    checker: str,
    fn: Callable[..., Any],
    cases: Sequence[_Case],
    reference: Callable[..., torch.Tensor],
    atol: float = 1e-5,
    mistakes: dict[str, Callable[..., torch.Tensor]] | Sequence[tuple[str, Callable[..., torch.Tensor]]] | None = None,
    dtype: torch.dtype | None = None,
) -> None:
    """Run ``fn`` on every case and compare with ``reference``; raise on the first failure.

    ``mistakes`` maps a hint to a function computing the output of a known mistake (or lists
    ``(hint, function)`` pairs, where several mistakes share a hint): when the
    learner's output equals it (and the mistake differs from the reference on that case), that
    hint is shown instead of the case's generic one. A mistake that raises on a case's shapes
    is skipped there. With ``dtype``, the output must have that dtype (a float64 contract).
    A result on a GPU is compared on the CPU; one on the ``meta`` device (no values) fails in
    words.
    """
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        got = _call(checker, where, fn, case)
        if isinstance(got, torch.Tensor) and got.is_meta:
            what = "your function returned a tensor on the meta device, which holds no values to compare"
            raise _fail(checker, where, what, _DEVICE_HINT)
        expected = reference(*case.args, **case.kwargs)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and got.is_floating_point():
            known = mistakes.items() if isinstance(mistakes, dict) else (mistakes or ())
            for hint, mistake in known:
                try:
                    wrong = mistake(*case.args, **case.kwargs)
                except RuntimeError:  # the mistake cannot even run on this case's shapes
                    continue
                differs = not torch.allclose(wrong, expected, atol=atol, rtol=0, equal_nan=True)
                if differs and torch.allclose(got.detach().to(wrong.device).double(), wrong, atol=atol, rtol=0, equal_nan=True):
                    raise _fail(checker, where, "your output equals a known mistake", hint)
        if dtype is not None and isinstance(got, torch.Tensor) and got.dtype != dtype:
            raise _fail(
                checker,
                where,
                f"expected dtype {dtype}, got {got.dtype}",
                f"the contract is {dtype}: torch.zeros and torch.empty make float32 tensors "
                "unless given a dtype",
            )
        _compare(checker, where, got, expected, case.hint, atol)
    print(f"{checker}: all {len(cases)} cases passed.")
