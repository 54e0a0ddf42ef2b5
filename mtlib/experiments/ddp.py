"""Data-parallel and sharded training of a small GPT, launched by ``torchrun`` (chapter 13).

The worker script of chapter 13 and of ``tests/test_distributed.py``. Every rank runs it::

    torchrun --standalone --nproc_per_node=2 -m mtlib.experiments.ddp --out report.json

and rank 0 writes one JSON report: per run, the loss of every step (the mean over the ranks,
i.e. the loss of the global batch) and what the run measured. The runs (``--runs``):

- ``grads``: one batch: the DDP gradients against one process's gradients of the whole global
  batch, the same with two micro-batches accumulated under ``no_sync`` (and the number of
  all-reduces that took), and a checkpoint saved by rank 0 and loaded through rank 0.
- ``ddp``: :func:`mtlib.train.fit`, unchanged, on a ``DistributedDataParallel`` GPT; each rank
  reads its shard of every global batch through ``torch.utils.data.DistributedSampler``.
  Also counts the bytes DDP hands to all-reduce (a communication hook) and times a step with
  and without the all-reduce.
- ``break_sampler_seed``: the samplers of the ranks seeded differently (``seed=rank``): the
  shards overlap and the global batch is not the one of a single process.
- ``break_no_sampler``: no sharding: every rank reads the whole global batch's first half.
- ``control_init_seed``: the *models* seeded differently per rank: harmless, because DDP
  broadcasts rank 0's parameters when it wraps the model.
- ``zero``: ``ZeroRedundancyOptimizer``: each rank keeps the AdamW state of its part of the
  parameters only; the optimizer state per rank is measured.
- ``fsdp``: FSDP2's ``fully_shard`` (each block, then the root): parameters, gradients and
  optimizer state sharded; the parameters and state per rank are measured. Also a control:
  ``fully_shard`` on models seeded ``seed + rank`` does not broadcast (unlike DDP), so the
  gathered parameters are a patchwork of the ranks' initialisations.
- ``wire``: the bytes all-reduce actually *sends*, read from the loopback interface's counters
  (``/proc/net/dev``, Linux) around repeated all-reduces of a buffer of the gradients' size,
  for groups of 2, 3, ... world_size ranks (not the buffer size a hook sees).

Options for the chapter's open exercises: ``--n-layer`` (a deeper GPT), ``--bucket-cap-mb``
(DDP's bucket size), ``--uneven-sampler`` (the last rank reads half a share of every global
batch) and ``--weight-loss`` (each rank's loss weighted by N n_r / B, n_r its share of the
global batch B).

``--dtype float64`` trains in double precision (the chapter's choice, so that float32 rounding,
which training amplifies from step to step, cannot hide or fake a difference); the default is
float32.

The data (:func:`dataset`) is every 33-character window (step 33) of Python's own documentation
(``pydoc_data.topics``), one id per printable ASCII character. Everything but the launch is in
this module so that the chapter and the tests run the single-process reference with the same
definitions (:func:`global_batch`, :func:`model_config`, :func:`loss_fn`).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mtlib import distributed as du
from mtlib import train, utils
from mtlib.data.corpus import pydoc_topics
from mtlib.models.gpt import GPT, GPTConfig

__all__ = [
    "GLOBAL_BATCH",
    "LR",
    "RUNS",
    "dataset",
    "loopback_tx_bytes",
    "global_batch",
    "launch",
    "loss_fn",
    "model_config",
    "reference_losses",
    "state_numel",
]

GLOBAL_BATCH = 16  # sequences per optimizer step, over all ranks
SEQ_LEN = 32  # tokens per sequence (plus one for the shifted targets)
NUM_SEQUENCES = 4096  # windows of the corpus in the dataset
LR = 3e-3  # AdamW learning rate (mtlib.train.fit's default optimizer)
RUNS = (
    "grads",
    "ddp",
    "break_sampler_seed",
    "break_no_sampler",
    "control_init_seed",
    "zero",
    "fsdp",
    "wire",
)


def model_config(n_layer: int = 2) -> GPTConfig:
    """A 2-layer GPT (d_model 48): small enough for hundreds of steps in a few seconds."""
    return GPTConfig.tiny(n_layer=n_layer, d_model=48, num_heads=4, d_ff=192, block_size=SEQ_LEN)


def loopback_tx_bytes() -> int:
    """Bytes sent so far through the loopback interface ``lo`` (Linux's ``/proc/net/dev``).

    Raises:
        RuntimeError: if the counters are not available (not Linux, or no ``lo`` line).
    """
    path = Path("/proc/net/dev")
    if not path.exists():
        raise RuntimeError("/proc/net/dev is missing: the 'wire' run needs Linux's counters")
    for line in path.read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[8])  # receive: 8 fields, then transmit bytes
    raise RuntimeError("/proc/net/dev has no 'lo' line: the loopback counters are unavailable")


def dataset() -> Tensor:
    """(NUM_SEQUENCES, SEQ_LEN + 1) long: windows of :func:`mtlib.data.corpus.pydoc_topics`, ids 0..95
    (printable ASCII minus 32; any other character becomes a space)."""
    topics = pydoc_topics()

    text = "".join(topics[k] for k in sorted(topics))
    codes = torch.tensor(list(text[: NUM_SEQUENCES * (SEQ_LEN + 1)].encode("ascii", "replace")))
    codes = torch.where((codes >= 32) & (codes < 128), codes - 32, torch.zeros_like(codes))
    return codes.reshape(NUM_SEQUENCES, SEQ_LEN + 1).long()  # (N, T + 1)


def loss_fn(model: nn.Module, batch: Tensor) -> Tensor:
    """Next-character cross-entropy of a batch (B, T + 1) of token ids."""
    logits = model(batch[:, :-1])  # (B, T, V)
    return train.sequence_loss(logits, batch[:, 1:])


def global_batch(data: Tensor, step: int, *, seed: int = 0) -> Tensor:
    """The global batch of ``step`` that one process would read: the next GLOBAL_BATCH indices of
    the epoch's order (``DistributedSampler(shuffle=True, seed=seed)``'s permutation)."""
    order = du.shard_indices(len(data), 0, 1, shuffle=True, seed=seed)
    return data[order[step * GLOBAL_BATCH : (step + 1) * GLOBAL_BATCH]]  # (B, T + 1)


def reference_losses(
    steps: int, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> list[float]:
    """Per-step losses of one process training on the whole global batch (:func:`mtlib.train.fit`)."""
    data = dataset()
    du.seed_all(seed)
    model = GPT(model_config()).to(dtype)
    history = train.fit(
        model, loss_fn, lambda s: global_batch(data, s, seed=seed), steps=steps, lr=LR, seed=seed
    )
    return history.loss


def state_numel(optimizer: torch.optim.Optimizer) -> int:
    """Numbers held in an optimizer's per-parameter state on this rank (AdamW: exp_avg and
    exp_avg_sq; the scalar step counters are left out). DTensors count their local shard."""
    local_optimizer = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer's own
    total = 0
    for state in local_optimizer.state.values():
        for key, value in state.items():
            if key != "step" and isinstance(value, Tensor):
                local = value.to_local() if hasattr(value, "to_local") else value
                total += local.numel()
    return total


@dataclass(frozen=True)
class _Options:
    """The worker's options for the open exercises (see the module docstring)."""

    n_layer: int = 2  # GPT depth
    bucket_cap_mb: float | None = None  # DDP's bucket size; None: DDP's default (25 MB)
    uneven_sampler: bool = False  # the last rank reads half a share of each global batch
    weight_loss: bool = False  # each rank's loss times N n_r / B


