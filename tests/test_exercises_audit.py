"""The self-checks as the chapters show them: stored outputs, messages, the learner's line.

- Each chapter's exercise cell (a stub, then ``exercises.check_...``) is run here against the
  current checkers, and must give the error its committed output shows: a change to a checker
  that changes what a reader sees (the case count, the first case) fails here, in a second, not
  in a minute of nbval.
- When the learner's code raises, every checker names the case and the learner's own line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from mtlib import exercises

CHAPTERS = Path(__file__).resolve().parent.parent / "chapters"


def _exercise_cells() -> list[tuple[str, int, str, dict]]:
    found = []
    for path in sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb")):
        for number, cell in enumerate(json.loads(path.read_text())["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and re.search(r"^exercises\.check_", source, re.M):
                errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
                if errors:
                    found.append((path.stem, number, source, errors[0]))
    return found


CELLS = _exercise_cells()


def test_every_chapter_with_exercises_is_audited() -> None:
    assert {stem[:2] for stem, *_ in CELLS} >= {f"{n:02d}" for n in range(1, 9)}


@pytest.mark.parametrize(
    ("stem", "number", "source", "stored"), CELLS, ids=[f"{s[:2]}-cell{n}" for s, n, *_ in CELLS]
)
def test_the_stored_output_of_an_exercise_cell_is_what_the_checker_says_now(
    stem: str, number: int, source: str, stored: dict
) -> None:
    namespace = {"torch": torch, "exercises": exercises}
    with pytest.raises(exercises.CheckFailed) as info:
        exec(compile(source, f"{stem} cell {number}", "exec"), namespace)
    assert (type(info.value).__name__, str(info.value)) == (stored["ename"], stored["evalue"]), (
        f"{stem} cell {number}: the checker's message changed; re-execute the chapter"
    )


def _raises(*args, **kwargs):
    return [1, 2][5]  # the learner's bug: an IndexError in their own code


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in exercises.__all__
        if n.startswith("check_") and getattr(exercises, n).__module__.rsplit(".", 1)[1] <= "ch08"
    ],
)
def test_a_raising_function_is_reported_with_the_case_and_the_learners_line(name: str) -> None:
    with pytest.raises(exercises.CheckFailed) as info:
        getattr(exercises, name)(_raises)
    message = str(info.value)
    assert re.match(
        rf"{name} failed on case 1 of \d+ \(.+\): your function raised IndexError", message
    ), message
    assert "in your code, line" in message and "return [1, 2][5]" in message, message
