"""The pinned CPU numerics (tests/numerics.py) and the sensitivity check of tests/execute_notebooks.py."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from tests import execute_notebooks as ex
from tests import numerics

ROOT = Path(__file__).resolve().parents[1]
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _in_subprocess(code: str, env: dict[str, str]) -> str:
    full = {k: v for k, v in os.environ.items() if k not in numerics.PINNED}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         check=True, timeout=120)
    return out.stdout.strip()


def test_modes_and_one_knob_perturbed():
    assert numerics.environment("pinned") == numerics.PINNED
    assert numerics.environment("perturbed") == numerics.PERTURBED
    assert numerics.environment("native") == {}
    assert set(numerics.PINNED) == set(numerics.PERTURBED)
    assert all(numerics.PINNED[k] != numerics.PERTURBED[k] for k in numerics.PINNED)
    one = numerics.environment("perturbed", only="MKL_CBWR")
    assert one["MKL_CBWR"] == numerics.PERTURBED["MKL_CBWR"]
    assert {k: v for k, v in one.items() if k != "MKL_CBWR"} == {
        k: v for k, v in numerics.PINNED.items() if k != "MKL_CBWR"}
    with pytest.raises(ValueError, match="MTLIB_NUMERICS"):
        numerics.environment("fast")
    with pytest.raises(ValueError, match="only must be one of"):
        numerics.environment("perturbed", only="OMP_NUM_THREADS")


def test_apply_sets_the_knobs_and_native_removes_them():
    env = {"MKL_CBWR": "AVX512", "PATH": "/bin"}
    numerics.apply(env)
    assert env["MKL_CBWR"] == "COMPATIBLE" and env[numerics.MODE_ENV] == "pinned"
    assert env["PATH"] == "/bin"
    numerics.apply(env, "native")
    assert not set(numerics.PINNED) & set(env) and env[numerics.MODE_ENV] == "native"
    env[numerics.MODE_ENV] = "perturbed"
    numerics.apply(env)  # the mode comes from the environment when not given
    assert env["ATEN_CPU_CAPABILITY"] == "default"
    assert "MKL_CBWR=AUTO" in numerics.describe(env)


@pytest.mark.skipif(not X86, reason="the pin is for x86-64 processors")
def test_the_pin_reaches_pytorchs_kernel_choice():
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    native = _in_subprocess(code, {})
    if native == "DEFAULT":
        pytest.skip("this processor has no AVX2")
    assert _in_subprocess(code, numerics.PINNED) == "AVX2"
    assert _in_subprocess(code, {"ATEN_CPU_CAPABILITY": "default"}) == "DEFAULT"


@pytest.mark.skipif(not (X86 and torch.backends.mkl.is_available()), reason="needs x86 MKL")
def test_mkl_cbwr_changes_how_a_matmul_sums():
    # the knob is read by MKL when it loads: COMPATIBLE (SSE2) and AUTO (AVX2/AVX-512 with FMA)
    # add the 513 products of each entry in another order
    code = ("import hashlib, torch; torch.set_num_threads(1); g = torch.Generator().manual_seed(0);"
            "a = torch.randn(257, 513, generator=g); b = torch.randn(513, 129, generator=g);"
            "print(hashlib.sha1((a @ b).numpy().tobytes()).hexdigest())")
    pinned = _in_subprocess(code, numerics.PINNED)
    assert pinned == _in_subprocess(code, numerics.PINNED)  # deterministic under the pin
    assert pinned != _in_subprocess(code, {**numerics.PINNED, "MKL_CBWR": "AUTO"})


def test_the_nbval_stage_and_the_re_execute_command_use_the_pin(monkeypatch, tmp_path):
    run_all = (ROOT / "tests" / "run_all.sh").read_text().replace("\\\n", " ")
    nbval_line = next(line for line in run_all.splitlines() if line.startswith("stage nbval"))
    assert "-p tests.numerics" in nbval_line
    seen = {}

    def fake_execute(path, timeout=600):
        seen.update({k: os.environ.get(k) for k in numerics.PINNED})
        return 0.0

    monkeypatch.setenv("MTLIB_DEVICE", "cpu")
    for key in [*numerics.PINNED, numerics.MODE_ENV]:
        monkeypatch.setenv(key, "x")  # recorded, so that the test restores the environment
        monkeypatch.delenv(key)
    monkeypatch.setattr(ex, "execute", fake_execute)
    monkeypatch.setattr(numerics, "fingerprint", lambda: {"mkl_vml": "abc"})
    monkeypatch.setattr(numerics, "FINGERPRINTS", tmp_path / "fingerprints.json")
    nb = tmp_path / "00_x.ipynb"
    nb.write_text("{}")
    assert ex.main([str(nb)]) == 0
    assert seen == numerics.PINNED
    assert numerics.recorded() == {"00_x": {"mkl_vml": "abc"}}  # the executing machine's


@pytest.mark.skipif(not X86, reason="the pin is for x86-64 processors")
def test_the_fingerprint_is_deterministic_and_sees_another_kernel_choice():
    machine = numerics.fingerprint()
    assert machine == numerics.fingerprint()
    assert set(machine) >= {"mkl_vml", "mkl_blas", "aten", "train_adam", "train_fused_adamw"}
    # MKL's automatic branch: another vector-math and BLAS code path on Intel and on AMD alike
    auto = _in_subprocess("import json; from tests import numerics; print(json.dumps(numerics._probe()))",
                          {**numerics.PINNED, "MKL_CBWR": "AUTO"})
    moved = numerics.differing(machine, {"auto": json.loads(auto)})["auto"]
    assert {"mkl_blas", "train_adam"} <= set(moved) and "aten" not in moved


def test_differing_names_the_kernel_families():
    here = {"mkl_vml": "1", "aten": "2"}
    table = {"01_a": {"mkl_vml": "1", "aten": "2"}, "03_b": {"mkl_vml": "9", "aten": "2"},
             "04_c": {"mkl_vml": "1"}}
    assert numerics.differing(here, table) == {"03_b": ["mkl_vml"], "04_c": ["aten"]}


class _Cell:  # the two attributes of an nbval item the collection hook reads and sets
    def __init__(self, path, cell_id):
        self.fspath, self.cell, self.options = path, {"id": cell_id}, {"check": True}


def test_listed_cells_of_a_chapter_executed_elsewhere_are_run_but_not_compared(monkeypatch, tmp_path):
    fingerprints, listed = tmp_path / "f.json", tmp_path / "p.yml"
    listed.write_text('- {notebook: 01_a, id: "c1", why: trained}\n- {notebook: 03_b, id: "c1", why: trained}\n')
    numerics.record(["01_a"], {"mkl_vml": "here"}, fingerprints)
    numerics.record(["03_b"], {"mkl_vml": "elsewhere"}, fingerprints)
    monkeypatch.setattr(numerics, "FINGERPRINTS", fingerprints)
    monkeypatch.setattr(numerics, "PINNED_OUTPUTS", listed)
    monkeypatch.setattr(numerics, "fingerprint", lambda: {"mkl_vml": "here"})
    monkeypatch.setattr(numerics, "_ELSEWHERE", None)
    items = [_Cell(f"/x/{stem}.ipynb", cell) for stem in ("01_a", "03_b", "05_c") for cell in ("c1", "c2")]
    numerics.pytest_collection_modifyitems(None, items)
    unchecked = [(i.fspath, i.cell["id"]) for i in items if not i.options["check"]]
    assert unchecked == [("/x/03_b.ipynb", "c1")]  # listed, and executed under another fingerprint
    header = "\n".join(numerics.pytest_report_header(None))
    assert "03_b was executed where mkl_vml differ" in header and "01_a" not in header

    class Reporter:  # what pytest_terminal_summary writes to, after a -q run too
        lines: list[str] = []

        def write_line(self, line):
            self.lines.append(line)

    reporter = Reporter()
    numerics.pytest_terminal_summary(reporter)
    assert reporter.lines == numerics.pytest_report_header(None)[1:]


def test_the_recorded_fingerprints_name_chapters_and_every_kernel_family():
    # A chapter without a record was executed before fingerprints were recorded, and passed
    # strict nbval on Intel and AMD CI machines alike: every one of its cells is compared.
    table = numerics.recorded()
    chapters = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")}
    assert set(table) <= chapters
    assert {"01_attention_intuition", "03_scaled_dot_product_attention",
            "04_multi_head_attention", "06_positional_encoding"} <= set(table)
    families = set(numerics._probe())
    assert all(set(fp) == families for fp in table.values())


def _nb(cells):
    nb = nbformat.v4.new_notebook()
    for source, outputs, tags in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell("text"))
    return nb


def _out(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_changed_cells_compares_what_strict_nbval_compares():
    before = _nb([
        ("a", [_out("loss 0.62\n")], []),
        ("b", [_out("took 1.5 s\n")], []),                        # a timing: sanitized
        ("c", [_out("anything\n")], ["nbval-ignore-output"]),     # not compared
        ("d", [{"output_type": "display_data", "metadata": {},
                "data": {"image/png": "AAAA", "text/plain": "<Figure size 10x3>"}}], []),
        ("e", [_out("same\n")], []),
        ("f", [_out("one "), _out("line\n")], []),                # a stream in two chunks
    ])
    after = _nb([
        ("a", [_out("loss 0.61\n")], []),
        ("b", [_out("took 2.25 s\n")], []),
        ("c", [_out("something else\n")], ["nbval-ignore-output"]),
        ("d", [{"output_type": "display_data", "metadata": {},
                "data": {"image/png": "BBBB", "text/plain": "<Figure size 10x3>"}}], []),
        ("e", [_out("same\n"), {"output_type": "stream", "name": "stderr", "text": "more\n"}], []),
        ("f", [_out("one line\n")], []),
    ])
    changes = ex.changed_cells(before, after)
    assert [c["index"] for c in changes] == [0, 5]  # the markdown cell is index 1
    assert changes[0]["was"] == "[stdout] loss 0.62" and changes[0]["now"] == "[stdout] loss 0.61"
    assert changes[1]["was"] == "(nothing)" and changes[1]["now"] == "[stderr] more"
    assert changes[1]["lines"] == 1


def test_every_pinned_output_names_a_compared_code_cell_and_a_reason():
    listed = ex.pinned_cells()
    for (stem, cell_id), why in listed.items():
        path = ROOT / "chapters" / f"{stem}.ipynb"
        assert path.exists(), f"tests/pinned_outputs.yml: no chapter {stem}"
        cells = {c.get("id"): c for c in json.loads(path.read_text())["cells"]}
        assert cell_id in cells, f"tests/pinned_outputs.yml: {stem} has no cell {cell_id}"
        cell = cells[cell_id]
        assert cell["cell_type"] == "code" and cell["outputs"], f"{stem} {cell_id}: no outputs"
        assert "nbval-ignore-output" not in cell["metadata"].get("tags", [])
        assert len(why) > 20, f"{stem} {cell_id}: say why only the pin keeps this output"
