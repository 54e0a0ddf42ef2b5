"""Self-check functions for the exercises.

Each checker takes *your* function, runs it on several small cases and compares the result
with a reference. When a case fails it raises ``CheckFailed`` (an ``AssertionError``) with a diagnostic that says
which case failed and how (wrong type, wrong shape, NaN, wrong values and where), plus a hint;
it never prints the solution. When every case passes it prints one line saying so.

Example:
    >>> from mtlib import exercises
    >>> def my_softmax(x, temperature=1.0):
    ...     ...  # your code
    >>> exercises.check_softmax(my_softmax)
    check_softmax: all 5 cases passed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["CheckFailed", "check_laplace_regression", "check_soft_lookup", "check_softmax"]


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
            "check which dimension you reduce over",
        )
    if not got.is_floating_point():
        raise _fail(checker, where, f"expected a floating-point tensor, got dtype {got.dtype}")
    got = got.detach().to(expected.dtype)
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


def _check(
    checker: str,
    fn: Callable[..., Any],
    cases: Sequence[_Case],
    reference: Callable[..., torch.Tensor],
    atol: float = 1e-5,
) -> None:
    """Run ``fn`` on every case and compare with ``reference``; raise on the first failure."""
    if not callable(fn):
        raise TypeError(f"{checker} takes your function, got {_describe(fn)}")
    for number, case in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({case.description})"
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
        try:
            got = fn(*args, **case.kwargs)
        except Exception as error:  # the learner's bug, reported in words rather than a traceback
            raise _fail(
                checker, where, f"your function raised {type(error).__name__}: {error}"
            ) from None
        for before, after in zip(case.args, args, strict=True):
            if isinstance(before, torch.Tensor) and not torch.equal(before, after):
                raise _fail(
                    checker,
                    where,
                    "your function changed its input tensor in place",
                    "compute into a new tensor",
                )
        _compare(checker, where, got, reference(*case.args, **case.kwargs), case.hint, atol)
    print(f"{checker}: all {len(cases)} cases passed.")


# ---------------------------------------------------------------------------------------------
# Chapter 1: why attention
# ---------------------------------------------------------------------------------------------


def _softmax_reference(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return torch.softmax(x.double() / temperature, dim=-1)


def check_softmax(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, temperature=1.0)``: softmax over the last dimension of ``x / temperature``.

    Cases include a batch of rows, a low and a high temperature, and scores around 1000 that
    overflow a naive implementation.

    Args:
        fn: your function; ``x`` has shape (..., n) and the result has the same shape.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(0)
    cases = [
        _Case("one row of 4 scores", (torch.tensor([1.0, 2.0, 3.0, 4.0]),)),
        _Case(
            "3 rows of 5 scores, softmax over the last dimension",
            (torch.randn(3, 5, generator=g),),
            hint="each row must sum to 1",
        ),
        _Case(
            "temperature=0.5 sharpens",
            (torch.randn(2, 6, generator=g),),
            {"temperature": 0.5},
            "divide the scores by the temperature",
        ),
        _Case(
            "temperature=10 flattens",
            (torch.randn(4, 3, generator=g),),
            {"temperature": 10.0},
            "divide the scores by the temperature",
        ),
        _Case(
            "large scores around 1000",
            (torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]]),),
            hint="exp(1000) overflows: subtract each row's maximum first (softmax does not change)",
        ),
    ]
    _check("check_softmax", fn, cases, _softmax_reference)


def _soft_lookup_reference(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    weights = torch.softmax(queries.double() @ keys.double().T, dim=-1)  # (m, n)
    return weights @ values.double()  # (m, d_v)


def check_soft_lookup(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(queries, keys, values)``: soft dictionary lookups for a batch of queries.

    ``queries`` (m, d), ``keys`` (n, d), ``values`` (n, d_v) -> (m, d_v): row i is the values
    averaged with weights ``softmax(keys @ queries[i])``. No Python loop is needed.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(1)
    one_hot = torch.tensor([[0.0, 8.0, 0.0]])  # (1, 3): matches key 1 of 3 one-hot keys
    cases = [
        _Case(
            "m=1 query equal to key 1 of 3 one-hot keys",
            (one_hot, 4 * torch.eye(3), torch.tensor([[1.0], [2.0], [3.0]])),
            hint="normalise over the keys: each query's n weights must sum to 1",
        ),
        _Case(
            "m=3 queries, n=5 keys of width d=4, values of width d_v=2",
            (
                torch.randn(3, 4, generator=g),
                torch.randn(5, 4, generator=g),
                torch.randn(5, 2, generator=g),
            ),
            hint="the scores form an (m, n) matrix: one row per query, one column per key",
        ),
        _Case(
            "m=2 queries, n=7 keys of width d=3, values of width d_v=6",
            (
                torch.randn(2, 3, generator=g),
                torch.randn(7, 3, generator=g),
                torch.randn(7, 6, generator=g),
            ),
            hint="normalise over the keys (the last dimension of the scores), not over the queries",
        ),
        _Case(
            "zero queries weight every key equally",
            (torch.zeros(4, 2), torch.randn(5, 2, generator=g), torch.randn(5, 3, generator=g)),
        ),
    ]
    _check("check_soft_lookup", fn, cases, _soft_lookup_reference)


def _laplace_regression_reference(
    x_query: torch.Tensor, x_train: torch.Tensor, y_train: torch.Tensor, bandwidth: float
) -> torch.Tensor:
    distance = (x_query.double()[:, None] - x_train.double()[None, :]).abs()  # (m, n)
    weights = torch.softmax(-distance / bandwidth, dim=-1)  # (m, n)
    return weights @ y_train.double()  # (m,)


def check_laplace_regression(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x_query, x_train, y_train, bandwidth)``: Nadaraya-Watson, Laplace kernel.

    ``x_query`` (m,), ``x_train`` (n,), ``y_train`` (n,) -> (m,), where each prediction is the
    average of ``y_train`` weighted by ``K(x_query - x_train) = exp(-|x_query - x_train| / h)``
    with ``h = bandwidth``, normalised to sum to 1 for each query.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(2)
    x_train = torch.sort(torch.rand(9, generator=g) * 5).values
    y_train = torch.sin(x_train)
    cases = [
        _Case(
            "m=4 queries, n=9 training points, bandwidth=0.5",
            (torch.linspace(0, 5, 4), x_train, y_train, 0.5),
            hint="one weight per (query, training point) pair; the Laplace kernel uses |u|, not u**2",
        ),
        _Case(
            "a wide bandwidth=50 predicts nearly the mean",
            (torch.tensor([0.0, 2.5]), x_train, y_train, 50.0),
            hint="normalise the weights of each query to sum to 1",
        ),
        _Case(
            "a narrow bandwidth=0.01 at the training points",
            (x_train[:3], x_train, y_train, 0.01),
            hint="at a training point, almost all the weight belongs to that point",
        ),
        _Case(
            "m=1 query far from the data",
            (torch.tensor([900.0]), x_train, y_train, 0.3),
            hint="exp(-|u|/h) underflows to 0 for every key, and 0/0 is NaN: write the weights as a softmax",
        ),
    ]
    _check("check_laplace_regression", fn, cases, _laplace_regression_reference, atol=1e-4)
