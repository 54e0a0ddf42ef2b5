"""Chapter 1, why attention: softmax, soft dictionary lookup, kernel regression."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mtlib.exercises._core import _Case, _check

__all__ = ["check_laplace_regression", "check_soft_lookup", "check_softmax"]


def _softmax_reference(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    return torch.softmax(x.double() / temperature, dim=-1)


def check_softmax(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(x, temperature=1.0)``: softmax over the last dimension of ``x / temperature``.

    Cases include a batch of rows, a low and a high temperature, scores around 1000 that
    overflow a naive implementation, two rows 1000 apart that a single maximum for the whole
    tensor (rather than one per row) turns into 0/0, a 3-D input (softmax over the last
    dimension, not dimension 1) and temperature 0.01 (where a power of a softmax underflows).

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
            hint="each row must sum to 1: a max or a sum over the last dimension needs "
            "keepdim=True to broadcast back over its row",
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
        _Case(
            "a batch of 2 score matrices of shape (3, 5): x of shape (2, 3, 5)",
            (torch.randn(2, 3, 5, generator=g),),
            hint="x may have any number of leading dimensions: reduce over dim=-1 (the last one), "
            "not a fixed dim=1, with keepdim=True",
        ),
        _Case(
            "temperature=0.01 on 20 close scores (a near-hard lookup)",
            (0.5 * torch.randn(2, 20, generator=g),),
            {"temperature": 0.01},
            "divide the scores by the temperature before the exponential (and subtract the row's "
            "maximum after dividing): a power of a softmax underflows to 0/0 at low temperature",
        ),
    ]
    _check("check_softmax", fn, cases, _softmax_reference)


def _soft_lookup_reference(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_mask: torch.Tensor
) -> torch.Tensor:
    scores = queries.double() @ keys.double().transpose(-2, -1)  # (B, m, n)
    scores = scores.masked_fill(~key_mask[:, None, :], float("-inf"))  # padded keys: weight 0
    return torch.softmax(scores, dim=-1) @ values.double()  # (B, m, d_v)


def _lookup_mistakes() -> dict[str, Callable[..., torch.Tensor]]:
    """Known wrong answers of exercise 2, each with the hint that names it."""

    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return q.double() @ k.double().transpose(-2, -1)

    def finish(s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(s, dim=-1) @ v.double()

    def other_axis(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:  # (1, B, n): query i of every dictionary gets dictionary i's mask
        return finish(scores(q, k).masked_fill(~mask[None], float("-inf")), v)

    def inverted(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        return finish(scores(q, k).masked_fill(mask[:, None], float("-inf")), v)

    def zero_score(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        return finish(scores(q, k).masked_fill(~mask[:, None], 0.0), v)

    def zeroed_after(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        return (torch.softmax(scores(q, k), dim=-1) * mask[:, None]) @ v.double()

    def unmasked(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        return finish(scores(q, k), v)

    def scaled(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
        s = scores(q, k) / q.shape[-1] ** 0.5
        return finish(s.masked_fill(~mask[:, None], float("-inf")), v)

    return {
        "the mask belongs to the keys of each dictionary: give it the shape (B, 1, n), so that "
        "it broadcasts over the m queries (a (1, B, n) mask hands query i dictionary i's mask)": other_axis,
        "key_mask is True for the keys that exist: mask where it is False": inverted,
        "a score of 0 is not a weight of 0: fill the padded keys' scores with -inf (or a very "
        "negative number) before the softmax": zero_score,
        "zeroing the padded keys' weights after the softmax leaves weights that no longer sum "
        "to 1: mask the scores before the softmax instead": zeroed_after,
        "the padded keys still get weight: their scores must be masked before the softmax": unmasked,
        "the score is the plain dot product query . key (tau = 1): no division by sqrt(d)": scaled,
    }


def check_soft_lookup(fn: Callable[..., torch.Tensor]) -> None:
    """Check ``fn(queries, keys, values, key_mask)``: soft lookups in a batch of padded dictionaries.

    ``queries`` (B, m, d), ``keys`` (B, n, d), ``values`` (B, n, d_v) and ``key_mask`` (B, n),
    True for the keys that exist and False for padding, -> (B, m, d_v): entry ``[b, i]`` is
    ``values[b]`` averaged with weights ``softmax(keys[b] @ queries[b, i])`` over the real keys of
    dictionary ``b`` only (padded keys get weight exactly 0). Every dictionary has at least one
    real key. Cases have n != d and m != n; one has B == m, where a mask broadcast over the wrong
    axis still has the right shape; padded keys carry the value 10, so any weight on them shows.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    g = torch.Generator().manual_seed(1)

    def case(b: int, m: int, n: int, d: int, d_v: int, real: list[int]) -> tuple[torch.Tensor, ...]:
        queries = torch.randn(b, m, d, generator=g)
        keys = torch.randn(b, n, d, generator=g)
        values = torch.randn(b, n, d_v, generator=g)
        key_mask = torch.arange(n)[None, :] < torch.tensor(real)[:, None]  # (B, n): padding last
        values = torch.where(key_mask[..., None], values, torch.full_like(values, 10.0))
        return queries, keys, values, key_mask

    # One dictionary: 4 real keys and a padded 5th that the query would like best.
    keys = torch.tensor([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0], [3.0, 3.0, 0.0], [0.0, 5.0, 0.0]])
    values = torch.tensor([[1.0, 0.0], [2.0, -1.0], [3.0, 5.0], [0.0, 4.0], [10.0, 10.0]])
    cases = [
        _Case(
            "B=1 dictionary of n=5 keys (d=3, d_v=2), the last one padding, m=1 query parallel to the 2nd key",
            (torch.tensor([[[0.0, 2.0, 0.0]]]), keys[None], values[None], torch.tensor([[True] * 4 + [False]])),
            hint="the scores form a (B, m, n) tensor; normalise over the keys (the last dimension): "
            "each query's n weights must sum to 1",
        ),
        _Case(
            "B=3 dictionaries of n=6 keys (d=2, d_v=4) with 5, 2 and 1 real keys, m=3 queries (B == m)",
            case(3, 3, 6, 2, 4, [5, 2, 1]),
            hint="padded keys (key_mask False) must get weight exactly 0",
        ),
        _Case(
            "B=2 dictionaries of n=5 keys (d=4, d_v=2) with 5 and 3 real keys, m=3 queries each",
            case(2, 3, 5, 4, 2, [5, 3]),
            hint="the mask is per dictionary and per key: (B, 1, n) against the (B, m, n) scores",
        ),
        _Case(
            "B=2 dictionaries of n=7 keys (d=3, d_v=6) with 4 and 7 real keys, m=2 queries",
            case(2, 2, 7, 3, 6, [4, 7]),
            hint="normalise over the keys (the last dimension of the scores), not over the queries",
        ),
    ]
    _check("check_soft_lookup", fn, cases, _soft_lookup_reference, mistakes=_lookup_mistakes())


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
    bandwidth_hint = "divide |u| by the bandwidth sigma itself (not 2 sigma, not sigma**2, not times sigma)"

    def scaled_wrongly(factor: Callable[[float], float]) -> Callable[..., torch.Tensor]:
        def mistake(x_query: Tensor, x_train: Tensor, y_train: Tensor, bandwidth: float) -> Tensor:  # the Laplace kernel with another scale
            return _laplace_regression_reference(x_query, x_train, y_train, factor(bandwidth))

        return mistake

    mistakes = [(bandwidth_hint, scaled_wrongly(f)) for f in (lambda h: 2 * h, lambda h: h**2, lambda h: 1 / h)]
    _check("check_laplace_regression", fn, cases, _laplace_regression_reference, atol=1e-4, mistakes=mistakes)
