"""Benchmarks behind the numbers the book quotes: ``python -m mtlib.bench <name>``.

``python -m mtlib.bench attention`` times self-attention forward passes (``d_model=512``,
``h=8``) at the one-token decode step (``B=1, T=1``, where per-call overhead dominates; KV-cache
generation runs it hundreds of times) and at ``B=8``, ``T`` in 128, 512, 1024, 2048, for:

- ``mtlib fused``: :class:`mtlib.attention.MultiHeadAttention` with ``fused=True``
- ``mtlib explicit``: the same module with ``fused=False`` (it builds the ``(T, T)`` weights)
- ``minimal``: the least a fused attention must do, as in nanoGPT: one ``qkv`` linear,
  :func:`torch.nn.functional.scaled_dot_product_attention`, one output linear; no checks
- ``nn.MultiheadAttention``: PyTorch's module (``batch_first=True``, ``need_weights=False``),
  which in inference mode takes its own fused "fast path"
- ``F.sdpa kernel``: :func:`torch.nn.functional.scaled_dot_product_attention` alone, on
  ready-made ``(B, H, T, Dh)`` tensors (no projections): a lower bound for the others

What is measured:

- ``time_ms``: the median wall-clock time of one forward call, under
  :func:`torch.inference_mode`, in eval mode, after one warm-up call. Implementations are
  timed in turn within each round, in an order that rotates from round to round, so slow
  drifts of the machine hit all of them alike.
- ``peak_mib``: the peak of memory held by tensors allocated *during* one forward call
  (inputs and weights, allocated before, are not counted; the output is). On CUDA this is
  ``torch.cuda.max_memory_allocated`` minus the memory allocated before the call. On CPU
  it is rebuilt from the allocation and free events that :mod:`torch.profiler` records
  (``profile_memory=True``): only memory from PyTorch's CPU allocator, not the process RSS.
  ``nan`` when the profiler cannot report it.
- ``x_mha``, ``x_min``: ratios to ``nn.MultiheadAttention`` and to ``minimal`` at the same
  ``B`` and ``T`` (below 1 = faster/smaller): the median, over the repeats, of the ratio of the
  two calls timed in the same round; ``x_mha_iqr`` gives the quartiles of that ratio. The
  goals for ``mtlib fused``, with the input checks kept: ``x_mha <= 1.10`` at the decode step,
  and ``x_mha <= 1.00`` and ``x_min <= 1.10`` at ``T >= 128``.

``python -m mtlib.bench tiled`` compares explicit attention (which builds the ``(N, N)``
weights), :func:`mtlib.attention.tiled_attention` (block by block, online softmax) and
PyTorch's fused kernel on ``(B, H, N, d)`` inputs, ``d = 64``, for ``N`` from 128 to 8192.
Every (implementation, ``N``) runs in a fresh process, so one measurement's peak cannot hide
in another's. Columns: ``time_ms`` (median of a few calls after a warm-up), ``peak_mib`` (as
above: PyTorch's allocator on CPU, ``max_memory_allocated`` on CUDA), ``rss_mib`` (growth of
the process's peak resident memory during the first call; CPU only, coarse), and
``mem_x_expl`` / ``time_x_expl``, the ratios to explicit attention at the same ``N``. The
goal: tiled's ``mem_x_expl <= 0.15`` at ``N = 8192``.

``python -m mtlib.bench kv-cache`` generates greedily with a GPT-2-shaped model (4 layers,
``d_model`` 256, 4 heads, 1024 positions, a 1024-token vocabulary by default) with and
without the KV cache, on the same weights, at 32, 128 and 512 new tokens: ``tokens_equal``
must hold, and ``x_cached`` (time over the cached time) of the uncached run is the speed-up,
goal ``>= 5`` at 512 new tokens. When ``transformers`` is importable, the weights come from a
randomly initialised ``GPT2LMHeadModel`` loaded with :meth:`mtlib.models.gpt.GPT.from_hf`, and
that model's own cached ``generate`` is timed too, taking turns with mtlib's in every round
(goal for mtlib cached: ``x_hf <= 1.0`` at every length, the median of its time over
transformers' in the same round, with the rounds' range beside it); otherwise that row is
skipped with a note. Times are medians over the rounds, with the fastest and slowest. A
second table gives the latency of one generation step at several positions (the cache's
length): nearly flat with the cache, growing linearly without.

Every subcommand prints a table by default and a JSON document with ``--json``.
``python -m mtlib.bench record`` runs the three at their defaults and stores them, with the
machine they ran on, in ``mtlib/experiments/bench_record.json``; chapter 12 prints its tables
from that file (:func:`recorded`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from mtlib import utils
from mtlib.attention import MultiHeadAttention, scaled_dot_product_attention, tiled_attention

__all__ = [
    "BenchRow",
    "allocated_mib",
    "best_seconds",
    "GenerationRow",
    "LatencyRow",
    "MinimalAttention",
    "TiledRow",
    "bench_attention",
    "bench_kv_cache",
    "bench_tiled",
    "format_kv_tables",
    "format_table",
    "format_tiled_table",
    "record",
    "recorded",
    "main",
    "measure_attention_once",
    "median_seconds",
    "peak_memory_mib",
]

MHA_NAME = "nn.MultiheadAttention"
MIN_NAME = "minimal"
IMPLEMENTATIONS = ("mtlib fused", "mtlib explicit", MIN_NAME, MHA_NAME, "F.sdpa kernel")
COLUMNS = (
    "B", "T", "implementation", "time_ms", "x_mha", "x_mha_iqr", "x_min", "peak_mib", "mem_x_mha",
)  # fmt: skip


@dataclass
class BenchRow:
    """One line of the attention table: one implementation at one (batch, length)."""

    batch: int  # B
    seq_len: int  # T
    name: str  # one of IMPLEMENTATIONS
    time_ms: float  # median forward time
    peak_mib: float  # peak memory allocated during one forward (nan if unknown)
    time_x_mha: float = math.nan  # median over rounds of time / nn.MultiheadAttention's, same round
    time_x_min: float = math.nan  # the same against minimal
    mem_x_mha: float = math.nan  # peak_mib / nn.MultiheadAttention's peak_mib
    x_mha_q1: float = math.nan  # lower quartile of the paired ratios to nn.MultiheadAttention
    x_mha_q3: float = math.nan  # upper quartile of those ratios


class MinimalAttention(nn.Module):
    """The least a fused self-attention does (nanoGPT's): qkv linear, F.sdpa, output linear.

    Args:
        reference: an ``nn.MultiheadAttention`` whose weights it copies.
    """

    def __init__(self, reference: nn.MultiheadAttention) -> None:
        super().__init__()
        d, self.num_heads = reference.embed_dim, reference.num_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        with torch.no_grad():
            self.qkv.weight.copy_(reference.in_proj_weight)
            self.qkv.bias.copy_(reference.in_proj_bias)
            self.out.weight.copy_(reference.out_proj.weight)
            self.out.bias.copy_(reference.out_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Self-attention of ``x`` (B, T, d) -> (B, T, d)."""
        batch, length, d = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)  # (B, H, T, Dh) each
        y = F.scaled_dot_product_attention(q, k, v)  # (B, H, T, Dh)
        return self.out(y.transpose(1, 2).reshape(batch, length, d))  # (B, T, d)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_once(fn: Callable[[], object], device: torch.device, inner: int = 1) -> float:
    """Seconds per call, averaged over ``inner`` back-to-back calls (for sub-millisecond calls)."""
    _sync(device)
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / inner


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2: the profiler's C++ side logs start/stop lines there,
    which would otherwise land in notebook outputs (with timestamps)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory_mib(fn: Callable[[], object], device: str | torch.device = "cpu") -> float:
    """Peak MiB held by tensors that ``fn()`` allocates while it runs (the output included).

    CPU: rebuilt from :mod:`torch.profiler`'s allocation events (PyTorch's allocator only, not
    the process RSS). CUDA: ``max_memory_allocated`` minus what was allocated before. Other
    devices: nan.
    """
    return _peak_mib(fn, torch.device(device))


