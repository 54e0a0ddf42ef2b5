"""Tests of mtlib.bench: the quick mode runs in-process and prints the expected table."""

import math

import pytest
import torch
from torch import nn

from mtlib import bench
from tests.helpers import TOL


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_quick_attention_table(capsys: pytest.CaptureFixture[str]) -> None:
    table = bench.main(["attention", "--quick", "--device", "cpu"])
    printed = capsys.readouterr().out
    assert printed.strip() == table.strip()
    lines = table.splitlines()
    assert lines[0].startswith("attention forward, d_model=32, h=4, device=cpu")
    assert lines[1].split() == list(bench.COLUMNS)
    rows = [line.split(maxsplit=2) for line in lines[3:]]
    assert len(rows) == 3 * len(bench.IMPLEMENTATIONS)  # the decode step, then sizes 8 and 16
    n = len(bench.IMPLEMENTATIONS)
    assert [(int(r[0]), int(r[1])) for r in rows] == [(1, 1)] * n + [(2, 8)] * n + [(2, 16)] * n
    for row, name in zip(rows, bench.IMPLEMENTATIONS * 3, strict=True):
        assert row[2].startswith(name)
        numbers = [float(x) for x in row[2][len(name) :].split()]
        assert len(numbers) == 5 and numbers[0] > 0  # time_ms, x_mha, x_min, peak_mib, mem_x_mha
        assert all(math.isfinite(x) for x in numbers)  # on the CPU the profiler reports memory


def test_bench_attention_rows() -> None:
    rows = bench.bench_attention(
        sizes=[6], repeats=3, batch=3, d_model=20, num_heads=5, device="cpu", decode=False
    )
    assert [r.name for r in rows] == list(bench.IMPLEMENTATIONS)
    by_name = {r.name: r for r in rows}
    reference, minimal = by_name[bench.MHA_NAME], by_name[bench.MIN_NAME]
    assert reference.time_x_mha == 1.0 and minimal.time_x_min == 1.0
    assert reference.mem_x_mha == 1.0  # nan would mean the profiler reported nothing
    for row in rows:
        assert (row.batch, row.seq_len) == (3, 6) and row.time_ms > 0
        assert math.isclose(row.time_x_mha, row.time_ms / reference.time_ms)
        assert math.isclose(row.time_x_min, row.time_ms / minimal.time_ms)
        assert row.peak_mib > 0 and math.isfinite(row.mem_x_mha)
    # the explicit path allocates at least its (B, H, T, T) weights and its (B, T, d_model) output
    explicit = by_name["mtlib explicit"].peak_mib
    assert explicit * 2**20 >= 4 * (3 * 5 * 6 * 6 + 3 * 6 * 20)


def test_cpu_peak_memory_of_known_allocations() -> None:
    """The profiler-based measure is exact for one float32 tensor of 1 MiB, and for two."""
    cpu = torch.device("cpu")
    assert bench._peak_mib(lambda: None, cpu) == 0.0
    assert bench._peak_mib(lambda: torch.ones(2**18), cpu) == 1.0
    assert 2.0 <= bench._peak_mib(lambda: torch.ones(2**18) + 1, cpu) < 2.01  # both alive at once


def test_bench_attention_decode_step() -> None:
    rows = bench.bench_attention(sizes=[], repeats=1, d_model=20, num_heads=5, device="cpu")
    assert [r.name for r in rows] == list(bench.IMPLEMENTATIONS)
    assert all((r.batch, r.seq_len) == (1, 1) and r.time_ms > 0 for r in rows)


def test_minimal_attention_matches_torch() -> None:
    reference = nn.MultiheadAttention(20, 5, batch_first=True).eval()
    x = torch.randn(3, 6, 20)
    torch.testing.assert_close(
        bench.MinimalAttention(reference)(x),
        reference(x, x, x, need_weights=False)[0],
        **TOL[torch.float32],
    )


def test_format_table_handles_nan() -> None:
    row = bench.BenchRow(
        batch=2, seq_len=4, name="x", time_ms=1234.5, peak_mib=math.nan, time_x_mha=0.5
    )
    line = bench.format_table([row]).splitlines()[-1]
    assert line.split() == ["2", "4", "x", "1234", "0.50", "nan", "nan", "nan"]


def test_cli_requires_a_benchmark_name() -> None:
    with pytest.raises(SystemExit):
        bench.main([])
