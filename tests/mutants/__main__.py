"""``python -m tests.mutants [ID ...]``: run the bug zoo and fail if a real bug survives.

For each mutant of :mod:`tests.mutants.catalogue` (or only the IDs given), ``--jobs`` of them
at a time (default 2, each in its own scratch copy; results are printed as they finish and
summed up in catalogue order):

1. check that its original snippet occurs exactly once in the current code (else the catalogue
   has rotted: the run fails), and that the mutated file still compiles;
2. write the mutated file into a scratch copy of ``mtlib/`` and ``tests/`` (the repository is
   never touched);
3. run the test files that cover the module there (``pytest -x -q``), importing ``mtlib`` from
   the copy (checked), and record the first failing test.

The tests run in a child process forked from this one after ``torch`` is imported, which saves
the few seconds of importing it for every mutant; ``mtlib`` itself is imported only in the child.
First the unmutated copy must pass every test file used, so that a failure means the mutant.

Exit status 0 only if every non-equivalent mutant is killed and every equivalent one survives.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.mutants.catalogue import MODULE_TESTS, MUTANTS, Mutant

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("mtlib", "tests")  # directories copied into the scratch repository
TIMEOUT_S = 300.0  # a mutant whose tests run longer (an endless loop) counts as killed


@dataclass
class Outcome:
    status: str  # "killed", "survived", "timeout" or "error"
    first_failure: str  # the first failing test (node id), or why nothing ran
    seconds: float


def _copy_repo(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in COPIED:
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")  # pytest's settings


def _child(scratch: Path, test_files: tuple[str, ...], result_file: Path) -> int:
    """Runs in the forked child: import mtlib from the copy, run pytest, write the result."""
    import pytest

    sys.dont_write_bytecode = True  # never a stale .pyc of a previous mutant
    os.chdir(scratch)
    os.environ["PYTHONPATH"] = str(scratch)
    sys.path.insert(0, str(scratch))
    for name in list(sys.modules):  # the parent's `tests` package is the repository's
        if name == "tests" or name.startswith("tests.") or name.split(".")[0] == "mtlib":
            del sys.modules[name]
    import mtlib

    imported = Path(mtlib.__file__).resolve()
    if not imported.is_relative_to(scratch.resolve()):
        result_file.write_text(json.dumps({"error": f"mtlib imported from {imported}"}))
        return 3

    class FirstFailure:
        first: str | None = None

        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            if report.failed and self.first is None:
                self.first = report.nodeid

        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            if report.failed and self.first is None:
                self.first = f"collection error in {report.nodeid}"

    plugin = FirstFailure()
    args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:pytest_cov"]
    code = pytest.main([*args, "--rootdir", str(scratch), *test_files], plugins=[plugin])
    result_file.write_text(json.dumps({"code": int(code), "first": plugin.first}))
    return 0


def _fork_tests(scratch: Path, test_files: tuple[str, ...], quiet: bool) -> tuple[int, float]:
    """Fork a child that runs the tests in ``scratch``; return its pid and start time."""
    result_file = scratch / ".mutant_result.json"
    result_file.unlink(missing_ok=True)
    start = time.perf_counter()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        status = 1
        try:
            if quiet:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
            status = _child(scratch, test_files, result_file)
        finally:
            os._exit(status)
    return pid, start


def _poll(scratch: Path, pid: int, start: float) -> Outcome | None:
    """The child's outcome once it has finished (or run out of time); None while it runs."""
    done, _ = os.waitpid(pid, os.WNOHANG)
    if not done:
        if time.perf_counter() - start <= TIMEOUT_S:
            return None
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return Outcome("timeout", f"tests still running after {TIMEOUT_S:.0f} s", TIMEOUT_S)
    seconds = time.perf_counter() - start
    result_file = scratch / ".mutant_result.json"
    if not result_file.exists():
        return Outcome("error", "the test process died without a result", seconds)
    result = json.loads(result_file.read_text())
    if "error" in result:
        return Outcome("error", result["error"], seconds)
    code, first = result["code"], result["first"]
    if code == 0:
        return Outcome("survived", "", seconds)
    if code in (1, 2) and first:  # 1: a test failed; 2: interrupted by -x or a collection error
        return Outcome("killed", first, seconds)
    return Outcome("error", f"pytest exit code {code}", seconds)


def _run_tests(scratch: Path, test_files: tuple[str, ...], quiet: bool) -> Outcome:
    """Fork, run the tests in the child, wait, and classify the result."""
    pid, start = _fork_tests(scratch, test_files, quiet)
    while (outcome := _poll(scratch, pid, start)) is None:
        time.sleep(0.05)
    return outcome


def _tests_for(mutant: Mutant) -> tuple[str, ...]:
    return mutant.tests if mutant.tests is not None else MODULE_TESTS[mutant.file]


