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
  timed in turn within each repeat, so slow drifts of the machine hit all of them alike.
- ``peak_mib``: the peak of memory held by tensors allocated *during* one forward call
  (inputs and weights, allocated before, are not counted; the output is). On CUDA this is
  ``torch.cuda.max_memory_allocated`` minus the memory allocated before the call. On CPU
  it is rebuilt from the allocation and free events that :mod:`torch.profiler` records
  (``profile_memory=True``): only memory from PyTorch's CPU allocator, not the process RSS.
  ``nan`` when the profiler cannot report it.
- ``x_mha``, ``x_min``: ratios to ``nn.MultiheadAttention`` and to ``minimal`` at the same
  ``B`` and ``T`` (below 1 = faster/smaller). The goal for ``mtlib fused``: ``x_min <= 1.10``
  and ``x_mha <= 1`` at every size, the decode step included.
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

__all__ = ["BenchRow", "MinimalAttention", "bench_attention", "format_table", "main"]

MHA_NAME = "nn.MultiheadAttention"
MIN_NAME = "minimal"
IMPLEMENTATIONS = ("mtlib fused", "mtlib explicit", MIN_NAME, MHA_NAME, "F.sdpa kernel")
COLUMNS = ("B", "T", "implementation", "time_ms", "x_mha", "x_min", "peak_mib", "mem_x_mha")


@dataclass
class BenchRow:
    """One line of the attention table: one implementation at one (batch, length)."""

    batch: int  # B
    seq_len: int  # T
    name: str  # one of IMPLEMENTATIONS
    time_ms: float  # median forward time
    peak_mib: float  # peak memory allocated during one forward (nan if unknown)
    time_x_mha: float = math.nan  # time_ms / nn.MultiheadAttention's time_ms
    time_x_min: float = math.nan  # time_ms / minimal's time_ms
    mem_x_mha: float = math.nan  # peak_mib / nn.MultiheadAttention's peak_mib


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
        repeats: Timed samples per implementation at ``T <= 512``; longer sequences get
            proportionally fewer (at least 3), to keep the whole run short. The decode step
            gets 3x as many samples, each averaging 50 calls.
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
        n = 3 * repeats if step else max(3, repeats * 512 // max(seq_len, 512)) if repeats >= 3 else repeats
        times: dict[str, list[float]] = {name: [] for name in calls}
        with torch.inference_mode():
            for fn in calls.values():
                for _ in range(20 if step else 1):
                    fn()  # warm-up
            for _ in range(n):
                for name, fn in calls.items():
                    times[name].append(_time_once(fn, device, 50 if step else 1))
            peaks = {name: _peak_mib(fn, device) for name, fn in calls.items()}
        group = [BenchRow(b, seq_len, name, 1e3 * statistics.median(times[name]), peaks[name]) for name in calls]
        ref = next(row for row in group if row.name == MHA_NAME)
        low = next(row for row in group if row.name == MIN_NAME)
        for row in group:
            row.time_x_mha = row.time_ms / ref.time_ms
            row.time_x_min = row.time_ms / low.time_ms
            row.mem_x_mha = row.peak_mib / ref.peak_mib if ref.peak_mib > 0 else math.nan
        rows += group
    return rows


def format_table(rows: Sequence[BenchRow]) -> str:
    """Render rows as a fixed-width text table with the header ``COLUMNS``."""
    b, t, name, ms, x_mha, x_min, mib, mem = COLUMNS
    header = f"{b:>3}  {t:>5}  {name:<22}  {ms:>9}  {x_mha:>6}  {x_min:>6}  {mib:>9}  {mem:>9}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.batch:>3}  {r.seq_len:>5}  {r.name:<22}  {_fmt(r.time_ms):>9}  {r.time_x_mha:>6.2f}  "
            f"{r.time_x_min:>6.2f}  {_fmt(r.peak_mib):>9}  {r.mem_x_mha:>9.2f}"
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
    att.add_argument("--no-decode", action="store_true", help="skip the B=1, T=1 decode step")
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
        args.sizes, args.repeats, args.batch, args.d_model, args.heads, args.device, decode=not args.no_decode
    )
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    title = (
        f"attention forward, d_model={args.d_model}, h={args.heads}, device={device}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    table = f"{title}\n{format_table(rows)}"
    print(table)
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
