"""Re-execute chapter notebooks in place, each in a fresh kernel, and save their outputs.

Usage (from the repository root, with mtlib installed: ``pip install -e .``)::

    python -m tests.execute_notebooks                 # every chapters/*.ipynb
    python -m tests.execute_notebooks chapters/01_attention_intuition.ipynb
    python -m tests.execute_notebooks --perturb       # the sensitivity check (writes nothing)
    python -m tests.execute_notebooks --perturb --only MKL_CBWR chapters/01_*.ipynb

Run it after changing mtlib or a chapter, then commit the notebooks: CI compares the stored
outputs with a fresh run (strict nbval). Widget state is saved in the notebook metadata so the
static HTML book can render the widgets. Notebooks run on the CPU (``MTLIB_DEVICE=cpu``) with
the CPU numerics pinned (``tests/numerics.py``), as the nbval stage of ``tests/run_all.sh``
checks them, so the committed numbers are the ones every x86-64 machine reproduces.

``--perturb`` executes the notebooks under another kernel choice (``tests.numerics.PERTURBED``,
or only the knob ``--only`` names), compares every compared output (what strict nbval compares,
after ``tests/nbval_sanitize.cfg``) with the committed one, and prints each cell that changed.
A changed cell must be listed in ``tests/pinned_outputs.yml`` (a training output that only the
pin keeps identical, with the reason); an unlisted one prints rounding noise and must be made
stable. Exit status 1 if any unlisted cell changed. The report also goes to
``_build/perturb/<mode>.md``.
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from tests import numerics

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
PINNED_OUTPUTS = numerics.PINNED_OUTPUTS
#: The output types strict nbval compares (it skips PNG/JPEG images and widget views).
COMPARED_DATA = ("text/plain", "text/html", "text/latex", "image/svg+xml")


def run(nb: Any, path: Path, timeout: int = 1800) -> float:
    """Execute ``nb`` (read from ``path``) in a fresh kernel in ``path``'s folder; return seconds."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,
        allow_errors=False,  # cells tagged raises-exception may raise; any other error stops here
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def execute(path: Path, timeout: int = 1800) -> float:  # per cell; a busy machine
    """Execute one notebook in place with a fresh kernel; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    elapsed = run(nb, path, timeout)
    nbformat.write(nb, path)
    return elapsed


def sanitizers(cfg: Path = SANITIZE) -> list[tuple[re.Pattern[str], str]]:
    """The (regex, replacement) rules of nbval's sanitize file, in order."""
    parser = configparser.ConfigParser()
    parser.read(cfg)
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"].strip()) for s in parser.sections()]


def compared_outputs(cell: Any, rules: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """The text of a code cell's outputs as strict nbval compares them (sanitized)."""
    texts: list[str] = []
    last_stream = None  # consecutive chunks of one stream are one output (as nbval reads them)
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream" and out["name"] == last_stream:
            texts[-1] += out["text"]
            continue
        last_stream = out["name"] if kind == "stream" else None
        if kind == "stream":
            texts.append(f"[{out['name']}] {out['text']}")
        elif kind in ("execute_result", "display_data"):
            for mime in COMPARED_DATA:
                if mime in out.get("data", {}):
                    texts.append(f"[{mime}] {out['data'][mime]}")
        elif kind == "error":
            texts.append(f"[error] {out['ename']}: {out['evalue']}")
    text = "".join(t if t.endswith("\n") else t + "\n" for t in texts)
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text.splitlines()


pinned_cells = numerics.pinned_cells  # {(notebook stem, cell id): why}


def changed_cells(before: Any, after: Any) -> list[dict[str, Any]]:
    """The code cells whose compared output differs between two runs of one notebook."""
    rules = sanitizers()
    changes = []
    for index, (old, new) in enumerate(zip(before.cells, after.cells, strict=True)):
        if old.cell_type != "code" or "nbval-ignore-output" in old.metadata.get("tags", []):
            continue
        a, b = compared_outputs(old, rules), compared_outputs(new, rules)
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            changes.append({
                "index": index, "id": old.get("id", ""),
                "was": a[first] if first < len(a) else "(nothing)",
                "now": b[first] if first < len(b) else "(nothing)",
                "lines": sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b)),
            })
    return changes