def median_seconds(fn: Callable[[], object], device: str | torch.device = "cpu", repeats: int = 3) -> float:
    """Median wall-clock seconds of ``repeats`` calls of ``fn`` (CUDA synchronised)."""
    dev = torch.device(device)
    return statistics.median(_time_once(fn, dev) for _ in range(max(1, repeats)))


def best_seconds(fn: Callable[[], object], device: str | torch.device = "cpu", repeats: int = 3) -> float:
    """Fastest wall-clock seconds of ``repeats`` calls of ``fn``: on a busy machine other work
    only ever adds time, so the minimum is the steadiest estimate of the call's own cost."""
    dev = torch.device(device)
    return min(_time_once(fn, dev) for _ in range(max(1, repeats)))


def _peak_mib(fn: Callable[[], object], device: torch.device) -> float:
    """Peak MiB held by tensors allocated while ``fn`` runs (see the module docstring)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    deltas = _cpu_memory_deltas(fn) if device.type == "cpu" else None
    if deltas is None:
        return math.nan
    held = peak = 0
    for delta in deltas:
        held += delta
        peak = max(peak, held)
    return peak / 2**20


def _cpu_memory_deltas(fn: Callable[[], object]) -> list[int] | None:
    """Bytes allocated (+) and freed (-) by PyTorch's CPU allocator while ``fn`` runs, in time
    order, from :mod:`torch.profiler`; None when the profiler cannot report them."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:  # the raw allocation (+bytes) and free (-bytes) events, in time order
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        return [e.nbytes() for e in sorted(events, key=lambda e: e.start_ns())]
    except AttributeError:  # an older or newer profiler without this API
        return None


def allocated_mib(fn: Callable[[], object], device: str | torch.device = "cpu") -> float:
    """Total MiB that ``fn()`` allocates while it runs, every allocation counted (frees are not
    subtracted): the memory traffic of allocating, e.g. a cache re-allocated at every step.

    CPU: from :mod:`torch.profiler`'s allocation events. CUDA: the growth of the caching
    allocator's ``allocated_bytes.all.allocated`` counter. Other devices: nan.
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_stats(dev).get("allocated_bytes.all.allocated", 0)
        fn()
        torch.cuda.synchronize(dev)
        return (torch.cuda.memory_stats(dev).get("allocated_bytes.all.allocated", 0) - before) / 2**20
    deltas = _cpu_memory_deltas(fn) if dev.type == "cpu" else None
    return math.nan if deltas is None else sum(d for d in deltas if d > 0) / 2**20


def _attention_calls(
    seq_len: int, batch: int, d_model: int, num_heads: int, device: torch.device
) -> dict[str, Callable[[], object]]:
    """The forward calls to compare, on the same input and the same weights."""
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device).eval()
    fused = MultiHeadAttention.from_torch(reference).eval()
    explicit = MultiHeadAttention.from_torch(reference).eval()
    explicit.fused = False
    minimal = MinimalAttention(reference).to(device).eval()
    x = torch.randn(batch, seq_len, d_model, device=device)  # (B, T, d_model)
    head_dim = d_model // num_heads
    q, k, v = torch.randn(
        3, batch, num_heads, seq_len, head_dim, device=device
    )  # (B, H, T, Dh) each
    calls = {
        "mtlib fused": lambda: fused(x),
        "mtlib explicit": lambda: explicit(x),
        MIN_NAME: lambda: minimal(x),
        MHA_NAME: lambda: reference(x, x, x, need_weights=False),
        "F.sdpa kernel": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    assert tuple(calls) == IMPLEMENTATIONS
    return calls


def _interleaved_times(
    calls: dict[str, Callable[[], Any]], device: torch.device, repeats: int, inner: int = 1
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Seconds of each call in each of ``repeats`` rounds, the calls taking turns.

    Within a round every call runs once (``inner`` times back to back, averaged), in an order
    that rotates from round to round, so a change in the machine's load hits every call alike
    and none always runs first. Returns the times and each call's last output.
    """
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, Any] = {}
    for r in range(max(1, repeats)):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            _sync(device)
            start = time.perf_counter()
            for _ in range(inner):
                outputs[name] = calls[name]()
            _sync(device)
            times[name].append((time.perf_counter() - start) / inner)
    return times, outputs