def _local_numel(module: nn.Module) -> int:
    return sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in module.parameters())


def _uneven_sizes(world_size: int) -> list[int]:
    """Shares of a global batch when the last rank reads half a share: (12, 4) for 2 ranks."""
    last = GLOBAL_BATCH // world_size // 2
    rest = GLOBAL_BATCH - last
    return [
        rest // (world_size - 1) + (r < rest % (world_size - 1)) for r in range(world_size - 1)
    ] + [last]


def _rank_batches(
    data: Tensor, run: str, env: du.DistEnv, seed: int, uneven: bool = False
) -> Callable[[int], Tensor]:
    """step -> this rank's local batch, through PyTorch's DistributedSampler (or a bug)."""
    if uneven:  # a sampler that does not pad: rank r reads sizes[r] of each global batch
        sizes = _uneven_sizes(env.world_size)
        first = sum(sizes[: env.rank])

        def uneven_batches(step: int) -> Tensor:
            whole = global_batch(data, step, seed=seed)  # (B, T + 1)
            return whole[first : first + sizes[env.rank]]  # (n_r, T + 1)

        return uneven_batches
    local = GLOBAL_BATCH // env.world_size
    sampler_seed = seed + env.rank if run == "break_sampler_seed" else seed
    sampler: torch.utils.data.DistributedSampler[int] = torch.utils.data.DistributedSampler(
        range(len(data)),  # type: ignore[arg-type]  # any sized sequence works as a dataset
        num_replicas=env.world_size, rank=env.rank, shuffle=True,
        seed=sampler_seed,
    )  # fmt: skip
    mine = list(sampler)
    if run == "break_no_sampler":  # every rank reads the first indices of the common order
        mine = du.shard_indices(len(data), 0, 1, shuffle=True, seed=seed)

    def batches(step: int) -> Tensor:
        return data[mine[step * local : (step + 1) * local]]  # (B / world, T + 1)

    return batches


