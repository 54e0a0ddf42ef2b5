"""Chapter 13, beyond one machine: self-checks for sharding data and for all-reduce.

- :func:`check_shard_indices`: the dataset indices rank r of world_size reads in one epoch,
  as ``torch.utils.data.DistributedSampler`` (without shuffling) gives them;
- :func:`check_allreduce_mean`: an all-reduce that averages, simulated on one tensor holding
  every rank's gradient;
- :func:`check_ring_allreduce_bytes`: the bytes each worker sends in a ring all-reduce of a
  model's gradients.

Each checker recognises the typical mistakes and names them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mtlib.distributed import shard_indices
from mtlib.exercises._core import _call, _Case, _check, _describe, _fail

__all__ = ["check_allreduce_mean", "check_ring_allreduce_bytes", "check_shard_indices"]


# --------------------------------------------------------------------------------------------
# 1. Which indices does a rank read?
# --------------------------------------------------------------------------------------------


def _contiguous(n: int, rank: int, world_size: int, drop_last: bool) -> list[int]:
    """A block per rank instead of every world_size-th index (padded like the reference)."""
    order = shard_indices(n, 0, 1, drop_last=drop_last)
    total = len(shard_indices(n, 0, world_size, drop_last=drop_last)) * world_size
    order = (order * (total // max(1, n) + 1))[:total]
    share = total // world_size
    return order[rank * share : (rank + 1) * share]


def _unpadded(n: int, rank: int, world_size: int, drop_last: bool) -> list[int]:
    order = list(range(n - n % world_size if drop_last else n))
    return order[rank::world_size]


def _pad_with_last(n: int, rank: int, world_size: int, drop_last: bool) -> list[int]:
    if drop_last:
        return shard_indices(n, rank, world_size, drop_last=True)
    order = list(range(n))
    order += [n - 1] * (-n % world_size)
    return order[rank::world_size]


def _ignore_drop_last(n: int, rank: int, world_size: int, drop_last: bool) -> list[int]:
    return shard_indices(n, rank, world_size)


def _truncated(n: int, rank: int, world_size: int, drop_last: bool) -> list[int]:
    """Always cut to n // world_size per rank (drop_last's rule, also without drop_last)."""
    return shard_indices(n, rank, world_size, drop_last=True)