def bench_attention(
    sizes: Sequence[int] = (128, 512, 1024, 2048),
    repeats: int = 10,
    batch: int = 8,
    d_model: int = 512,
    num_heads: int = 8,
    device: str | torch.device | None = None,
    decode: bool = True,
) -> list[BenchRow]:
    """Time and measure the self-attention implementations at each size.

    Args:
        sizes: Sequence lengths ``T`` (at batch size ``batch``).
        repeats: Timed rounds at ``T <= 512`` (the implementations take turns in every round,
            in a rotating order); longer sequences get proportionally fewer (at least 5), to
            keep the whole run short. The decode step gets 3x as many rounds, each call
            averaging 50 runs.
        batch: Batch size ``B``.
        d_model: Model width.
        num_heads: Number of heads.
        device: Where to run. Defaults to CUDA when available, else CPU.
        decode: Also time the one-token decode step, ``B=1, T=1``, first.

    Returns:
        One :class:`BenchRow` per (size, implementation), in the order of ``IMPLEMENTATIONS``.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cases = ([(1, 1)] if decode else []) + [(batch, seq_len) for seq_len in sizes]
    rows = []
    for b, seq_len in cases:
        calls = _attention_calls(seq_len, b, d_model, num_heads, device)
        step = seq_len == 1
        n = 3 * repeats if step else max(5, repeats * 512 // max(seq_len, 512)) if repeats >= 5 else repeats
        with torch.inference_mode():
            for fn in calls.values():
                for _ in range(20 if step else 1):
                    fn()  # warm-up
            times, _ = _interleaved_times(calls, device, n, inner=50 if step else 1)
            peaks = {name: _peak_mib(fn, device) for name, fn in calls.items()}
        group = [BenchRow(b, seq_len, name, 1e3 * statistics.median(times[name]), peaks[name]) for name in calls]
        ref = next(row for row in group if row.name == MHA_NAME)
        for row in group:
            to_mha = _paired_ratios(times[row.name], times[MHA_NAME])
            row.time_x_mha = statistics.median(to_mha)
            row.x_mha_q1, row.x_mha_q3 = _quartiles(to_mha)
            row.time_x_min = statistics.median(_paired_ratios(times[row.name], times[MIN_NAME]))
            row.mem_x_mha = row.peak_mib / ref.peak_mib if ref.peak_mib > 0 else math.nan
        rows += group
    return rows


def _paired_ratios(mine: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Ratios of times taken in the same round (the calls take turns within a round)."""
    return [a / b for a, b in zip(mine, theirs, strict=True)]


def _quartiles(xs: Sequence[float]) -> tuple[float, float]:
    """Lower and upper quartile of 5 or more samples; below 5, the smallest and the largest."""
    if len(xs) < 5:
        return min(xs), max(xs)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q3


