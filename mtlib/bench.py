"""Benchmarks behind the numbers the book quotes: ``python -m mtlib.bench <name>``.

``python -m mtlib.bench attention`` times self-attention forward passes (``B=8``,
``d_model=512``, ``h=8``, ``T`` in 128, 512, 1024, 2048) for:

- ``mtlib fused``: :class:`mtlib.attention.MultiHeadAttention` with ``fused=True``
- ``mtlib explicit``: the same module with ``fused=False`` (it builds the ``(T, T)`` weights)
- ``nn.MultiheadAttention``: PyTorch's module (``batch_first=True``, ``need_weights=False``),
  which in inference mode takes its own fused "fast path"
- ``F.sdpa kernel``: :func:`torch.nn.functional.scaled_dot_product_attention` alone, on
  ready-made ``(B, H, T, Dh)`` tensors (no projections): a lower bound for the others

What is measured:

- ``time_ms``: the median wall-clock time of one forward call, under
  :func:`torch.inference_mode`, in eval mode, after one warm-up call. Implementations are
  timed in turn within each repeat, so slow drifts of the machine hit all of them alike.
- ``peak_mib``: the peak of memory held by tensors allocated *during* one forward call
  (inputs and weights, allocated before, are not counted; the output is). On CUDA this is
  ``torch.cuda.max_memory_allocated`` minus the memory allocated before the call. On CPU
  it is rebuilt from the allocation and free events that :mod:`torch.profiler` records
  (``profile_memory=True``): only memory from PyTorch's CPU allocator, not the process RSS.
  ``nan`` when the profiler cannot report it.
- ``x_mha``: ratios to ``nn.MultiheadAttention`` at the same ``T`` (below 1 = faster/smaller).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mtlib.attention import MultiHeadAttention

__all__ = ["BenchRow", "bench_attention", "format_table", "main"]

MHA_NAME = "nn.MultiheadAttention"
IMPLEMENTATIONS = ("mtlib fused", "mtlib explicit", MHA_NAME, "F.sdpa kernel")
COLUMNS = ("T", "implementation", "time_ms", "time_x_mha", "peak_mib", "mem_x_mha")


@dataclass
class BenchRow:
    """One line of the attention table: one implementation at one sequence length."""

    seq_len: int  # T
    name: str  # one of IMPLEMENTATIONS
    time_ms: float  # median forward time
    peak_mib: float  # peak memory allocated during one forward (nan if unknown)
    time_x_mha: float = math.nan  # time_ms / nn.MultiheadAttention's time_ms
    mem_x_mha: float = math.nan  # peak_mib / nn.MultiheadAttention's peak_mib


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_once(fn: Callable[[], object], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


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


def _peak_mib(fn: Callable[[], object], device: torch.device) -> float:
    """Peak MiB held by tensors allocated while ``fn`` runs (see the module docstring)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    if device.type != "cpu":
        return math.nan
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:  # the raw allocation (+bytes) and free (-bytes) events, in time order
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        deltas = [e.nbytes() for e in sorted(events, key=lambda e: e.start_ns())]
    except AttributeError:  # an older or newer profiler without this API
        return math.nan
    held = peak = 0
    for delta in deltas:
        held += delta
        peak = max(peak, held)
    return peak / 2**20


def _attention_calls(
    seq_len: int, batch: int, d_model: int, num_heads: int, device: torch.device
) -> dict[str, Callable[[], object]]:
    """The four forward calls to compare, on the same input and the same weights."""
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True).to(device).eval()
    fused = MultiHeadAttention.from_torch(reference).eval()
    explicit = MultiHeadAttention.from_torch(reference).eval()
    explicit.fused = False
    x = torch.randn(batch, seq_len, d_model, device=device)  # (B, T, d_model)
    head_dim = d_model // num_heads
    q, k, v = torch.randn(
        3, batch, num_heads, seq_len, head_dim, device=device
    )  # (B, H, T, Dh) each
    calls = {
        "mtlib fused": lambda: fused(x),
        "mtlib explicit": lambda: explicit(x),
        MHA_NAME: lambda: reference(x, x, x, need_weights=False),
        "F.sdpa kernel": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    assert tuple(calls) == IMPLEMENTATIONS
    return calls


def bench_attention(
    sizes: Sequence[int] = (128, 512, 1024, 2048),
    repeats: int = 10,
    batch: int = 8,
    d_model: int = 512,
    num_heads: int = 8,
    device: str | torch.device | None = None,
) -> list[BenchRow]:
    """Time and measure the self-attention implementations at each sequence length.

    Args:
        sizes: Sequence lengths ``T``.
        repeats: Timed calls per implementation at ``T <= 512``; longer sequences get
            proportionally fewer (at least 3), to keep the whole run short.
        batch: Batch size ``B``.
        d_model: Model width.
        num_heads: Number of heads.
        device: Where to run. Defaults to CUDA when available, else CPU.

    Returns:
        One :class:`BenchRow` per (size, implementation), in the order of ``IMPLEMENTATIONS``.
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = []
    for seq_len in sizes:
        calls = _attention_calls(seq_len, batch, d_model, num_heads, device)
        n = max(3, repeats * 512 // max(seq_len, 512)) if repeats >= 3 else repeats
        times: dict[str, list[float]] = {name: [] for name in calls}
        with torch.inference_mode():
            for fn in calls.values():
                fn()  # warm-up
            for _ in range(n):
                for name, fn in calls.items():
                    times[name].append(_time_once(fn, device))
            peaks = {name: _peak_mib(fn, device) for name, fn in calls.items()}
        group = [
            BenchRow(seq_len, name, 1e3 * statistics.median(times[name]), peaks[name])
            for name in calls
        ]
        ref = next(row for row in group if row.name == MHA_NAME)
        for row in group:
            row.time_x_mha = row.time_ms / ref.time_ms
            row.mem_x_mha = row.peak_mib / ref.peak_mib if ref.peak_mib > 0 else math.nan
        rows += group
    return rows


def format_table(rows: Sequence[BenchRow]) -> str:
    """Render rows as a fixed-width text table with the header ``COLUMNS``."""
    header = f"{COLUMNS[0]:>6}  {COLUMNS[1]:<22}  {COLUMNS[2]:>10}  {COLUMNS[3]:>10}  {COLUMNS[4]:>9}  {COLUMNS[5]:>9}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.seq_len:>6}  {r.name:<22}  {_fmt(r.time_ms):>10}  {r.time_x_mha:>10.2f}  {_fmt(r.peak_mib):>9}  {r.mem_x_mha:>9.2f}"
        )
    return "\n".join(lines)


def _fmt(x: float) -> str:
    """About three significant digits, without scientific notation."""
    decimals = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 3
    return f"{x:.{decimals}f}"


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
    att.add_argument(
        "--quick", action="store_true", help="tiny sizes, for tests: B=2, d_model=32, h=4, T=8,16"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> str:
    """Run the benchmark named on the command line, print its table and return it."""
    args = _parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.batch, args.d_model, args.heads = [8, 16], 2, 2, 32, 4
    rows = bench_attention(
        args.sizes, args.repeats, args.batch, args.d_model, args.heads, args.device
    )
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    title = (
        f"attention forward, B={args.batch}, d_model={args.d_model}, h={args.heads}, device={device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    table = f"{title}\n{format_table(rows)}"
    print(table)
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
