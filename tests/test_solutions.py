"""Every self-check has a reference solution that passes it, rejects typical bugs, accepts variants.

The checkers are discovered, not listed: every ``check_*`` in the ``__all__`` of a module
``mtlib/exercises/chNN.py`` must have

- a reference solution, the function named after it without ``check_`` in
  ``tests/solutions/chNN.py`` (used by ``python -m mtlib.assign`` for nbgrader courses);
- at least three typical bugs it rejects with a message naming the failed case, and at least
  one correct variant it accepts, in ``tests/solutions/catalogue.py``.

So a new chapter's checker fails here, with a message saying what to add, until both exist.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import mtlib.exercises
from mtlib import exercises
from tests.solutions.catalogue import BUGS, VARIANTS, guide_table, table

SOLUTIONS = Path(__file__).parent / "solutions"


def _chapter_modules() -> list[ModuleType]:
    names = [
        m.name
        for m in pkgutil.iter_modules(mtlib.exercises.__path__)
        if re.fullmatch(r"ch\d\d", m.name)
    ]
    return [importlib.import_module(f"mtlib.exercises.{name}") for name in sorted(names)]


CHECKERS: list[tuple[str, str]] = [  # (chapter module "ch03", checker name)
    (module.__name__.rsplit(".", 1)[1], name)
    for module in _chapter_modules()
    for name in getattr(module, "__all__", [])
    if name.startswith("check_")
]
IDS = [name for _, name in CHECKERS]


def _checker(chapter: str, name: str) -> Callable[[Callable[..., Any]], None]:
    return getattr(importlib.import_module(f"mtlib.exercises.{chapter}"), name)


def _solution(chapter: str, name: str) -> Callable[..., Any]:
    path = SOLUTIONS / f"{chapter}.py"
    wanted = name[len("check_") :]
    if not path.exists():
        pytest.fail(
            f"{name} (mtlib/exercises/{chapter}.py) has no reference solution: create {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path} with a function {wanted}(...) taking the chapter stub's parameters"
        )
    module = importlib.import_module(f"tests.solutions.{chapter}")
    if not inspect.isfunction(getattr(module, wanted, None)):
        pytest.fail(
            f"{name} has no reference solution: add a function {wanted}(...) to tests/solutions/{chapter}.py"
        )
    return getattr(module, wanted)


def test_checkers_are_discovered_and_exported() -> None:
    assert len(CHECKERS) >= 25  # chapters 1-8 have 25
    for _, name in CHECKERS:
        assert callable(getattr(exercises, name, None)), (
            f"{name} is not exported by mtlib.exercises"
        )


@pytest.mark.parametrize(("chapter", "name"), CHECKERS, ids=IDS)
def test_reference_solution_passes_with_one_short_line(
    chapter: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _checker(chapter, name)(_solution(chapter, name))
    out = capsys.readouterr().out
    # one short line: "check_x: all 5 cases passed." (a statistical check states its rates)
    assert re.fullmatch(rf"{name}: all [^\n]{{1,120}}\.\n", out), out


@pytest.mark.parametrize(("chapter", "name"), CHECKERS, ids=IDS)
@pytest.mark.filterwarnings("ignore:The use of `x.T`")  # the k.T bug, on purpose
def test_checker_rejects_at_least_three_typical_bugs(chapter: str, name: str) -> None:
    bugs = BUGS.get(name, [])
    if len(bugs) < 3:
        pytest.fail(
            f"{name}: list at least three typical bugs it rejects in tests/solutions/catalogue.py (BUGS), found {len(bugs)}"
        )
    source = inspect.getsource(_solution(chapter, name)).splitlines()[1:]
    reference_lines = [c for c in (line.split("#")[0].strip() for line in source) if len(c) > 12]
    for bug in bugs:
        with pytest.raises(AssertionError) as info:
            _checker(chapter, name)(bug.fn)
        message = str(info.value)
        assert isinstance(info.value, exercises.CheckFailed), f"{bug.what}: not a CheckFailed"
        assert re.search(r"(?s)" + bug.match, message), (
            f"{bug.what}: {message!r} does not match {bug.match!r}"
        )
        # Names the case and stays short; it never shows the reference solution's code.
        assert message.startswith(f"{name} failed on "), message
        assert len(message) < 1000, message
        for line in reference_lines:
            assert line not in message, f"{bug.what}: the message shows the solution line {line!r}"


@pytest.mark.parametrize(("chapter", "name"), CHECKERS, ids=IDS)
def test_checker_accepts_equivalent_correct_variants(
    chapter: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    variants = VARIANTS.get(name, [])
    if not variants:
        pytest.fail(
            f"{name}: list at least one correct variant it accepts in tests/solutions/catalogue.py (VARIANTS)"
        )
    for variant in variants:
        _checker(chapter, name)(variant)
    assert capsys.readouterr().out.count(f"{name}: all ") == len(variants)


def test_the_catalogue_names_only_real_checkers() -> None:
    known = set(IDS)
    assert set(BUGS) <= known and set(VARIANTS) <= known, (set(BUGS) | set(VARIANTS)) - known


def test_solutions_use_only_torch_and_builtins() -> None:
    """mtlib.assign pastes a solution's body into a notebook where only the setup cell ran."""
    for path in sorted(SOLUTIONS.glob("ch*.py")):
        module = importlib.import_module(f"tests.solutions.{path.stem}")
        imported = {n for n, v in vars(module).items() if isinstance(v, ModuleType)}
        assert imported <= {"torch"}, (
            f"{path.name} imports {imported - {'torch'}}: import inside the function body"
        )
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            source = inspect.getsource(fn)
            assert source.splitlines()[0].rstrip().endswith(":"), (
                f"{fn_name}: keep the signature on one line"
            )
            assert '"""' not in source, f"{fn_name}: no docstring in a solution (use comments)"


def test_the_instructor_guide_shows_the_current_checker_table() -> None:
    assert guide_table() == table(), (
        "book/instructors.md is stale: python -m tests.solutions.catalogue --write"
    )