def _counting_hook(counter: list[int], bucket: dist.GradBucket) -> torch.futures.Future[Tensor]:
    """DDP communication hook: record the bytes of the bucket, then all-reduce it as usual."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    buffer = bucket.buffer()
    counter.append(buffer.numel() * buffer.element_size())
    return default_hooks.allreduce_hook(dist.group.WORLD, bucket)  # type: ignore[arg-type]


# DDP checks a hook's annotations as objects; ``from __future__ import annotations`` made strings
_counting_hook.__annotations__["bucket"] = dist.GradBucket
_counting_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]


def _timings(
    ddp: nn.parallel.DistributedDataParallel, batch: Tensor, reps: int
) -> dict[str, float]:
    """Median seconds of forward + backward without all-reduce (no_sync), with it, and of one
    all-reduce of a buffer as large as the gradients."""

    def median_time(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(reps):
            dist.barrier()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    def compute_only() -> None:
        with ddp.no_sync():
            loss_fn(ddp, batch).backward()

    def with_allreduce() -> None:
        loss_fn(ddp, batch).backward()

    flat = torch.zeros_like(torch.cat([p.detach().flatten() for p in ddp.parameters()]))
    return {
        "compute_s": median_time(compute_only),
        "step_s": median_time(with_allreduce),
        "allreduce_s": median_time(lambda: dist.all_reduce(flat)),
    }


def _device_ids(env: du.DistEnv) -> list[int] | None:
    return [env.local_rank] if env.device.type == "cuda" else None  # DDP's one-GPU-per-rank


def _max_over_ranks(value: float) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=du.get_env().device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def _grad_gap(model: nn.Module, reference: nn.Module) -> float:
    """Largest |gradient difference| over all parameters, over all ranks."""
    gaps = [
        (p.grad - q.grad).abs().max().item()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True)
        if p.grad is not None and q.grad is not None
    ]
    return _max_over_ranks(max(gaps))


def _check_grads(
    data: Tensor, env: du.DistEnv, seed: int, checkpoint: Path, dtype: torch.dtype
) -> dict[str, Any]:
    """DDP's gradients vs one process's on the whole batch; no_sync accumulation; checkpoint."""
    du.seed_all(seed)
    model = GPT(model_config()).to(env.device, dtype)
    reference = copy.deepcopy(model)  # one process, the whole global batch
    loss_fn(reference, global_batch(data, 0, seed=seed)).backward()
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=_device_ids(env))
    counter: list[int] = []
    ddp.register_comm_hook(counter, _counting_hook)
    local = _rank_batches(data, "ddp", env, seed)(0)  # (B / world, T + 1) this rank's shard
    loss_fn(ddp, local).backward()
    report: dict[str, Any] = {"run": "grads", "ddp_grad_gap": _grad_gap(model, reference)}
    report["allreduces_one_batch"] = len(counter)
    ddp.zero_grad(set_to_none=True)
    counter.clear()
    du.accumulate_gradients(ddp, local.chunk(2), loss_fn)  # two micro-batches of B / (2 world)
    report["accumulated_grad_gap"] = _grad_gap(model, reference)
    report["allreduces_accumulated"] = len(counter)
    with torch.no_grad():  # a step of plain SGD, so that the checkpoint is not the initial model
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad)
    du.save_on_rank0({"model": model.state_dict(), "step": 1}, checkpoint)
    restored = GPT(model_config()).to(env.device, dtype)
    state = du.load_from_rank0(checkpoint)
    restored.load_state_dict(state["model"])
    same = all(
        torch.equal(p, q) for p, q in zip(model.parameters(), restored.parameters(), strict=True)
    )
    report["checkpoint_equal_on_every_rank"] = _max_over_ranks(0.0 if same else 1.0) == 0.0
    if du.is_main():
        checkpoint.unlink()
    return report


def _wire(env: du.DistEnv, numbers: int, repeats: int = 40) -> dict[str, Any]:
    """Loopback bytes sent per all-reduce of ``numbers`` float64 values, for groups of the
    first 2, 3, ... world_size ranks (the fewest of 3 timings of ``repeats`` all-reduces, so
    that a burst of other loopback traffic does not count)."""
    report: dict[str, Any] = {"run": "wire", "numbers": numbers, "bytes_per_number": 8}
    sent: dict[str, float] = {}
    for size in range(2, env.world_size + 1):
        group = dist.new_group(list(range(size)))
        buffer = torch.ones(numbers, dtype=torch.float64, device=env.device)
        member = env.rank < size
        if member:
            dist.all_reduce(buffer, group=group)  # connections are set up on first use
        best = float("inf")
        for _ in range(3):
            dist.barrier()
            before = loopback_tx_bytes()
            dist.barrier()
            if member:
                for _ in range(repeats):
                    dist.all_reduce(buffer, group=group)
            dist.barrier()
            best = min(best, (loopback_tx_bytes() - before) / repeats)
        sent[str(size)] = best  # all members together, per all-reduce
    report["sent_per_allreduce"] = sent
    return report


def _fsdp_seed_control(env: du.DistEnv, seed: int, dtype: torch.dtype) -> dict[str, Any]:
    """FSDP2 on models seeded seed + rank: how many gathered tensors differ from rank 0's."""
    from torch.distributed.fsdp import fully_shard

    du.seed_all(seed)
    reference = GPT(model_config()).to(env.device, dtype)  # what rank 0's seed builds
    du.seed_all(seed + env.rank)
    model = GPT(model_config()).to(env.device, dtype)
    for block in model.h:
        fully_shard(block)
    fully_shard(model)
    gaps = [
        (p.full_tensor() - q).abs().max().item()  # type: ignore[attr-defined]
        for p, q in zip(model.parameters(), reference.parameters(), strict=True)
    ]
    return {"seed_rank_tensors": len(gaps), "seed_rank_differ": sum(g > 0 for g in gaps),
            "seed_rank_max_gap": max(gaps)}  # fmt: skip