def _check_catalogue(mutants: list[Mutant]) -> list[str]:
    """Problems that make the catalogue unusable: duplicates, rotted or non-compiling edits."""
    problems = []
    ids = [m.id for m in MUTANTS]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"{dup}: duplicate id")
    for m in mutants:
        path = ROOT / m.file
        if m.file not in MODULE_TESTS and m.tests is None:
            problems.append(f"{m.id}: no tests listed for {m.file} (MODULE_TESTS or tests=)")
            continue
        source = path.read_text() if path.exists() else ""
        count = source.count(m.original)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            problems.append(f"{m.id}: original snippet {where} in {m.file}: {m.original!r}")
            continue
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
            continue
        try:
            compile(source.replace(m.original, m.replacement), m.file, "exec")
        except SyntaxError as err:
            problems.append(f"{m.id}: the mutated {m.file} does not compile: {err}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", help="run only these mutants (default: all)")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument("--verbose", action="store_true", help="show pytest's output")
    parser.add_argument(
        "--jobs", type=int, default=int(os.environ.get("MTLIB_MUTANT_JOBS", 2)),
        help="mutants tested at once, each in its own copy (default 2, or MTLIB_MUTANT_JOBS)",
    )
    parser.add_argument(
        "--tests", nargs="+", metavar="TEST",
        help="run these test files or node ids instead of the catalogue's (which test kills it?)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")

    unknown = sorted(set(args.ids) - {m.id for m in MUTANTS})
    if unknown:
        parser.error(f"unknown mutant ids: {unknown}")
    mutants = [m for m in MUTANTS if not args.ids or m.id in args.ids]
    if args.list:
        for m in mutants:
            tag = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
            print(f"{m.id:4} {m.file:22} {m.description}{tag}")
        return 0

    problems = _check_catalogue(mutants)
    if problems:
        print("The catalogue does not match the code:", *problems, sep="\n  ")
        return 2

    import torch  # imported once here, before forking: the children share it

    torch.set_num_threads(1)
    import pytest  # noqa: F401  (also shared by the children)

    override = tuple(args.tests) if args.tests else None
    total_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mtlib-mutants-") as tmp:
        scratches = [Path(tmp) / f"copy{i}" for i in range(args.jobs)]  # one per concurrent run
        for scratch in scratches:
            _copy_repo(scratch)
        used = override or tuple(dict.fromkeys(f for m in mutants for f in _tests_for(m)))
        baseline = _run_tests(scratches[0], used, quiet=not args.verbose)
        print(f"baseline (unmutated copy, {len(used)} test files): {baseline.status} "
              f"in {baseline.seconds:.1f} s {baseline.first_failure}")
        if baseline.status != "survived":
            print("The unmutated tests must pass before mutants can be judged.")
            return 2
        outcomes: dict[str, Outcome] = {}
        queue = list(mutants)
        running: dict[int, tuple[Mutant, int, float, str]] = {}  # copy -> mutant, pid, start, file
        while queue or running:
            for slot in range(args.jobs):  # start a mutant in every free copy
                if slot in running or not queue:
                    continue
                m = queue.pop(0)
                path = scratches[slot] / m.file
                original = path.read_text()
                path.write_text(original.replace(m.original, m.replacement))
                pid, start = _fork_tests(scratches[slot], override or _tests_for(m), not args.verbose)
                running[slot] = (m, pid, start, original)
            for slot, (m, pid, start, original) in list(running.items()):
                outcome = _poll(scratches[slot], pid, start)
                if outcome is None:
                    continue
                (scratches[slot] / m.file).write_text(original)  # the copy is unmutated again
                del running[slot]
                outcomes[m.id] = outcome
                expected = "survived" if m.equivalent else "killed"
                ok = outcome.status == expected or (outcome.status == "timeout" and not m.equivalent)
                flag = "" if ok else "   <-- " + (
                    "SURVIVED: add a test that kills it" if not m.equivalent
                    else "listed as equivalent but killed: fix the catalogue"
                )
                status = f"{outcome.status}{' (equivalent)' if m.equivalent else ''}"
                print(f"{m.id:4} {status:21} {outcome.seconds:5.1f} s  {outcome.first_failure}{flag}",
                      flush=True)
            time.sleep(0.05)
        rows = []
        for m in mutants:  # in catalogue order
            outcome = outcomes[m.id]
            expected = "survived" if m.equivalent else "killed"
            ok = outcome.status == expected or (outcome.status == "timeout" and not m.equivalent)
            rows.append((m, outcome, ok))
    total = time.perf_counter() - total_start

    bad = [m.id for m, _, ok in rows if not ok]
    killed = sum(o.status in ("killed", "timeout") for _, o, _ in rows)
    equivalent = sum(bool(m.equivalent) for m, _, _ in rows)
    print(f"\n{len(rows)} mutants ({equivalent} equivalent): {killed} killed, "
          f"{len(rows) - killed} survived, in {total:.0f} s")
    if bad:
        print(f"FAILED: {', '.join(bad)}")
        return 1
    print("every non-equivalent mutant was killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
