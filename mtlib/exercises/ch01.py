"""Chapter 1, why attention: softmax, soft dictionary lookup, kernel regression."""

from __future__ import annotations

from collections.abc import Callable

import torch

from mtlib.exercises._core import _Case, _check

__all__ = ["check_laplace_regression", "check_soft_lookup", "check_softmax"]


def _softmax_reference(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return torch.softmax(x.double() / temperature, dim=-1)


def check_softmax(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, temperature=1.0)``: softmax over the last dimension of ``x / temperature``.

    Cases include a batch of rows, a low and a high temperature, scores around 1000 that
    overflow a naive implementation, and two rows 1000 apart that a single maximum for the whole
    tensor (rather than one per row) turns into 0/0.

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
        _Case(
            "two rows 1000 apart (one maximum for the whole tensor is not enough)",
            (torch.tensor([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]]),),
            hint="subtract each row's own maximum (max over the last dimension, keepdim=True): "
            "after subtracting the largest score of the whole tensor, every exp of the second "
            "row underflows to 0 and its softmax is 0/0",
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
    # Every case has n != d and m != n, so a missing transpose (queries @ keys) cannot pass.
    keys = torch.tensor([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0], [3.0, 3.0, 0.0]])  # (4, 3)
    values = torch.tensor([[1.0, 0.0], [2.0, -1.0], [3.0, 5.0], [0.0, 4.0]])  # (4, 2)
    cases = [
        _Case(
            "m=1 query parallel to the 2nd of n=4 keys of width d=3, values of width d_v=2",
            (torch.tensor([[0.0, 2.0, 0.0]]), keys, values),
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
    average of ``y_train`` weighted by ``kappa(x_query - x_train) = exp(-|x_query - x_train| / sigma)``
    with ``sigma = bandwidth``, normalised to sum to 1 for each query.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(2)
    x_train = torch.sort(torch.rand(9, generator=g) * 5).values
    y_train = torch.sin(x_train)
    cases = [
        _Case(
            "m=4 queries, n=9 training points, bandwidth=0.4",
            (torch.linspace(0, 5, 4), x_train, y_train, 0.4),
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