def _run(
    run: str,
    data: Tensor,
    env: du.DistEnv,
    steps: int,
    seed: int,
    dtype: torch.dtype,
    options: _Options = _Options(),
) -> dict[str, Any]:
    du.seed_all(seed + env.rank if run == "control_init_seed" else seed)
    model = GPT(model_config(options.n_layer)).to(env.device, dtype)
    uneven = options.uneven_sampler and run == "ddp"
    batches = _rank_batches(data, run, env, seed, uneven)
    share = _uneven_sizes(env.world_size)[env.rank] if uneven else GLOBAL_BATCH // env.world_size
    raw: list[float] = []  # this rank's unweighted loss per step

    def rank_loss(module: nn.Module, batch: Tensor) -> Tensor:
        loss = loss_fn(module, batch)
        raw.append(loss.item())
        if options.weight_loss:
            return loss * (env.world_size * share / GLOBAL_BATCH)  # N n_r / B
        return loss

    report: dict[str, Any] = {"run": run, "steps": steps}
    if run == "fsdp":
        from torch.distributed.fsdp import fully_shard

        report.update(_fsdp_seed_control(env, seed, dtype))
        du.seed_all(seed)
        total = sum(p.numel() for p in model.parameters())
        for block in model.h:
            fully_shard(block)
        fully_shard(model)
        wrapped: nn.Module = model
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(
            model.parameters(), lr=LR, betas=(0.9, 0.98), weight_decay=0.0
        )
        report.update(params_total=total, params_local=_local_numel(model))
    else:
        ddp = nn.parallel.DistributedDataParallel(
            model, device_ids=_device_ids(env), bucket_cap_mb=options.bucket_cap_mb
        )  # bucket_cap_mb None: DDP's default, 25 MB
        wrapped = ddp
        optimizer = torch.optim.AdamW(
            ddp.parameters(), lr=LR, betas=(0.9, 0.98), weight_decay=0.0, fused=True
        )
        if run == "zero":
            from torch.distributed.optim import ZeroRedundancyOptimizer

            optimizer = ZeroRedundancyOptimizer(
                ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=LR, betas=(0.9, 0.98),
                weight_decay=0.0, fused=True,
            )  # fmt: skip
        counter: list[int] = []
        if run == "ddp":
            ddp.register_comm_hook(counter, _counting_hook)
        report["params_total"] = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    train.fit(wrapped, rank_loss, batches, steps=steps, optimizer=optimizer, seed=seed)
    report["train_s"] = time.perf_counter() - start
    losses = torch.tensor(raw, dtype=torch.float64, device=env.device)  # (steps,)
    losses = losses * (share / GLOBAL_BATCH)  # n_r / B: the global batch's mean loss
    dist.all_reduce(losses)
    report["loss"] = losses.cpu().tolist()  # the global batch's loss per step
    state_local = torch.tensor([state_numel(optimizer)], device=env.device)
    states = [torch.zeros_like(state_local) for _ in range(env.world_size)]
    dist.all_gather(states, state_local)
    report["state_per_rank"] = [int(s.item()) for s in states]
    if run == "ddp":  # one more backward, after DDP rebuilt its buckets (it does after step 0)
        counter.clear()
        loss_fn(ddp, batches(0)).backward()
        report["allreduce_bytes_per_step"] = sum(counter)
        report["buckets_per_step"] = len(counter)
        report["bucket_bytes"] = list(counter)
        report.update(_timings(ddp, batches(0), reps=9))
    return report


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(
    runs: str = "ddp",
    *,
    nproc_per_node: int = 2,
    nodes: int = 1,
    steps: int = 200,
    short_steps: int = 40,
    seed: int = 0,
    dtype: str = "float32",
    options: tuple[str, ...] = (),
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Run this module under ``torchrun`` in subprocesses and return rank 0's report.

    With ``nodes=1``: one ``torchrun --standalone --nproc_per_node=N``. With ``nodes > 1``: one
    ``torchrun --nnodes=nodes --node_rank=i`` per simulated node, all started at once and
    meeting at ``127.0.0.1`` on a free port (a static rendezvous), as separate machines would.
    ``options`` are passed on to the worker, e.g. ``("--n-layer", "6", "--bucket-cap-mb", "0.05")``.
    Only localhost is used. The launchers' own output (c10d's warnings among it) is captured
    and shown only if a launch fails. Workers run with ``OMP_NUM_THREADS=1``.

    Returns:
        The report (see the module docstring) plus ``"launch_s"`` (wall time of the launch)
        and ``"commands"`` (the command lines, the temporary report path replaced by
        ``report.json``).
    """
    if nodes < 1 or nproc_per_node < 1:
        raise ValueError(f"nodes and nproc_per_node must be >= 1, got {nodes}, {nproc_per_node}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        worker = ["-m", "mtlib.experiments.ddp", "--out", str(out), "--runs", runs,
                  "--steps", str(steps), "--short-steps", str(short_steps), "--seed", str(seed),
                  "--dtype", dtype, *options]  # fmt: skip
        if nodes == 1:
            launchers = [["--standalone", f"--nproc_per_node={nproc_per_node}"]]
        else:
            port = _free_port()
            launchers = [[f"--nnodes={nodes}", f"--nproc_per_node={nproc_per_node}",
                          f"--node_rank={i}", "--master_addr=127.0.0.1", f"--master_port={port}"]
                         for i in range(nodes)]  # fmt: skip
        commands = [[sys.executable, "-m", "torch.distributed.run", *a, *worker] for a in launchers]
        start = time.perf_counter()
        processes = [
            subprocess.Popen(
                c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            for c in commands
        ]
        outputs = [p.communicate(timeout=timeout_s)[0] for p in processes]
        elapsed = time.perf_counter() - start
        for process, output in zip(processes, outputs, strict=True):
            if process.returncode != 0:
                raise RuntimeError(f"torchrun failed ({process.returncode}):\n{output[-3000:]}")
        report: dict[str, Any] = json.loads(out.read_text())
    shown = [["torchrun", *c[3:]] for c in commands]  # "python -m torch.distributed.run" = torchrun
    report["commands"] = [shlex.join(c).replace(str(out), "report.json") for c in shown]
    report["launch_s"] = elapsed
    return report


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run the requested runs on every rank, write the report on rank 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON report (rank 0 writes)")
    parser.add_argument("--runs", default="ddp", help=f"comma-separated, from {','.join(RUNS)}")
    parser.add_argument("--steps", type=int, default=200, help="steps of the 'ddp' run")
    parser.add_argument("--short-steps", type=int, default=40, help="steps of the other runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--n-layer", type=int, default=2, help="GPT depth (exercise 5)")
    parser.add_argument("--bucket-cap-mb", type=float, default=None,
                        help="DDP's bucket size in MB (default: DDP's 25; exercise 5)")  # fmt: skip
    parser.add_argument("--uneven-sampler", action="store_true",
                        help="'ddp' run: the last rank reads half a share (exercise 4)")  # fmt: skip
    parser.add_argument("--weight-loss", action="store_true",
                        help="weight each rank's loss by N n_r / B (exercise 4)")  # fmt: skip
    args = parser.parse_args(argv)
    options = _Options(args.n_layer, args.bucket_cap_mb, args.uneven_sampler, args.weight_loss)
    runs = args.runs.split(",")
    dtype = getattr(torch, args.dtype)
    unknown = sorted(set(runs) - set(RUNS))
    if unknown:
        parser.error(f"unknown runs {unknown}; choose from {RUNS}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    utils.apply_seed_shift()  # under the seed sweep, the workers' seeds move with the chapter's
    started = time.perf_counter()
    env = du.setup()
    if env.world_size < 2 or GLOBAL_BATCH % env.world_size:
        raise SystemExit(f"launch with torchrun and a world size dividing {GLOBAL_BATCH}")
    setup_s = time.perf_counter() - started
    data = dataset().to(env.device)
    reports = []
    for run in runs:
        if run == "grads":
            checkpoint = args.out.with_suffix(".ckpt.pt")
            reports.append(_check_grads(data, env, args.seed, checkpoint, dtype))
            continue
        if run == "wire":
            numbers = sum(p.numel() for p in GPT(model_config(args.n_layer)).parameters())
            reports.append(_wire(env, numbers))
            continue
        steps = args.steps if run == "ddp" else args.short_steps
        reports.append(_run(run, data, env, steps, args.seed, dtype, options))
    if du.is_main():
        report = {"world_size": env.world_size, "backend": env.backend, "setup_s": setup_s,
                  "dtype": args.dtype,
                  "runs": {r["run"]: r for r in reports}}  # fmt: skip
        args.out.write_text(json.dumps(report))
    du.teardown()


if __name__ == "__main__":
    main()
