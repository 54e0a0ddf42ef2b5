"""Re-execute chapter notebooks in place, each in a fresh kernel, and save their outputs.

Usage (from the repository root, with mtlib installed: ``pip install -e .``)::

    python -m tests.execute_notebooks                 # every chapters/*.ipynb
    python -m tests.execute_notebooks chapters/01_attention_intuition.ipynb

Run it after changing mtlib or a chapter, then commit the notebooks: CI compares the stored
outputs with a fresh run (strict nbval). Widget state is saved in the notebook metadata so the
static HTML book can render the widgets. Notebooks run on the CPU (``MTLIB_DEVICE=cpu``) so the
committed numbers are the ones CI reproduces.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in place with a fresh kernel; return the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
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
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: chapters/*.ipynb")
    args = parser.parse_args(argv)
    os.environ["MTLIB_DEVICE"] = os.environ.get("MTLIB_DEVICE", "cpu")
    notebooks = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    for path in notebooks:
        print(f"executing {path} ...", flush=True)
        print(f"  done in {execute(path.resolve()):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
