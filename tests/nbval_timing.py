"""A pytest plugin that prints each notebook's execution time under nbval, against the budget.

Loaded by the nbval stage of ``tests/run_all.sh`` (``-p tests.nbval_timing``); nothing in
``chapters/`` changes. A notebook's time is the sum of its cells' setup, call and teardown, so
it includes starting and stopping its kernel. Budgets (issue "Publishing"): each chapter under
``MTLIB_NB_BUDGET_S`` seconds (default 90) and the whole stage under ``MTLIB_NBVAL_BUDGET_S``
(default 720). Over budget is reported, not failed: machines differ, and CI shares its CPUs;
set ``MTLIB_NB_BUDGET_STRICT=1`` to make it fail the run.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest

_times: dict[str, float] = defaultdict(float)
_cells: dict[str, int] = defaultdict(int)
_start = time.perf_counter()


def _budgets() -> tuple[float, float]:
    return float(os.environ.get("MTLIB_NB_BUDGET_S", 90)), float(os.environ.get("MTLIB_NBVAL_BUDGET_S", 720))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.split("::")[0].endswith(".ipynb"):
        return
    notebook = report.nodeid.split("::")[0]
    _times[notebook] += report.duration
    if report.when == "call":
        _cells[notebook] += 1


def _over() -> list[str]:
    per_nb, whole = _budgets()
    over = [f"{nb} took {t:.1f} s (budget {per_nb:.0f} s)" for nb, t in _times.items() if t > per_nb]
    total = time.perf_counter() - _start
    if total > whole:
        over.append(f"the nbval stage took {total:.1f} s (budget {whole:.0f} s)")
    return over


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _times:
        return
    per_nb, whole = _budgets()
    tr = terminalreporter
    tr.section("notebook execution times")
    for nb in sorted(_times):
        flag = "  OVER BUDGET" if _times[nb] > per_nb else ""
        tr.write_line(f"{_times[nb]:7.1f} s  {_cells[nb]:4d} cells  {nb}{flag}")
    total = time.perf_counter() - _start
    tr.write_line(f"{sum(_times.values()):7.1f} s  in notebooks; stage so far {total:.1f} s (budgets: {per_nb:.0f} s per chapter, {whole:.0f} s in all)")
    for line in _over():
        tr.write_line(f"over budget: {line}", yellow=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("MTLIB_NB_BUDGET_STRICT") == "1" and _over() and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