def format_table(rows: Sequence[BenchRow]) -> str:
    """Render rows as a fixed-width text table with the header ``COLUMNS``.

    ``x_mha`` is the median of the ratios to ``nn.MultiheadAttention`` within a round and
    ``x_mha_iqr`` their lower and upper quartiles (their range with fewer than 5 rounds).
    """
    b, t, name, ms, x_mha, iqr, x_min, mib, mem = COLUMNS
    header = (
        f"{b:>3}  {t:>5}  {name:<22}  {ms:>9}  {x_mha:>6}  {iqr:>11}  {x_min:>6}  {mib:>9}  {mem:>9}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        spread = f"{r.x_mha_q1:.2f}-{r.x_mha_q3:.2f}"
        lines.append(
            f"{r.batch:>3}  {r.seq_len:>5}  {r.name:<22}  {_fmt(r.time_ms):>9}  {r.time_x_mha:>6.2f}  "
            f"{spread:>11}  {r.time_x_min:>6.2f}  {_fmt(r.peak_mib):>9}  {r.mem_x_mha:>9.2f}"
        )
    return "\n".join(lines)


def _fmt(x: float) -> str:
    """About three significant digits, without scientific notation."""
    decimals = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 3
    return f"{x:.{decimals}f}"


# --------------------------------------------------------------------------------------------
# tiled: explicit vs tiled attention, one process per measurement
# --------------------------------------------------------------------------------------------

TILED_IMPLEMENTATIONS = ("explicit", "tiled", "F.sdpa")
TILED_COLUMNS = ("N", "implementation", "time_ms", "time_x_expl", "peak_mib", "mem_x_expl", "rss_mib")


@dataclass
class TiledRow:
    """One line of the tiled table: one attention implementation at one length ``N``."""

    seq_len: int  # N (queries = keys)
    name: str  # one of TILED_IMPLEMENTATIONS
    time_ms: float  # median time of one call
    peak_mib: float  # peak memory allocated during one call (nan if unknown)
    rss_mib: float  # growth of the process's peak resident memory in the first call (nan if unknown)
    time_x_expl: float = math.nan  # time_ms / explicit's time_ms at the same N
    mem_x_expl: float = math.nan  # peak_mib / explicit's peak_mib at the same N


def _attention_fn(
    name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int
) -> Callable[[], object]:
    if name == "explicit":
        return lambda: scaled_dot_product_attention(q, k, v)  # builds the (N, N) weights
    if name == "tiled":
        return lambda: tiled_attention(q, k, v, block_size=block_size)
    if name == "F.sdpa":
        return lambda: F.scaled_dot_product_attention(q, k, v)
    raise ValueError(f"implementation must be one of {TILED_IMPLEMENTATIONS}, got {name!r}")


def _rss_now_mib() -> float:
    """Current resident memory of this process (Linux), or nan."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return math.nan
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mib() -> float:
    """Peak resident memory of this process since it started (Linux ``VmHWM``).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that across ``fork`` and ``execve``, so a
    worker started by a process that once held gigabytes would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB -> MiB
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_attention_once(
    name: str,
    seq_len: int,
    *,
    head_dim: int = 64,
    batch: int = 1,
    heads: int = 1,
    block_size: int = 128,
    repeats: int = 3,
    device: str | torch.device | None = None,
) -> TiledRow:
    """Time and measure one attention implementation at one length, in this process.

    After a tiny call (one-time initialisation), the first call measures the growth of the
    peak resident memory (CPU; meaningful only in a fresh process, which is how
    :func:`bench_tiled` calls it), then :func:`peak_memory_mib` measures
    the allocator's peak, then ``repeats`` timed calls give the median.

    Args:
        name: One of ``TILED_IMPLEMENTATIONS``.
        seq_len: ``N``, the number of queries and of keys.
        head_dim: ``d`` of queries, keys and values.
        batch: ``B``.
        heads: ``H``.
        block_size: Block size of the tiled implementation.
        repeats: Timed calls.
        device: Where to run (default: :func:`mtlib.utils.get_device`).

    Returns:
        A :class:`TiledRow` without the ratios.
    """
    dev = utils.get_device(None if device is None else str(device))
    gen = torch.Generator().manual_seed(seq_len)
    q, k, v = torch.randn(3, batch, heads, seq_len, head_dim, generator=gen).to(dev)  # (B, H, N, d) each
    fn = _attention_fn(name, q, k, v, block_size)
    with torch.inference_mode():
        small = torch.randn(3, 1, 1, 16, head_dim).to(dev)  # (1, 1, 16, d) each
        _attention_fn(name, small[0], small[1], small[2], 8)()  # one-time initialisation, not counted
        rss = math.nan
        if dev.type == "cpu":
            before = _rss_now_mib()
            fn()
            rss = max(0.0, _peak_rss_mib() - before)
        else:
            fn()  # warm-up
        peak = _peak_mib(fn, dev)
        times = [_time_once(fn, dev) for _ in range(max(1, repeats))]
    return TiledRow(seq_len, name, 1e3 * statistics.median(times), peak, rss)


def bench_tiled(
    sizes: Sequence[int] = (128, 256, 512, 1024, 2048, 4096, 8192),
    implementations: Sequence[str] = TILED_IMPLEMENTATIONS,
    *,
    head_dim: int = 64,
    batch: int = 1,
    heads: int = 1,
    block_size: int = 128,
    repeats: int = 3,
    device: str | torch.device | None = None,
    threads: int = 1,
    isolate: bool = True,
) -> list[TiledRow]:
    """Explicit vs tiled (vs fused) attention at each length, each measurement in its own process.

    Args:
        sizes: Lengths ``N``.
        implementations: Which of ``TILED_IMPLEMENTATIONS`` to run; ``explicit`` is needed for
            the ratio columns.
        head_dim: ``d``.
        batch: ``B``.
        heads: ``H``.
        block_size: Block size of the tiled implementation.
        repeats: Timed calls per measurement (the median is kept).
        device: Where to run (default: :func:`mtlib.utils.get_device`).
        threads: CPU threads in each process.
        isolate: Run each measurement in a fresh ``python -m mtlib.bench tiled-worker``
            process (False: in this process, for quick tests; peaks may then mix).

    Returns:
        One :class:`TiledRow` per (size, implementation).
    """
    dev = utils.get_device(None if device is None else str(device))
    rows: list[TiledRow] = []
    for seq_len in sizes:
        group = []
        for name in implementations:
            settings = dict(head_dim=head_dim, batch=batch, heads=heads, block_size=block_size,
                            repeats=repeats)  # fmt: skip
            if isolate:
                command = [sys.executable, "-m", "mtlib.bench", "tiled-worker", "--impl", name,
                           "--n", str(seq_len), "--device", str(dev), "--threads", str(threads)]  # fmt: skip
                command += [f"--{key.replace('_', '-')}={value}" for key, value in settings.items()]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"the worker for {name} at N={seq_len} failed:\n{done.stderr}")
                group.append(TiledRow(**json.loads(done.stdout)))
            else:
                before = torch.get_num_threads()
                torch.set_num_threads(threads)
                try:
                    group.append(measure_attention_once(name, seq_len, device=dev, **settings))
                finally:
                    torch.set_num_threads(before)
        ref = next((row for row in group if row.name == "explicit"), None)
        for row in group:
            if ref is not None:
                row.time_x_expl = row.time_ms / ref.time_ms
                row.mem_x_expl = row.peak_mib / ref.peak_mib if ref.peak_mib > 0 else math.nan
        rows += group
    return rows


