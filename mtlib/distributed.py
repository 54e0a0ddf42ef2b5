"""Data-parallel training with PyTorch's own ``torch.distributed``, launched by ``torchrun``.

``torchrun`` starts one Python process per worker and tells each, through environment variables,
who it is: ``RANK`` (0 .. world_size - 1 over all machines), ``LOCAL_RANK`` (on this machine),
``WORLD_SIZE``, and where to meet (``MASTER_ADDR``, ``MASTER_PORT``). This module turns that into
a process group and keeps the few things every data-parallel script needs in one place::

    from mtlib import distributed as dist_utils

    env = dist_utils.setup()  # gloo on CPU, nccl on GPU; world_size 1 without torchrun
    dist_utils.seed_all(0)  # the SAME seed on every rank: the models start equal
    model = torch.nn.parallel.DistributedDataParallel(model)  # all-reduces the gradients
    sampler = torch.utils.data.DistributedSampler(data, num_replicas=env.world_size,
                                                  rank=env.rank, shuffle=True, seed=0)
    ...
    dist_utils.print0("loss", loss)  # printed once, by rank 0
    dist_utils.save_on_rank0(state, "checkpoint.pt")  # one writer
    dist_utils.teardown()

Launch it with ``torchrun --standalone --nproc_per_node=2 script.py``.

The sampler: :func:`shard_indices` is the index list that PyTorch's
``torch.utils.data.DistributedSampler`` gives a rank, written out in a few lines so that it can
be read and tested without a process group; scripts use the library's sampler itself.

Gradient accumulation: :func:`accumulate_gradients` runs several micro-batches and lets DDP
all-reduce only once, on the last backward (``no_sync`` on the others).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mtlib.utils import seed_everything

__all__ = [
    "DistEnv",
    "accumulate_gradients",
    "all_reduce_mean",
    "get_env",
    "is_main",
    "load_from_rank0",
    "print0",
    "rank_print",
    "save_on_rank0",
    "seed_all",
    "setup",
    "shard_indices",
    "teardown",
]


@dataclass(frozen=True)
class DistEnv:
    """Who this process is in the job (all 1-process defaults when not launched by torchrun).

    Attributes:
        rank: global rank, in [0, world_size).
        local_rank: rank on this machine (picks the GPU).
        world_size: number of processes in the job.
        backend: ``"gloo"`` (CPU), ``"nccl"`` (CUDA GPUs), or ``""`` for a single process
            without a process group.
        device: where this rank's model lives (``cuda:local_rank`` with nccl, else ``cpu``).
    """

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    backend: str = ""
    device: torch.device = torch.device("cpu")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {value!r}") from None


def get_env() -> DistEnv:
    """The current process's place in the job, read from the process group if there is one,
    else from torchrun's environment variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``)."""
    if dist.is_available() and dist.is_initialized():
        backend = str(dist.get_backend())
        local = _env_int("LOCAL_RANK", 0)
        device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
        return DistEnv(dist.get_rank(), local, dist.get_world_size(), backend, device)
    return DistEnv(
        rank=_env_int("RANK", 0),
        local_rank=_env_int("LOCAL_RANK", 0),
        world_size=_env_int("WORLD_SIZE", 1),
    )


def setup(backend: str | None = None, *, timeout_s: float = 120.0) -> DistEnv:
    """Join the process group that torchrun prepared (a no-op without torchrun).

    Args:
        backend: ``"gloo"`` or ``"nccl"``; default ``"nccl"`` if CUDA is available, else
            ``"gloo"``. With nccl each process uses the GPU ``cuda:LOCAL_RANK``.
        timeout_s: how long a collective may wait for the other ranks before failing.

    Returns:
        The :class:`DistEnv` of this process (world_size 1 and backend ``""`` when the
        environment has no ``WORLD_SIZE``, i.e. a plain ``python script.py``).
    """
    if backend is not None and backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo', 'nccl' or None, got {backend!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    if "WORLD_SIZE" not in os.environ or dist.is_initialized():
        return get_env()
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(_env_int("LOCAL_RANK", 0))
    # init_method "env://": MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from torchrun
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return get_env()