def check_shard_indices(fn: Callable[[int, int, int, bool], Any]) -> None:
    """Check ``fn(n, rank, world_size, drop_last)``: the list of indices of a dataset of length
    ``n`` that rank ``rank`` reads, as ``DistributedSampler(shuffle=False)`` gives them.

    The rules: every rank reads the same number of samples. Without ``drop_last`` the order
    ``0 .. n-1`` is padded by repeating its start (``0, 1, ...``) up to a multiple of
    ``world_size``; with ``drop_last`` the tail is cut to a multiple. Rank ``r`` then takes every
    ``world_size``-th index starting at ``r``.

    Recognised mistakes: contiguous blocks per rank, no padding (unequal shares), padding with
    the last index, ``drop_last`` ignored, the tail cut also without ``drop_last``.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_shard_indices"
    cases = [
        ("n = 10, rank 1 of 4", (10, 1, 4, False), "rank r takes indices r, r + world, ..."),
        ("n = 10, rank 3 of 4 (its last index is padding)", (10, 3, 4, False),
         "pad the order by repeating its start until every rank has ceil(n / world) indices"),
        ("n = 11, rank 2 of 3, drop_last", (11, 2, 3, True),
         "with drop_last, cut the order to n - n % world_size first"),
        ("n = 12, rank 0 of 3", (12, 0, 3, False), ""),
        ("n = 5, rank 0 of 1 (one process reads everything)", (5, 0, 1, False), ""),
    ]  # fmt: skip
    mistakes: dict[str, Callable[[int, int, int, bool], list[int]]] = {
        "ranks take interleaved indices (order[rank::world_size]), not contiguous blocks": (
            _contiguous
        ),
        "every rank must read the same number of samples: pad the order (or cut it with drop_last)": (
            _unpadded
        ),
        "pad by repeating the START of the order (0, 1, ...), as DistributedSampler does": (
            _pad_with_last
        ),
        "with drop_last=True the tail is dropped instead of padded": _ignore_drop_last,
        "without drop_last nothing is cut: pad the order by repeating its start (0, 1, ...) "
        "until every rank has ceil(n / world_size) indices": _truncated,
    }
    for number, (description, args, hint) in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({description})"
        got = _call(checker, where, fn, _Case(description, args, hint=hint))
        if isinstance(got, torch.Tensor) and got.dim() == 1:
            got = got.tolist()
        if not isinstance(got, (list, tuple)) or not all(isinstance(i, int) for i in got):
            raise _fail(checker, where, f"expected a list of ints, got {_describe(got)}",
                        "return the indices, e.g. [1, 5, 9]")  # fmt: skip
        expected = shard_indices(*args[:3], drop_last=args[3])
        if list(got) == expected:
            continue
        for mistake_hint, mistake in mistakes.items():
            wrong = mistake(*args)
            if wrong != expected and list(got) == wrong:
                raise _fail(checker, where, "your output equals a known mistake", mistake_hint)
        if len(got) < len(expected) and list(got) == expected[: len(got)]:
            hint = "your shard is too short: every rank reads ceil(n / world_size) indices; pad"
        raise _fail(checker, where, f"expected {expected}, got {list(got)}"[:300], hint)
    print(f"{checker}: all {len(cases)} cases passed.")


# --------------------------------------------------------------------------------------------
# 2. All-reduce (mean), simulated
# --------------------------------------------------------------------------------------------


def _allreduce_mean(grads: torch.Tensor) -> torch.Tensor:
    return grads.double().mean(dim=0, keepdim=True).expand_as(grads).clone()


def check_allreduce_mean(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check ``fn(grads)``: ``grads`` (world_size, ...) holds rank r's gradient in row r; return
    what every rank holds after DDP's all-reduce: a tensor of the same shape whose every row is
    the mean of the rows.

    Recognised mistakes: the sum instead of the mean, a reduce (only rank 0 gets the result,
    the others keep their own), the mean over the wrong dimension.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    gen = torch.Generator().manual_seed(13)
    cases = [
        _Case(
            "2 ranks, gradients of 5 numbers",
            (torch.randn(2, 5, generator=gen, dtype=torch.float64),),
            hint="every rank ends with the mean over the ranks (dimension 0)",
        ),
        _Case("4 ranks, (3, 7) gradients", (torch.randn(4, 3, 7, generator=gen, dtype=torch.float64),)),
        _Case("1 rank", (torch.randn(1, 6, generator=gen, dtype=torch.float64),)),
    ]  # fmt: skip

    def reduce_only(g: torch.Tensor) -> torch.Tensor:
        out = g.double().clone()
        out[0] = g.double().mean(dim=0)
        return out

    _check(
        "check_allreduce_mean",
        fn,
        cases,
        _allreduce_mean,
        atol=1e-9,
        mistakes={
            "that is the sum: DDP divides the summed gradients by world_size": lambda g: (
                _allreduce_mean(g) * g.shape[0]
            ),
            "only rank 0 has the mean (a reduce): an ALL-reduce leaves the result on every rank": (
                reduce_only
            ),
            "average over the ranks, dimension 0, not over the gradient's own numbers": lambda g: (
                g.double().mean(dim=-1, keepdim=True).expand_as(g).clone()
            ),
        },
    )


# --------------------------------------------------------------------------------------------
# 3. How many bytes does a ring all-reduce send?
# --------------------------------------------------------------------------------------------


def _tied_model() -> nn.Module:
    model = nn.Sequential(nn.Embedding(11, 6), nn.Linear(6, 5), nn.Linear(5, 11, bias=False))
    model[2].weight = model[0].weight  # tied, as GPT's lm_head and wte: one tensor, counted once
    return model


def _frozen_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(7, 9), nn.LayerNorm(9), nn.Linear(9, 3))
    model[0].requires_grad_(False)  # frozen: no gradient, nothing to all-reduce
    return model


def _batchnorm_model() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))  # 2 buffers + 1


def _ring_bytes(
    model: nn.Module, world_size: int, bytes_per_number: int, *, variant: str = ""
) -> float:
    params = list(model.parameters()) if variant != "tied_twice" else [
        t for _, t in model.named_parameters(remove_duplicate=False)
    ]  # fmt: skip
    if variant == "buffers":  # the state_dict: parameters and buffers (running statistics)
        params = [t for t in model.state_dict().values()]
    count = sum(p.numel() for p in params if p.requires_grad or variant in ("frozen", "buffers"))
    factor = {"": 2 * (world_size - 1) / world_size, "no_two": (world_size - 1) / world_size,
              "no_fraction": 2.0}.get(variant, 2 * (world_size - 1) / world_size)  # fmt: skip
    return factor * count * bytes_per_number


def check_ring_allreduce_bytes(fn: Callable[[nn.Module, int, int], Any]) -> None:
    """Check ``fn(model, world_size, bytes_per_number)``: how many bytes each worker sends in one
    ring all-reduce of ``model``'s gradients (a float).

    A ring all-reduce of P numbers over N workers is a reduce-scatter then an all-gather, each
    N - 1 steps in which every worker sends one chunk of P / N numbers: 2 (N - 1) / N x P
    numbers per worker. P counts the gradients: parameters that require grad, a tied (shared)
    parameter once.

    Recognised mistakes: counting a tied weight twice, counting frozen parameters, counting
    buffers (BatchNorm's running statistics), leaving out the factor 2 (only the
    reduce-scatter), leaving out (N - 1) / N.

    Raises:
        CheckFailed: an ``AssertionError`` naming the first failing case and what was wrong.
    """
    checker = "check_ring_allreduce_bytes"
    cases = [
        ("a 3-layer MLP, 4 workers, float32", (nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 3)), 4, 4),
         "per worker: 2 (N - 1) / N x (number of gradient numbers) x bytes per number"),
        ("tied embedding and output layer, 2 workers, bfloat16", (_tied_model(), 2, 2),
         "a shared parameter has one gradient: model.parameters() lists it once"),
        ("a frozen first layer, 3 workers, float32", (_frozen_model(), 3, 4),
         "only parameters with requires_grad have gradients to all-reduce"),
        ("one worker", (nn.Linear(4, 3), 1, 4), "with one worker nothing is sent"),
        ("BatchNorm between two layers, 2 workers, float32", (_batchnorm_model(), 2, 4),
         "count gradients: model.parameters(), not the state_dict"),
    ]  # fmt: skip
    mistakes = {
        "tied_twice": "a tied weight is one parameter: count it once (model.parameters() does)",
        "frozen": "frozen parameters (requires_grad=False) have no gradient to send",
        "buffers": "buffers (BatchNorm's running mean and variance) have no gradient: they are "
        "not all-reduced (DDP broadcasts them from rank 0 at each forward instead)",
        "no_two": "a ring all-reduce is a reduce-scatter AND an all-gather: the factor is 2 (N - 1) / N",
        "no_fraction": "each of the 2 (N - 1) steps sends one chunk of P / N numbers: the factor is 2 (N - 1) / N, not 2",
    }  # fmt: skip
    for number, (description, args, hint) in enumerate(cases, start=1):
        where = f"case {number} of {len(cases)} ({description})"
        got = _call(checker, where, fn, _Case(description, args, hint=hint))
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            raise _fail(checker, where, f"expected a number of bytes, got {_describe(got)}",
                        "return a float (or an int)")  # fmt: skip
        expected = _ring_bytes(*args)
        if abs(got - expected) <= 1e-6 * max(1.0, expected):
            continue
        for variant, mistake_hint in mistakes.items():
            wrong = _ring_bytes(*args, variant=variant)
            if abs(wrong - expected) > 1e-6 and abs(got - wrong) <= 1e-6 * max(1.0, wrong):
                raise _fail(checker, where, "your output equals a known mistake", mistake_hint)
        raise _fail(checker, where, f"expected {expected:g} bytes, got {got:g}", hint)
    print(f"{checker}: all {len(cases)} cases passed.")