def format_tiled_table(rows: Sequence[TiledRow]) -> str:
    """Render tiled rows as a fixed-width table with the header ``TILED_COLUMNS``."""
    n, name, ms, x_t, mib, x_m, rss = TILED_COLUMNS
    header = f"{n:>5}  {name:<14}  {ms:>9}  {x_t:>11}  {mib:>9}  {x_m:>10}  {rss:>8}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.seq_len:>5}  {r.name:<14}  {_fmt(r.time_ms):>9}  {r.time_x_expl:>11.2f}  "
            f"{_fmt(r.peak_mib):>9}  {r.mem_x_expl:>10.3f}  {_fmt(r.rss_mib):>8}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# kv-cache: GPT generation with and without the cache (and transformers' generate)
# --------------------------------------------------------------------------------------------

GEN_COLUMNS = (
    "mode", "new_tokens", "time_ms", "range_ms", "ms_per_token", "x_cached", "x_hf", "x_hf_range",
    "tokens_equal",
)  # fmt: skip
LATENCY_COLUMNS = ("position", "mode", "ms_per_step")


@dataclass
class GenerationRow:
    """One generation mode (uncached, cached, transformers) at one length: median time and spread."""

    mode: str  # "mtlib uncached", "mtlib cached", "transformers cached"
    new_tokens: int  # tokens generated after the prompt
    time_ms: float  # median wall-clock time of the whole generate call over the repeats
    tokens_equal: bool  # same tokens as mtlib's cached generation
    low_ms: float = math.nan  # fastest repeat
    high_ms: float = math.nan  # slowest repeat
    repeats: int = 1  # timed generations
    x_cached: float = math.nan  # time_ms / mtlib cached's time_ms
    x_hf: float = math.nan  # median over rounds of (this run / transformers' run in the same round)
    x_hf_low: float = math.nan  # smallest of those paired ratios
    x_hf_high: float = math.nan  # largest of those paired ratios

    @property
    def ms_per_token(self) -> float:
        """Median time per new token."""
        return self.time_ms / max(1, self.new_tokens)


@dataclass
class LatencyRow:
    """The time of one generation step when ``position`` tokens are already processed."""

    position: int  # tokens before the new one (the cache length)
    mode: str  # "cached" (one token through the cache) or "uncached" (the whole prefix again)
    ms_per_step: float  # median over a few steps


def _kv_models(
    vocab_size: int, n_layer: int, d_model: int, num_heads: int, block_size: int, seed: int
) -> tuple[Any, nn.Module | None, list[str]]:
    """mtlib's GPT (from a random transformers GPT-2 when transformers is installed) and that
    GPT-2, or None with a note."""
    from mtlib.models.gpt import GPT, GPTConfig

    torch.manual_seed(seed)
    notes = []
    try:
        import transformers  # optional: only this benchmark row needs it
    except ImportError:
        notes.append("transformers is not installed: its generate row is skipped")
        transformers = None  # type: ignore[assignment]
    if transformers is None:
        config = GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer,
                           d_model=d_model, num_heads=num_heads, d_ff=4 * d_model, dropout=0.0)  # fmt: skip
        return GPT(config).eval(), None, notes
    transformers.logging.set_verbosity_error()
    hf_config = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=block_size, n_embd=d_model, n_layer=n_layer,
        n_head=num_heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )  # fmt: skip
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    notes.append(f"weights: a random transformers {transformers.__version__} GPT2LMHeadModel, loaded with GPT.from_hf")
    return GPT.from_hf(hf).eval(), hf, notes


def _step_latency(model: Any, prompt: torch.Tensor, position: int, steps: int, cached: bool) -> float:
    """Median seconds of one greedy step with ``position`` tokens before it."""
    device = prompt.device
    ids = prompt[:, :1].repeat(1, position)  # (1, position): the content does not change the cost
    times = []
    with torch.inference_mode():
        if cached:
            cache = model.new_cache()
            model(ids, cache=cache)  # fill the cache with `position` tokens
            token = ids[:, -1:]  # (1, 1)
            for _ in range(steps):
                times.append(_time_once(lambda: model(token, cache=cache), device))
        else:
            context = torch.cat([ids, ids[:, -1:]], dim=1)  # (1, position + 1)
            for _ in range(steps):
                times.append(_time_once(lambda: model(context, last_only=True), device))
    return statistics.median(times)


def bench_kv_cache(
    new_tokens: int | Sequence[int] = (32, 128, 512),
    *,
    prompt_len: int = 8,
    vocab_size: int = 1024,
    n_layer: int = 4,
    d_model: int = 256,
    num_heads: int = 4,
    block_size: int = 1024,
    repeats: int = 5,
    positions: Sequence[int] = (8, 128, 256, 384, 512),
    steps: int = 5,
    device: str | torch.device | None = None,
    threads: int = 1,
    seed: int = 0,
    hf: bool = True,
) -> tuple[list[GenerationRow], list[LatencyRow], list[str]]:
    """Cached vs uncached greedy generation with the same weights (and transformers' generate).

    At each length, mtlib's cached generation and transformers' take turns ``repeats`` times
    (after one warm-up each); their medians, fastest and slowest runs are reported, and
    ``x_hf`` is the median of the ratios of runs in the same round. The uncached generation
    runs once per length (it is the slow one, and its tokens are the check).

    Args:
        new_tokens: Tokens to generate after the prompt: one length or several.
        prompt_len: Length of the random prompt.
        vocab_size: Vocabulary size of the model.
        n_layer: Blocks.
        d_model: Model width (``d_ff = 4 d_model``).
        num_heads: Attention heads.
        block_size: Positions of the model.
        repeats: Timed rounds of the cached modes at each length.
        positions: Cache lengths at which one step's latency is measured.
        steps: Steps timed per position (the median is kept).
        device: Where to run (default: :func:`mtlib.utils.get_device`).
        threads: CPU threads.
        seed: Seed of the weights and the prompt.
        hf: Time transformers' generate when it is installed.

    Returns:
        ``(generation rows, latency rows, notes)``: for each length, the rows "mtlib
        uncached", "mtlib cached" and (with transformers) "transformers cached".
    """
    lengths = [new_tokens] if isinstance(new_tokens, int) else list(new_tokens)
    dev = utils.get_device(None if device is None else str(device))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _kv_cache_rows(lengths, prompt_len, vocab_size, n_layer, d_model, num_heads, block_size,
                              repeats, positions, steps, dev, seed, hf)  # fmt: skip
    finally:
        torch.set_num_threads(before)


