"""Tests of mtlib.bench: the quick mode runs in-process and prints the expected table."""

import json
import math
import subprocess
import sys
from pathlib import Path

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
        time_ms, x_mha, iqr, *numbers = row[2][len(name) :].split()
        q1, q3 = (float(x) for x in iqr.split("-"))  # two rounds here: their range
        assert float(time_ms) > 0 and q1 > 0 and q3 > 0 and float(x_mha) > 0
        assert len(numbers) == 3  # x_min, peak_mib, mem_x_mha
        assert all(math.isfinite(float(x)) for x in numbers)  # on the CPU the profiler reports memory


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
    assert line.split() == ["2", "4", "x", "1234", "0.50", "nan-nan", "nan", "nan", "nan"]


def test_ratios_are_paired_by_round_and_summarised_by_quartiles() -> None:
    # a slow round (the machine busy) slows both calls: the paired ratio ignores it,
    # the ratio of the medians would not
    mine, theirs = [1.0, 1.1, 9.0, 1.2], [1.0, 1.0, 10.0, 1.0]
    assert bench._paired_ratios(mine, theirs) == [1.0, 1.1, 0.9, 1.2]
    assert bench._quartiles([1.2, 0.9, 1.0, 1.1, 1.4]) == pytest.approx((1.0, 1.2))  # inclusive
    assert bench._quartiles([0.9, 1.0, 1.1, 1.2]) == (0.9, 1.2)  # below 5 samples: the range
    assert bench._quartiles([2.0]) == (2.0, 2.0)


def _canned_times(monkeypatch: pytest.MonkeyPatch, canned: dict[str, list[float]]) -> None:
    """Run every call once for its output, but report ``canned`` seconds (by call name)."""
    real = bench._interleaved_times

    def fake(calls, device, repeats, inner=1):  # type: ignore[no-untyped-def]
        _, outputs = real(calls, device, 1)
        return {name: canned.get(name, [1.0] * repeats) for name in calls}, outputs

    monkeypatch.setattr(bench, "_interleaved_times", fake)


def test_kv_cache_ratio_is_the_median_of_rounds_paired_with_transformers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("transformers")
    # round 3 was slow for both (a busy machine): paired ratios 1.0, 1.1, 0.9 -> median 1.0,
    # where the ratio of the medians (1.1 / 1.0) would say mtlib is 10% slower
    _canned_times(monkeypatch, {"mtlib cached": [1.0, 1.1, 9.0], "transformers cached": [1.0, 1.0, 10.0], "u": [4.0]})
    gen, _, _ = bench.bench_kv_cache(
        [5], prompt_len=3, vocab_size=40, n_layer=1, d_model=16, num_heads=2, repeats=3,
        positions=[], device="cpu",
    )  # fmt: skip
    uncached, cached, hf = gen
    assert cached.x_hf == pytest.approx(1.0) and (cached.x_hf_low, cached.x_hf_high) == pytest.approx((0.9, 1.1))
    assert cached.time_ms == pytest.approx(1100.0) and (cached.low_ms, cached.high_ms) == pytest.approx((1000.0, 9000.0))
    assert uncached.x_hf == pytest.approx(4.0)  # one run against transformers' median: no range
    assert uncached.x_hf_low == uncached.x_hf_high == uncached.x_hf
    assert uncached.x_cached == pytest.approx(4.0 / 1.1) and hf.x_hf == 1.0


def test_attention_ratio_is_the_median_of_rounds_paired_with_nn_mha(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = {"mtlib fused": [1.0, 1.1, 9.0, 1.2, 1.0], bench.MHA_NAME: [1.0, 1.0, 10.0, 1.0, 1.0]}
    _canned_times(monkeypatch, canned)
    rows = bench.bench_attention(sizes=[6], repeats=5, batch=2, d_model=20, num_heads=5, device="cpu", decode=False)
    fused = next(r for r in rows if r.name == "mtlib fused")
    assert fused.time_x_mha == pytest.approx(1.0)  # paired: 1.0, 1.1, 0.9, 1.2, 1.0
    assert (fused.x_mha_q1, fused.x_mha_q3) == pytest.approx((1.0, 1.1))
    assert fused.time_x_min == pytest.approx(1.1)  # minimal: 1.0 in every round, so 9.0 is one outlier


def test_benchmarks_restore_the_thread_count() -> None:
    before = torch.get_num_threads()
    bench.bench_kv_cache([3], prompt_len=2, vocab_size=30, n_layer=1, d_model=8, num_heads=2, repeats=1,
                         positions=[], device="cpu", threads=before + 1, hf=False)  # fmt: skip
    bench.bench_tiled([64], ["explicit"], repeats=1, block_size=32, device="cpu", threads=before + 1, isolate=False)
    assert torch.get_num_threads() == before


def test_record_writes_strict_json_and_reads_nan_back() -> None:
    row = bench.TiledRow(seq_len=8, name="explicit", time_ms=1.0, peak_mib=math.nan, rss_mib=2.0)
    assert bench._jsonable(row)["peak_mib"] is None
    back = bench._rows(bench.TiledRow, [json.loads(json.dumps(bench._jsonable(row), allow_nan=False))])[0]
    assert math.isnan(back.peak_mib) and back.rss_mib == 2.0


def test_interleaved_times_rotate_the_order() -> None:
    order: list[str] = []
    calls = {name: (lambda name=name: order.append(name) or torch.zeros(1)) for name in "abc"}
    times, outputs = bench._interleaved_times(calls, torch.device("cpu"), repeats=3)  # type: ignore[arg-type]
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # each call first once
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3, "c": 3}
    assert set(outputs) == {"a", "b", "c"}


