"""The seed sweep: re-execute chapters with every seed shifted, and report how each assert fared.

Usage (from the repository root)::

    python -m tests.seed_sweep chapters/03_scaled_dot_product_attention.ipynb   # 10 shifts
    python -m tests.seed_sweep --shifts 12 --jobs 2                             # every chapter
    python -m tests.seed_sweep --table                # rebuild the table from saved results

Each run executes a copy of the notebook (nothing in ``chapters/`` changes) with
``MTLIB_SEED_SHIFT=1000*k`` for k = 1..N: ``utils.setup`` then shifts *every* seed the chapter
sets, its own and mtlib's (``mtlib.utils``, "Other seeds"), so the initial weights, the data
and every sampled example are new draws. The seeds of a shifted run never meet the chapter's
own (its seeds are below 1000).

Every ``assert`` statement of the chapter is rewritten, in the kernel only, to record instead of
raise: for ``assert a > b`` (or ``<``, ``>=``, ``<=``) the values ``a`` and ``b`` and the margin
(how far ``a`` is on the right side of ``b``), for any other assert only whether it held. An
assert inside a loop counts once per run, at its worst iteration. A cell that raises (other than
an exercise stub tagged ``raises-exception``) is a failure of that run.

The report lists, per assert: how many shifts it passed, its worst value and threshold, and the
smallest margin, also as a fraction of the threshold. An assert whose values never moved is
marked ``fixed``: it checks something the seeds do not touch (an identity, a shape, a stored
checkpoint report; chapters 9-11 and 14-15 assert on reports that their experiment scripts
trained over their own seeds). Results are saved per run under ``tests/seed_sweep_runs/``
(committed, so an interrupted sweep resumes and the table can be rebuilt in a later session) and the table goes to ``tests/seed_sweep.md`` (CONTRIBUTING.md, "The
standard of evidence"). Runs use the machine's own numerics (not the pin): another BLAS is, in
effect, another seed. Exit status 1 if any assert failed any shift.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from tests import numerics

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "tests" / "seed_sweep_runs"  # committed: the table can be rebuilt later
TABLE = ROOT / "tests" / "seed_sweep.md"
STEP = 1000  # shift k moves seed s to s + STEP * k

# Runs in the kernel before the chapter's first cell: an IPython AST transformer that turns each
# assert into a call of __sweep__.record(...), which stores the values and never raises.
_BOOTSTRAP = r'''
import ast as _ast, math as _math

class _Sweep:
    OPS = {_ast.Gt: ">", _ast.GtE: ">=", _ast.Lt: "<", _ast.LtE: "<="}

    def __init__(self):
        self.records = {}

    @staticmethod
    def _number(x):
        try:
            if hasattr(x, "numel") and x.numel() != 1:
                return None
            value = float(x)
            return value if _math.isfinite(value) else None
        except Exception:
            return None

    def record(self, key, passed, op=None, left=None, right=None):
        passed = bool(passed)
        a, b = self._number(left), self._number(right)
        margin = None
        if op in (">", ">=") and a is not None and b is not None:
            margin = a - b
        elif op in ("<", "<=") and a is not None and b is not None:
            margin = b - a
        old = self.records.get(key)
        new = {"passed": passed, "value": a, "threshold": b, "margin": margin, "count": 1}
        if old is not None:  # an assert in a loop: keep its worst iteration
            new["count"] = old["count"] + 1
            worse = (not passed and old["passed"]) or (passed == old["passed"] and margin is not None
                     and old["margin"] is not None and margin < old["margin"])
            if not worse:
                new = {**old, "count": new["count"]}
        self.records[key] = new

    def truth(self, key, value):
        self.record(key, value)
        return bool(value)

    def compare(self, key, op, left, right):
        ok = {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[op]
        self.record(key, ok, op, left, right)
        return ok


__sweep__ = _Sweep()


class _Rewrite(_ast.NodeTransformer):
    # `assert a > b and c < d` records each comparison on its own (and keeps the short circuit);
    # a chain `lo < x < hi` becomes `lo < x and x < hi`; anything else records True/False only.
    def _part(self, cell, line, test):
        sweep = _ast.Name("__sweep__", _ast.Load())
        if isinstance(test, _ast.BoolOp) and isinstance(test.op, _ast.And):
            return _ast.BoolOp(_ast.And(), [self._part(cell, line, v) for v in test.values])
        if isinstance(test, _ast.Compare) and all(type(o) in _Sweep.OPS for o in test.ops):
            operands = [test.left, *test.comparators]
            parts = []
            for op, a, b in zip(test.ops, operands, operands[1:]):
                src = _ast.unparse(_ast.Compare(a, [op], [b]))
                parts.append(_ast.Call(_ast.Attribute(sweep, "compare", _ast.Load()),
                                       [_ast.Constant(f"{cell}:{line}:{src}"),
                                        _ast.Constant(_Sweep.OPS[type(op)]), a, b], []))
            return parts[0] if len(parts) == 1 else _ast.BoolOp(_ast.And(), parts)
        key = f"{cell}:{line}:{_ast.unparse(test)}"
        return _ast.Call(_ast.Attribute(sweep, "truth", _ast.Load()), [_ast.Constant(key), test], [])

    def visit_Assert(self, node):
        call = self._part(get_ipython().execution_count, node.lineno, node.test)
        return _ast.fix_missing_locations(_ast.copy_location(_ast.Expr(call), node))


get_ipython().ast_transformers.append(_Rewrite())
'''

_REPORT = "import json as _json; print('__SWEEP__' + _json.dumps(__sweep__.records))"


def run_once(path: Path, shift: int, timeout: int = 600) -> dict[str, Any]:
    """Execute a copy of ``path`` with every seed shifted by ``shift``; return its assert records."""
    nb = nbformat.read(path, as_version=4)
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    nb.cells.insert(0, nbformat.v4.new_code_cell(_BOOTSTRAP))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT))
    env_shift = {"MTLIB_SEED_SHIFT": str(shift)}
    os.environ.update(env_shift)
    numerics.apply(os.environ, "native")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = []
    for index, cell in enumerate(nb.cells[1:-1]):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                errors.append({"cell": index, "error": f"{out['ename']}: {out['evalue'][:200]}"})
    final = "".join(o.get("text", "") for o in nb.cells[-1].get("outputs", []))
    records = json.loads(final.split("__SWEEP__", 1)[1]) if "__SWEEP__" in final else {}
    # execution count n (the bootstrap is 1) is code cell n - 2 of the chapter
    by_cell = {}
    for key, rec in records.items():
        count, line, source = key.split(":", 2)
        position = int(count) - 2
        cell = code_cells[position] if 0 <= position < len(code_cells) else -1
        by_cell[f"{cell}:{line}:{source}"] = rec
    return {"notebook": path.stem, "shift": shift, "records": by_cell, "errors": errors}


def _job(args: tuple[Path, int]) -> Path:
    path, k = args
    out = RESULTS / path.stem / f"shift_{k:02d}.json"
    if not out.exists():
        # A kernel can hang (idle, its reply lost: seen once in 100 runs); the cell timeout
        # ends such a run and it is tried once more.
        try:
            result = run_once(path, STEP * k)
        except Exception as error:  # noqa: BLE001 - DeadKernelError, CellTimeoutError, ...
            print(f"  {path.stem} shift {k}: {type(error).__name__}, running it again", flush=True)
            result = run_once(path, STEP * k)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return out


def _fmt(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0:
        return "0"
    return f"{x:.3g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.2e}"


def summarise(stem: str, results: list[dict[str, Any]]) -> tuple[list[str], int]:
    """Table rows for one chapter and the number of asserts that failed some shift."""
    keys: dict[str, list[dict[str, Any] | None]] = {}
    for r in results:
        for key in r["records"]:
            keys.setdefault(key, [])
    for key in keys:
        keys[key] = [r["records"].get(key) for r in results]
    rows, failing = [], 0

    def order(key: str) -> tuple[int, int]:
        cell, line, _ = key.split(":", 2)
        return int(cell), int(line)

    for key in sorted(keys, key=order):
        cell, line, source = key.split(":", 2)
        recs = keys[key]
        seen = [r for r in recs if r is not None]
        passed = sum(r["passed"] for r in seen)
        missing = len(recs) - len(seen)  # the run stopped before it (an error)
        failing += passed < len(recs)
        margins = [r["margin"] for r in seen if r["margin"] is not None]
        values = {json.dumps([r["value"], r["threshold"], r["passed"]]) for r in seen}
        if margins:
            worst = min((r for r in seen if r["margin"] is not None), key=lambda r: r["margin"])
            rel = (worst["margin"] / abs(worst["threshold"]) if worst["threshold"] else None)
            value, threshold, margin = worst["value"], worst["threshold"], worst["margin"]
        else:
            value = threshold = margin = rel = None
        kind = "fixed" if len(values) == 1 and not missing and len(recs) > 1 else ""
        src = source.replace("|", "\\|")
        src = src if len(src) <= 90 else src[:87] + "..."
        rows.append(
            f"| {stem[:2]} | {cell} | `{src}` | {passed}/{len(recs)}"
            f"{' (' + str(missing) + ' not reached)' if missing else ''} | {_fmt(value)} | "
            f"{_fmt(threshold)} | {_fmt(margin)} | "
            f"{'' if rel is None or math.isnan(rel) else f'{rel:.0%}'} | {kind} |"
        )
    return rows, failing


def table(stems: list[str] | None = None) -> tuple[str, int]:
    """The whole report from the saved runs (every chapter with results, or the ones named)."""
    dirs = sorted(p for p in RESULTS.glob("*") if p.is_dir())
    if stems:
        dirs = [d for d in dirs if d.name in stems]
    lines = [
        "# The seed sweep: every assert of every chapter, on shifted seeds",
        "",
        "Made by `python -m tests.seed_sweep` (see its docstring): each chapter re-executed with every",
        f"seed it sets shifted by {STEP}·k, k = 1..N. *passed*: shifts on which the assert held",
        "(an assert in a loop holds only if every iteration did); *worst value* and *threshold*: the",
        "two sides of `a > b` (or `<`) at the shift with the smallest *margin* (how far the value is",
        "on the right side), also as a fraction of the threshold; *fixed*: the values never moved",
        "(the assert checks an identity, a shape or a stored checkpoint report, not a draw).",
        "",
    ]
    failing_total, errors = 0, []
    chapters: dict[str, tuple[str, list[str]]] = {}  # name -> (summary line, table rows)
    for d in dirs:
        results = [json.loads(p.read_text()) for p in sorted(d.glob("shift_*.json"))]
        if not results:
            continue
        rows, failing = summarise(d.name, results)
        failing_total += failing
        for r in results:
            errors.extend(f"- {d.name}, shift {r['shift']}: cell {e['cell']} raised {e['error']}"
                          for e in r["errors"])
        chapters[d.name] = (f"- `{d.name}`: {len(results)} shifts, {len(rows)} asserts, "
                            f"{failing} failed at least one shift", rows)
    # Chapters swept before the runs were kept in the repository: their rows of the previous
    # table stay (marked), until a new sweep of the chapter replaces them.
    if not stems and TABLE.exists():
        old = TABLE.read_text(encoding="utf-8").splitlines()
        for line in old:
            m = re.match(r"- `(\d\d_\w+)`: (\d+ shifts, \d+ asserts, (\d+) failed.*?shift)", line)
            if m and m.group(1) not in chapters:
                failing_total += int(m.group(3))
                chapters[m.group(1)] = (
                    f"- `{m.group(1)}`: {m.group(2)} (kept from an earlier table: its runs were "
                    "not saved)", [r for r in old if r.startswith(f"| {m.group(1)[:2]} |")])
    body = ["| ch | cell | assert | passed | worst value | threshold | margin | margin/threshold | |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in sorted(chapters):
        lines.append(chapters[name][0])
        body.extend(chapters[name][1])
    lines += ["", f"**{failing_total} assert(s) failed at least one shift.**", ""]
    if errors:
        lines += ["Cells that raised:", "", *errors, ""]
    return "\n".join(lines + body) + "\n", failing_total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: chapters/*.ipynb")
    parser.add_argument("--shifts", type=int, default=10, help="number of shifted runs (k = 1..N)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each uses one core)")
    parser.add_argument("--fresh", action="store_true", help="discard saved runs of these chapters")
    parser.add_argument("--table", action="store_true", help="only rebuild the table")
    args = parser.parse_args(argv)
    os.environ["MTLIB_DEVICE"] = os.environ.get("MTLIB_DEVICE", "cpu")
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "chapters").glob("*.ipynb"))
    if not args.table:
        if args.fresh:
            for p in paths:
                for f in (RESULTS / p.stem).glob("shift_*.json"):
                    f.unlink()
        jobs = [(p, k) for p in paths for k in range(1, args.shifts + 1)]
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for out in pool.map(_job, jobs):
                print(f"  {out.relative_to(ROOT)}", flush=True)
    text, failing = table()
    TABLE.write_text(text, encoding="utf-8")
    print(text)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