def _kv_cache_rows(
    lengths: list[int], prompt_len: int, vocab_size: int, n_layer: int, d_model: int,
    num_heads: int, block_size: int, repeats: int, positions: Sequence[int], steps: int,
    dev: torch.device, seed: int, hf: bool,
) -> tuple[list[GenerationRow], list[LatencyRow], list[str]]:  # fmt: skip
    """The measurements of :func:`bench_kv_cache`, run with its thread count set."""
    model, reference, notes = _kv_models(vocab_size, n_layer, d_model, num_heads, block_size, seed)
    if not hf and reference is not None:
        reference = None
        notes = ["transformers row not requested (--no-hf)"]
    model.to(dev)
    if reference is not None:
        reference.to(dev)
    prompt = torch.randint(0, vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(seed)).to(dev)
    mask = torch.ones_like(prompt)
    rows: list[GenerationRow] = []
    for n in lengths:

        def mtlib_generate(n: int = n, cached: bool = True) -> torch.Tensor:
            out: torch.Tensor = model.generate(prompt, n, use_cache=cached)
            return out

        calls: dict[str, Callable[[], torch.Tensor]] = {"mtlib cached": mtlib_generate}
        if reference is not None:

            def hf_generate(n: int = n) -> torch.Tensor:
                with torch.inference_mode():
                    out: torch.Tensor = reference.generate(  # type: ignore[operator]
                        prompt, attention_mask=mask, max_new_tokens=n,
                        min_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0,
                    )  # fmt: skip
                return out

            calls["transformers cached"] = hf_generate
        for fn in calls.values():
            fn()  # warm-up
        times, outputs = _interleaved_times(calls, dev, repeats)
        cached = outputs["mtlib cached"]
        uncached_s, uncached = _interleaved_times({"u": lambda: mtlib_generate(cached=False)}, dev, 1)
        one_ms = 1e3 * uncached_s["u"][0]
        group = [
            GenerationRow("mtlib uncached", n, one_ms, torch.equal(uncached["u"], cached), low_ms=one_ms, high_ms=one_ms)
        ]
        for name, ts in times.items():
            ms = [1e3 * t for t in ts]
            group.append(GenerationRow(
                name, n, statistics.median(ms), torch.equal(outputs[name], cached),
                low_ms=min(ms), high_ms=max(ms), repeats=len(ms),
            ))  # fmt: skip
        for row in group:
            row.x_cached = row.time_ms / group[1].time_ms  # a ratio of medians (uncached: one run)
            if reference is None:
                continue
            if row.mode in times:  # timed in the rounds: paired with transformers' run of each round
                ratios = _paired_ratios(times[row.mode], times["transformers cached"])
                row.x_hf = statistics.median(ratios)
                row.x_hf_low, row.x_hf_high = min(ratios), max(ratios)
            else:  # the uncached run: once, against transformers' median
                row.x_hf = row.x_hf_low = row.x_hf_high = row.time_ms / group[-1].time_ms
        rows += group
    latency = [
        LatencyRow(p, mode, 1e3 * _step_latency(model, prompt, p, steps, mode == "cached"))
        for p in positions
        if p < block_size
        for mode in ("cached", "uncached")
    ]
    return rows, latency, notes


def format_kv_tables(rows: Sequence[GenerationRow], latency: Sequence[LatencyRow], notes: Sequence[str]) -> str:
    """The generation table, the latency table and the notes, as fixed-width text.

    ``time_ms`` is the median, ``range_ms`` the fastest and slowest repeat, ``x_hf`` the median
    paired ratio to transformers and ``x_hf_range`` the smallest and largest.
    """
    mode, n, ms, spread, per, x, x_hf, x_spread, eq = GEN_COLUMNS
    header = (
        f"{mode:<20}  {n:>10}  {ms:>9}  {spread:>15}  {per:>12}  {x:>8}  {x_hf:>6}  "
        f"{x_spread:>11}  {eq:>12}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        spread = f"{_fmt(r.low_ms)}-{_fmt(r.high_ms)}" if r.repeats > 1 else "(one run)"
        x_spread = f"{r.x_hf_low:.2f}-{r.x_hf_high:.2f}" if r.repeats > 1 and not math.isnan(r.x_hf_low) else ""
        lines.append(
            f"{r.mode:<20}  {r.new_tokens:>10}  {_fmt(r.time_ms):>9}  {spread:>15}  {_fmt(r.ms_per_token):>12}  "
            f"{r.x_cached:>8.2f}  {r.x_hf:>6.2f}  {x_spread:>11}  {r.tokens_equal!s:>12}"
        )
    pos, lmode, step = LATENCY_COLUMNS
    header = f"{pos:>8}  {lmode:<9}  {step:>11}"
    lines += ["", header, "-" * len(header)]
    lines += [f"{r.position:>8}  {r.mode:<9}  {_fmt(r.ms_per_step):>11}" for r in latency]
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines)


def _environment(device: str | torch.device) -> dict[str, Any]:
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads()}


# --------------------------------------------------------------------------------------------
# record: the three benchmarks at their defaults, stored with the package for the book to print
# --------------------------------------------------------------------------------------------

RECORD_PATH = Path(__file__).parent / "experiments" / "bench_record.json"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
            f.seek(0)
            avx512 = "avx512f" in f.read()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores, AVX-512 {'yes' if avx512 else 'no'}"