def test_cli_requires_a_benchmark_name() -> None:
    with pytest.raises(SystemExit):
        bench.main([])


# ---- tiled ----------------------------------------------------------------------------------


def test_tiled_rows_in_process() -> None:
    rows = bench.bench_tiled([256], head_dim=24, block_size=32, repeats=1, device="cpu", isolate=False)
    assert [r.name for r in rows] == list(bench.TILED_IMPLEMENTATIONS)
    by_name = {r.name: r for r in rows}
    explicit, tiled = by_name["explicit"], by_name["tiled"]
    assert explicit.mem_x_expl == 1.0 and explicit.time_x_expl == 1.0
    # explicit holds at least one (N, N) float32 matrix; tiled only blocks and the output
    assert explicit.peak_mib * 2**20 >= 256 * 256 * 4
    assert tiled.peak_mib < explicit.peak_mib / 2 and tiled.mem_x_expl < 0.5
    assert all(r.time_ms > 0 and math.isfinite(r.rss_mib) for r in rows)


def test_tiled_cli_runs_one_process_per_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    text = bench.main(
        ["tiled", "--sizes", "96", "--impls", "explicit", "tiled", "--block-size", "32",
         "--repeats", "1", "--head-dim", "16", "--device", "cpu", "--json"]
    )  # fmt: skip
    assert capsys.readouterr().out.strip() == text.strip()
    report = json.loads(text)
    assert report["device"] == "cpu" and report["threads"] >= 1
    assert [(r["seq_len"], r["name"]) for r in report["rows"]] == [(96, "explicit"), (96, "tiled")]
    assert report["rows"][0]["peak_mib"] * 2**20 >= 96 * 96 * 4


def test_tiled_table_has_the_columns() -> None:
    row = bench.TiledRow(seq_len=8192, name="tiled", time_ms=1616.0, peak_mib=4.19, rss_mib=6.1,
                         time_x_expl=1.51, mem_x_expl=0.008)  # fmt: skip
    lines = bench.format_tiled_table([row]).splitlines()
    assert lines[0].split() == list(bench.TILED_COLUMNS)
    assert lines[-1].split() == ["8192", "tiled", "1616", "1.51", "4.19", "0.008", "6.10"]


def test_unknown_tiled_implementation_is_refused() -> None:
    with pytest.raises(ValueError, match="implementation must be one of"):
        bench.measure_attention_once("flash", 8, device="cpu")


# ---- kv-cache -------------------------------------------------------------------------------


def test_kv_cache_quick_table(capsys: pytest.CaptureFixture[str]) -> None:
    table = bench.main(["kv-cache", "--quick", "--device", "cpu"])
    assert capsys.readouterr().out.strip() == table.strip()
    lines = table.splitlines()
    assert lines[0].startswith("greedy generation, GPT 2 layers, d_model=24")
    assert lines[1].split() == list(bench.GEN_COLUMNS)
    modes = [line.split("  ")[0].strip() for line in lines[3:6]]
    assert modes[:2] == ["mtlib uncached", "mtlib cached"]
    assert all(line.split()[-1] == "True" for line in lines[3:5])  # identical tokens


def test_kv_cache_rows_with_transformers() -> None:
    pytest.importorskip("transformers")
    gen, latency, notes = bench.bench_kv_cache(
        [10, 4], prompt_len=3, vocab_size=40, n_layer=2, d_model=20, num_heads=2, repeats=3,
        positions=[2, 9], steps=2, device="cpu",
    )  # fmt: skip
    modes = ["mtlib uncached", "mtlib cached", "transformers cached"]
    assert [(r.mode, r.new_tokens) for r in gen] == [(m, n) for n in (10, 4) for m in modes]
    assert all(r.tokens_equal for r in gen)  # the same weights give the same greedy tokens
    for group in (gen[:3], gen[3:]):
        assert group[1].x_cached == 1.0 and group[2].x_hf == 1.0
        assert [r.repeats for r in group] == [1, 3, 3]
    assert [(r.position, r.mode) for r in latency] == [
        (2, "cached"), (2, "uncached"), (9, "cached"), (9, "uncached")
    ]  # fmt: skip
    assert any("GPT.from_hf" in note for note in notes)