def _perturbed_run(path: Path, mode: str, only: str | None) -> tuple[str, float, list[dict[str, Any]]]:
    """Execute a copy of the notebook at ``path`` under ``mode``; compare with the committed one."""
    numerics.apply(os.environ, mode, only)
    committed = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    elapsed = run(fresh, path)
    return path.stem, elapsed, changed_cells(committed, fresh)


def perturb(notebooks: list[Path], mode: str, only: str | None, jobs: int) -> int:
    """The sensitivity check: print (and save) every cell a different kernel choice changes."""
    label = f"{mode}" if only is None else f"only-{only}"
    env = numerics.environment(mode, only)
    print(f"sensitivity check ({label}): " + ", ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    listed = pinned_cells()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(_perturbed_run, notebooks, [mode] * len(notebooks),
                                [only] * len(notebooks)))
    rows, unstable = [], 0
    for stem, elapsed, changes in results:
        for c in changes:
            why = listed.get((stem, c["id"]))
            unstable += why is None
            kind = f"pinned training output ({why})" if why else "UNSTABLE: print a bound or round"
            rows.append(f"| {stem} | {c['index']} | {c['id']} | {c['lines']} | `{c['was'][:70]}` | "
                        f"`{c['now'][:70]}` | {kind} |")
        print(f"  {stem}: {len(changes)} cell(s) changed ({elapsed:.0f} s)", flush=True)
    lines = [
        f"# Sensitivity check: {label}", "",
        f"Kernel choice: {', '.join(f'`{k}={v}`' for k, v in env.items())}; compared with the "
        f"committed outputs (executed under `tests.numerics.PINNED`).", "",
        f"{sum(len(r[2]) for r in results)} cell(s) changed in {len(results)} notebook(s); "
        f"{unstable} not listed in tests/pinned_outputs.yml.", "",
        "| notebook | cell | id | lines | committed | perturbed | verdict |",
        "|---|---|---|---|---|---|---|", *rows,
    ]
    report = "\n".join(lines)
    out = ROOT / "_build" / "perturb" / f"{label}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n", encoding="utf-8")
    print(report)
    print(f"\n(report written to {out.relative_to(ROOT)})")
    return 1 if unstable else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: chapters/*.ipynb")
    parser.add_argument("--perturb", action="store_true",
                        help="sensitivity check: execute copies under another kernel choice")
    parser.add_argument("--only", choices=sorted(numerics.PINNED),
                        help="with --perturb: move only this knob (the others stay pinned)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks executed at once (each uses one core; timings then overlap)")
    args = parser.parse_args(argv)
    os.environ["MTLIB_DEVICE"] = os.environ.get("MTLIB_DEVICE", "cpu")
    notebooks = [p.resolve() for p in args.notebooks] or sorted((ROOT / "chapters").glob("*.ipynb"))
    if args.perturb:
        return perturb(notebooks, "perturbed", args.only, args.jobs)
    if args.only:
        parser.error("--only needs --perturb")
    numerics.apply(os.environ, "pinned")
    print(numerics.describe(), flush=True)
    machine = numerics.fingerprint()  # recorded for each notebook executed (tests/numerics.py)
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for path, seconds in zip(notebooks, pool.map(execute, notebooks), strict=True):
                print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s", flush=True)
                numerics.record([path.stem], machine)
        return 0
    for path in notebooks:
        print(f"executing {path} ...", flush=True)
        print(f"  done in {execute(path):.1f} s", flush=True)
        numerics.record([path.stem], machine)
    print(f"fingerprint recorded in {numerics.FINGERPRINTS}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