def record(path: str | Path = RECORD_PATH, device: str = "cpu", *, quick: bool = False) -> dict[str, Any]:
    """Run ``attention``, ``tiled`` and ``kv-cache`` at their defaults and write one JSON file.

    Chapter 12 prints its tables from this file (``python -m mtlib.bench record`` rewrites it),
    so the page shows one recorded run, with the machine it ran on, rather than numbers typed in.

    Args:
        path: Where to write.
        device: Where to run.
        quick: Tiny sizes (for tests), the ``--quick`` settings of each subcommand.

    Returns:
        The document written.
    """
    started = time.strftime("%Y-%m-%d")
    attention_threads = torch.get_num_threads()  # bench_attention runs with the process's setting
    kv_threads = tiled_threads = 1  # the defaults of bench_kv_cache and bench_tiled
    if quick:
        attention = bench_attention([8, 16], 2, 2, 32, 4, device)
    else:
        attention = bench_attention(device=device)
    if quick:
        tiled = bench_tiled([64, 256], repeats=1, block_size=32, device=device, threads=tiled_threads, isolate=False)
        generation, latency, notes = bench_kv_cache(
            [12], prompt_len=3, vocab_size=50, n_layer=2, d_model=24, num_heads=2, repeats=2,
            positions=[2, 10], steps=2, device=device, threads=kv_threads,
        )  # fmt: skip
    else:
        tiled = bench_tiled(device=device, threads=tiled_threads)
        generation, latency, notes = bench_kv_cache(device=device, threads=kv_threads)
    doc = {
        "recorded": started,
        "machine": _cpu_model(),
        "torch": torch.__version__,
        "device": device,
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "attention": {"threads": attention_threads, "rows": [_jsonable(r) for r in attention]},
        "tiled": {"threads": tiled_threads, "rows": [_jsonable(r) for r in tiled]},
        "kv_cache": {
            "threads": kv_threads,
            "generation": [_jsonable(r) for r in generation],
            "latency": [_jsonable(r) for r in latency],
            "notes": notes,
        },
    }
    Path(path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    return doc


def _jsonable(row: Any) -> dict[str, Any]:
    """A row as a dict, NaN (no measurement) as null: the file stays strict JSON."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in asdict(row).items()}


def _rows(cls: type, dicts: Sequence[dict[str, Any]]) -> list[Any]:
    names = {f.name for f in fields(cls)}
    return [cls(**{k: math.nan if v is None else v for k, v in d.items() if k in names}) for d in dicts]


def recorded(path: str | Path = RECORD_PATH) -> dict[str, Any]:
    """The run stored by :func:`record`, with its rows as :class:`BenchRow`, :class:`TiledRow`,
    :class:`GenerationRow` and :class:`LatencyRow` (print them with the ``format_*`` functions).

    Returns:
        A dict with the run's ``recorded`` (date), ``machine``, ``torch``, ``device`` and
        ``mkl_cbwr``; its rows under ``attention``, ``tiled``, ``generation`` and ``latency``;
        the kv-cache ``notes``; and the ``threads`` of each benchmark.
    """
    doc = json.loads(Path(path).read_text())
    return {
        **{k: doc[k] for k in ("recorded", "machine", "torch", "device", "mkl_cbwr")},
        "attention": _rows(BenchRow, doc["attention"]["rows"]),
        "tiled": _rows(TiledRow, doc["tiled"]["rows"]),
        "generation": _rows(GenerationRow, doc["kv_cache"]["generation"]),
        "latency": _rows(LatencyRow, doc["kv_cache"]["latency"]),
        "notes": doc["kv_cache"]["notes"],
        "threads": {k: doc[k]["threads"] for k in ("attention", "tiled", "kv_cache")},
    }


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mtlib.bench", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    att = commands.add_parser("attention", help="multi-head self-attention: mtlib vs PyTorch")
    att.add_argument(
        "--sizes", type=int, nargs="+", default=[128, 512, 1024, 2048], help="sequence lengths T"
    )
    att.add_argument(
        "--repeats", type=int, default=10, help="timed calls at T <= 512 (fewer above)"
    )
    att.add_argument("--batch", type=int, default=8, help="batch size B")
    att.add_argument("--d-model", type=int, default=512, help="model width")
    att.add_argument("--heads", type=int, default=8, help="number of heads")
    att.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    att.add_argument("--no-decode", action="store_true", help="skip the B=1, T=1 decode step")
    att.add_argument(
        "--quick", action="store_true", help="tiny sizes, for tests: B=2, d_model=32, h=4, T=8,16"
    )
    att.add_argument("--json", action="store_true", help="print JSON instead of a table")

    tiled = commands.add_parser("tiled", help="explicit vs tiled attention: time and peak memory")
    tiled.add_argument(
        "--sizes", type=int, nargs="+", default=[128, 256, 512, 1024, 2048, 4096, 8192],
        help="lengths N",
    )  # fmt: skip
    tiled.add_argument(
        "--impls", nargs="+", default=list(TILED_IMPLEMENTATIONS), choices=TILED_IMPLEMENTATIONS,
        help="implementations to run",
    )  # fmt: skip
    tiled.add_argument("--quick", action="store_true", help="tiny sizes, for tests: N=64,256")
    tiled.add_argument("--in-process", action="store_true", help="no worker processes (peaks may mix)")
    worker = commands.add_parser("tiled-worker")  # one measurement, JSON on stdout (internal)
    worker.add_argument("--impl", required=True, choices=TILED_IMPLEMENTATIONS)
    worker.add_argument("--n", type=int, required=True)
    for sub in (tiled, worker):
        sub.add_argument("--head-dim", type=int, default=64, help="d")
        sub.add_argument("--batch", type=int, default=1, help="B")
        sub.add_argument("--heads", type=int, default=1, help="H")
        sub.add_argument("--block-size", type=int, default=128, help="tiled block size")
        sub.add_argument("--repeats", type=int, default=3, help="timed calls (median kept)")
        sub.add_argument("--device", default=None, help="cpu or cuda (default: MTLIB_DEVICE or the best)")
        sub.add_argument("--threads", type=int, default=1, help="CPU threads")
    tiled.add_argument("--json", action="store_true", help="print JSON instead of a table")

    kv = commands.add_parser("kv-cache", help="GPT generation with and without the KV cache")
    kv.add_argument(
        "--new-tokens", type=int, nargs="+", default=[32, 128, 512], help="tokens generated (one or more lengths)"
    )
    kv.add_argument("--prompt-len", type=int, default=8, help="prompt tokens")
    kv.add_argument("--vocab", type=int, default=1024, help="vocabulary size")
    kv.add_argument("--layers", type=int, default=4, help="blocks")
    kv.add_argument("--d-model", type=int, default=256, help="model width")
    kv.add_argument("--heads", type=int, default=4, help="attention heads")
    kv.add_argument(
        "--repeats", type=int, default=5, help="timed rounds of the cached modes, taking turns (median kept)"
    )
    kv.add_argument(
        "--positions", type=int, nargs="+", default=[8, 128, 256, 384, 512],
        help="cache lengths for the per-step latency",
    )  # fmt: skip
    kv.add_argument("--steps", type=int, default=5, help="timed steps per position")
    kv.add_argument("--no-hf", action="store_true", help="skip transformers' generate")
    kv.add_argument("--quick", action="store_true", help="tiny sizes, for tests")
    kv.add_argument("--device", default=None, help="cpu or cuda (default: MTLIB_DEVICE or the best)")
    kv.add_argument("--threads", type=int, default=1, help="CPU threads")
    kv.add_argument("--json", action="store_true", help="print JSON instead of a table")

    rec = commands.add_parser(
        "record", help="run the three at their defaults and store them for chapter 12"
    )
    rec.add_argument("--out", default=str(RECORD_PATH), help="where to write the JSON")
    rec.add_argument("--device", default="cpu", help="cpu or cuda")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> str:
    """Run the benchmark named on the command line, print its table (or JSON) and return it."""
    args = _parse_args(argv)
    if args.command == "tiled-worker":
        torch.set_num_threads(args.threads)
        row = measure_attention_once(
            args.impl, args.n, head_dim=args.head_dim, batch=args.batch, heads=args.heads,
            block_size=args.block_size, repeats=args.repeats, device=args.device,
        )  # fmt: skip
        text = json.dumps(asdict(row))
    elif args.command == "tiled":
        if args.quick:
            args.sizes, args.repeats, args.block_size = [64, 256], 1, 32
        rows = bench_tiled(
            args.sizes, args.impls, head_dim=args.head_dim, batch=args.batch, heads=args.heads,
            block_size=args.block_size, repeats=args.repeats, device=args.device,
            threads=args.threads, isolate=not args.in_process,
        )  # fmt: skip
        device = utils.get_device(args.device)
        if args.json:
            text = json.dumps({**_environment(device), "rows": [asdict(r) for r in rows]})
        else:
            title = (
                f"attention of (B={args.batch}, H={args.heads}, N, d={args.head_dim}), "
                f"tiled block {args.block_size}, one process each, device={device}, "
                f"torch {torch.__version__}, {args.threads} threads"
            )
            text = f"{title}\n{format_tiled_table(rows)}"
    elif args.command == "record":
        doc = record(args.out, args.device)
        text = f"recorded {doc['recorded']} on {doc['machine']} -> {args.out}"
    elif args.command == "kv-cache":
        if args.quick:
            args.new_tokens, args.prompt_len, args.vocab, args.layers = [12], 3, 50, 2
            args.d_model, args.heads, args.repeats, args.positions, args.steps = 24, 2, 2, [2, 10], 2
        gen, latency, notes = bench_kv_cache(
            args.new_tokens, prompt_len=args.prompt_len, vocab_size=args.vocab,
            n_layer=args.layers, d_model=args.d_model, num_heads=args.heads,
            repeats=args.repeats, positions=args.positions, steps=args.steps,
            device=args.device, threads=args.threads, hf=not args.no_hf,
        )  # fmt: skip
        device = utils.get_device(args.device)
        if args.json:
            text = json.dumps({
                **_environment(device),
                "generation": [{**asdict(r), "ms_per_token": r.ms_per_token} for r in gen],
                "latency": [asdict(r) for r in latency],
                "notes": notes,
            })  # fmt: skip
        else:
            title = (
                f"greedy generation, GPT {args.layers} layers, d_model={args.d_model}, "
                f"h={args.heads}, vocab {args.vocab}, prompt {args.prompt_len}, "
                f"device={device}, torch {torch.__version__}, {args.threads} threads"
            )
            text = f"{title}\n{format_kv_tables(gen, latency, notes)}"
    else:
        if args.quick:
            args.sizes, args.repeats, args.batch, args.d_model, args.heads = [8, 16], 2, 2, 32, 4
        att_rows = bench_attention(
            args.sizes, args.repeats, args.batch, args.d_model, args.heads, args.device,
            decode=not args.no_decode,
        )  # fmt: skip
        name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if args.json:
            text = json.dumps({**_environment(name), "rows": [asdict(r) for r in att_rows]})
        else:
            title = (
                f"attention forward, d_model={args.d_model}, h={args.heads}, device={name}, "
                f"torch {torch.__version__}, {torch.get_num_threads()} threads"
            )
            text = f"{title}\n{format_table(att_rows)}"
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