def test_kv_cache_skips_transformers_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    text = bench.main(["kv-cache", "--quick", "--device", "cpu", "--json"])
    report = json.loads(text)
    assert [r["mode"] for r in report["generation"]] == ["mtlib uncached", "mtlib cached"]
    assert report["generation"][0]["tokens_equal"] is True
    assert report["notes"] == ["transformers is not installed: its generate row is skipped"]
    assert {r["mode"] for r in report["latency"]} == {"cached", "uncached"}


def test_attention_json(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(bench.main(["attention", "--quick", "--device", "cpu", "--no-decode", "--json"]))
    capsys.readouterr()
    assert [(r["batch"], r["seq_len"]) for r in report["rows"]][:1] == [(2, 8)]
    assert len(report["rows"]) == 2 * len(bench.IMPLEMENTATIONS)


def test_public_measuring_helpers() -> None:
    assert bench.peak_memory_mib(lambda: torch.ones(2**18), "cpu") == 1.0
    assert bench.median_seconds(lambda: None, "cpu", repeats=3) >= 0.0
    assert 0.0 <= bench.best_seconds(lambda: None, "cpu", repeats=2) < 1.0


def test_allocated_mib_counts_every_allocation() -> None:
    def three_in_turn() -> None:
        for _ in range(3):
            torch.ones(2**18)  # 1 MiB, freed at once

    assert bench.allocated_mib(three_in_turn, "cpu") == 3.0
    assert bench.peak_memory_mib(three_in_turn, "cpu") == 1.0


# ---- record / recorded ----------------------------------------------------------------------


def test_record_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    doc = bench.record(path, "cpu", quick=True)
    stored = bench.recorded(path)
    assert stored["recorded"] == doc["recorded"] and "cores" in stored["machine"]
    assert [r.name for r in stored["attention"]] == list(bench.IMPLEMENTATIONS) * 3
    assert {(r.seq_len, r.name) for r in stored["tiled"]} == {
        (n, name) for n in (64, 256) for name in bench.TILED_IMPLEMENTATIONS
    }
    assert [r.mode for r in stored["generation"]] == [
        "mtlib uncached", "mtlib cached", "transformers cached"
    ][: len(stored["generation"])]  # fmt: skip
    assert all(r.tokens_equal for r in stored["generation"])
    # the stored rows print with the subcommands' own tables
    assert bench.format_kv_tables(stored["generation"], stored["latency"], stored["notes"]).splitlines()[0].split() == list(bench.GEN_COLUMNS)
    assert bench.format_table(stored["attention"]).splitlines()[0].split() == list(bench.COLUMNS)
    assert bench.format_tiled_table(stored["tiled"]).splitlines()[0].split() == list(bench.TILED_COLUMNS)


def test_the_stored_record_loads_and_meets_the_goals_it_was_recorded_for() -> None:
    stored = bench.recorded()  # mtlib/experiments/bench_record.json, printed by chapter 12
    gen = {(r.mode, r.new_tokens): r for r in stored["generation"]}
    assert {n for _, n in gen} == {32, 128, 512}
    assert all(r.tokens_equal for r in gen.values())
    assert gen["mtlib uncached", 512].x_cached >= 5
    if ("transformers cached", 512) in gen:
        assert all(gen["mtlib cached", n].x_hf <= 1.0 for n in (32, 128, 512))
    tiled = {(r.seq_len, r.name): r for r in stored["tiled"]}
    assert tiled[8192, "tiled"].mem_x_expl <= 0.15


def test_peak_rss_is_this_process_own_high_water_mark() -> None:
    """A worker's resident peak is its own: Linux's ru_maxrss survives fork and exec, so a
    worker started by a process that held 1 GiB would report that GiB as its own."""
    grandchild = "from mtlib import bench; print(bench._peak_rss_mib())"
    child = (
        "import subprocess, sys\n"
        "held = bytearray(2**30)  # 1 GiB, zero-filled, so resident\n"
        f"print(subprocess.run([sys.executable, '-c', {grandchild!r}], capture_output=True, text=True, check=True).stdout)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    worker_peak = float(out.stdout)
    assert 0 < worker_peak < 900  # torch imported, but not the parent's GiB