def teardown() -> None:
    """Leave the process group (call it at the end of every rank's script)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # nobody leaves while another rank still talks
        dist.destroy_process_group()


def is_main() -> bool:
    """True on rank 0 (and in a single process)."""
    return get_env().rank == 0


def print0(*args: Any, **kwargs: Any) -> None:
    """``print`` on rank 0 only: one line per job, not one per process."""
    if is_main():
        print(*args, **kwargs, flush=True)


def rank_print(*args: Any, **kwargs: Any) -> None:
    """``print`` on every rank, prefixed with ``[rank r/w]`` (interleaving is the OS's choice)."""
    env = get_env()
    print(f"[rank {env.rank}/{env.world_size}]", *args, **kwargs, flush=True)


def seed_all(seed: int, *, per_rank: bool = False) -> int:
    """Seed Python, NumPy and torch on this rank.

    Data parallelism wants the *same* seed everywhere (equal initial models, equal choices
    made from random numbers); DDP broadcasts rank 0's parameters anyway, but nothing else.
    Use ``per_rank=True`` only for what must differ between ranks (e.g. data augmentation
    that is not tied to a sample): it seeds ``seed + rank``.

    Returns:
        The seed used on this rank.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    used = seed + get_env().rank if per_rank else seed
    seed_everything(used)
    return used


def shard_indices(
    n: int,
    rank: int,
    world_size: int,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    drop_last: bool = False,
) -> list[int]:
    """The dataset indices that rank ``rank`` of ``world_size`` reads in one epoch.

    Exactly what ``torch.utils.data.DistributedSampler(dataset, world_size, rank, shuffle=...,
    seed=..., drop_last=...)`` yields after ``set_epoch(epoch)`` (a test checks it):

    1. the order: ``0 .. n-1``, or with ``shuffle`` a permutation drawn from a generator
       seeded with ``seed + epoch`` (the same on every rank: ranks must agree);
    2. equal shares: with ``drop_last`` the tail is cut to a multiple of ``world_size``
       (``n // world_size`` each); without it the order is padded by repeating its start
       until the length is a multiple (``ceil(n / world_size)`` each; a few samples are
       seen twice per epoch);
    3. rank ``r`` takes every ``world_size``-th index starting at ``r``: ``order[r::world_size]``.

    Args:
        n: dataset length, >= 1.
        rank: this process's rank, in [0, world_size).
        world_size: number of processes, >= 1.
        shuffle: permute the order each epoch.
        seed: seed of the permutation (identical on every rank).
        epoch: epoch number, mixed into the seed so each epoch has its own order.
        drop_last: cut the tail instead of padding.

    Returns:
        The list of indices of this rank, in the order it reads them.
    """
    for name, value in (("n", n), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, world_size={world_size}), got {rank!r}")
    if shuffle:
        generator = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(n, generator=generator).tolist()
    else:
        order = list(range(n))
    if drop_last:
        order = order[: n - n % world_size]
    else:
        padding = -n % world_size  # repeat the start (the whole order as often as needed)
        order = order + (order * (padding // n + 1))[:padding]
    return order[rank::world_size]


def all_reduce_mean(value: Tensor | float) -> float:
    """The mean of a scalar over all ranks (the value itself in a single process).

    Used to report one training loss per step: each rank's loss is the mean over its own
    shard, and with equal shards the mean of the ranks' losses is the global batch's loss.
    """
    tensor = torch.as_tensor(value, dtype=torch.float64).detach().reshape(1).clone()  # (1,)
    if dist.is_available() and dist.is_initialized():
        if get_env().backend == "nccl":
            tensor = tensor.cuda()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= dist.get_world_size()
    return float(tensor.item())


def save_on_rank0(state: dict[str, Any], path: str | Path) -> None:
    """``torch.save(state, path)`` on rank 0 only, then wait until it is written.

    One writer: N ranks writing the same file race and can leave it truncated. With a DDP
    model save ``ddp.module.state_dict()`` (the names without the ``module.`` prefix).
    """
    if is_main():
        torch.save(state, path)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def load_from_rank0(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint on rank 0 and send it to every rank (works without a shared disk).

    Returns:
        The loaded object on every rank (tensors on the CPU).
    """
    box: list[Any] = [None]
    if is_main():
        box[0] = torch.load(path, map_location="cpu", weights_only=True)
    if dist.is_available() and dist.is_initialized():
        dist.broadcast_object_list(box, src=0)  # pickled, sent from rank 0 to all
    if not isinstance(box[0], dict):
        raise TypeError(f"the checkpoint {path} must hold a dict, got {type(box[0]).__name__}")
    return box[0]


def accumulate_gradients(
    model: nn.Module,
    micro_batches: Sequence[Any],
    loss_fn: Callable[[nn.Module, Any], Tensor],
) -> float:
    """Backpropagate the mean loss of several micro-batches, all-reducing only once.

    The gradients *add* to those already in ``.grad`` (zero them before). Each micro-batch's
    loss is divided by their number, so with equal micro-batches the gradient is that of the
    whole batch. With a ``DistributedDataParallel`` model every backward but the last runs
    under ``model.no_sync()``: the gradients accumulate locally and DDP all-reduces their sum
    once, on the last backward, instead of once per micro-batch.

    Args:
        model: a module, or a DDP-wrapped module.
        micro_batches: the pieces of this rank's batch.
        loss_fn: ``(model, micro_batch) -> scalar mean loss`` (as for :func:`mtlib.train.fit`).

    Returns:
        The mean of the micro-batch losses on this rank (a float).
    """
    if len(micro_batches) == 0:
        raise ValueError("micro_batches must hold at least one micro-batch, got none")
    total = 0.0
    for i, batch in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with _sync_context(model, sync=last):
            loss = loss_fn(model, batch) / len(micro_batches)
            loss.backward()
        total += float(loss.item())
    return total


def _sync_context(model: nn.Module, *, sync: bool) -> contextlib.AbstractContextManager[Any]:
    no_sync: Callable[[], contextlib.AbstractContextManager[Any]] | None = getattr(
        model, "no_sync", None
    )
    if sync or no_sync is None:
        return contextlib.nullcontext()
    return no_sync()
