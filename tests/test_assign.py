"""mtlib.assign: nbgrader course sources from the chapters, and the real nbgrader round trip.

The round trip (``test_nbgrader_round_trip``) runs nbgrader's own commands offline on three
chapters: generate_assignment, then one autograde call on three students (a correct submission,
the unmodified student version and a typical wrong answer). nbgrader is in the ``test`` extra;
the test is skipped only when nbgrader is missing AND ``MTLIB_ALLOW_NO_NBGRADER=1`` (CI installs
it, so there it must run).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtlib import assign

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
SOLUTIONS = ROOT / "tests" / "solutions"


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _chapters_with_checks() -> list[Path]:
    return [
        p
        for p in sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb"))
        if "exercises.check_" in p.read_text()
    ]


def _without_markers(text: str) -> str:
    return "\n".join(
        line
        for line in text.split("\n")
        if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line
    )


# ------------------------------------------------------------------------- generation, no nbgrader
@pytest.mark.parametrize("chapter", _chapters_with_checks(), ids=lambda p: p.stem[:2])
def test_every_chapter_gives_a_well_formed_assignment(chapter: Path) -> None:
    nb = assign.assignment_notebook(chapter, SOLUTIONS, points=2)
    cells = nb["cells"]
    chapter_checks = [
        c
        for cell in json.loads(chapter.read_text())["cells"]
        for c in re.findall(r"^exercises\.(check_\w+)\(", _src(cell), re.M)
    ]
    assert chapter_checks
    meta = [c["metadata"]["nbgrader"] for c in cells]
    assert all(m["schema_version"] == 3 for m in meta)
    ids = [m["grade_id"] for m in meta]
    assert len(ids) == len(set(ids))  # nbgrader requires unique grade ids
    tests = [c for c, m in zip(cells, meta, strict=True) if m["grade"]]
    answers = [c for c, m in zip(cells, meta, strict=True) if m["solution"]]
    # one locked test cell per check call, worth the points given, containing only the call
    assert [
        re.fullmatch(r"exercises\.(check_\w+)\(\w+\)", _src(c)).group(1) for c in tests
    ] == chapter_checks
    assert all(m["locked"] and m["points"] == 2 for m in meta if m["grade"])
    # every other cell is either an answer cell or locked read-only
    assert all(m["locked"] != m["solution"] for m in meta)
    for cell in answers:
        text = _src(cell)
        assert text.count(assign.BEGIN) == text.count(assign.END) >= 1
        assert "exercises.check_" not in text and "NotImplementedError" not in text
    # the setup cell is included, and no experiment: only title, setup, prompts, answers, tests
    assert "utils.setup(seed=0)" in _src(cells[1])
    assert len(cells) == 2 + 2 * len(answers) + len(tests)
    assert not any(c.get("outputs") for c in cells)


def test_every_generated_solution_passes_its_checks_in_a_fresh_interpreter() -> None:
    """Each chapter's source notebook, markers removed, run cell by cell (setup, answers, checks)
    in a fresh namespace: the solutions need nothing from the chapter but its setup cell."""
    programs = []
    expected = 0
    for chapter in _chapters_with_checks():
        cells = assign.assignment_notebook(chapter, SOLUTIONS)["cells"]
        code = [_without_markers(_src(c)) for c in cells if c["cell_type"] == "code"]
        expected += sum(c["metadata"]["nbgrader"]["grade"] for c in cells)
        programs.append(code)
    runner = (
        "import json, sys\n"
        "for cells in json.loads(sys.stdin.read()):\n"
        "    namespace = {}\n"
        "    for code in cells:\n"
        "        exec(compile(code, 'cell', 'exec'), namespace)\n"
    )
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-c", runner],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(re.findall(r"^check_\w+: all ", result.stdout, re.M)) == expected, result.stdout


def test_the_find_the_bug_exercise_keeps_the_chapters_code_for_the_student() -> None:
    nb = assign.assignment_notebook(CHAPTERS / "05_masking.ipynb", SOLUTIONS)
    answer = next(_src(c) for c in nb["cells"] if c["metadata"]["nbgrader"]["solution"])
    assert answer.startswith(
        "def buggy_causal_mask(n):\n    # query i may attend to key j iff j <= i\n"
    )
    before, region = answer.split(assign.BEGIN)
    assert "# return rows <= cols" in before  # the bug, shown as a comment
    assert "return rows >= cols" in region and "rows = torch.arange(n)[:, None]" in before


def test_solutions_are_read_not_run_and_keep_their_comments(tmp_path: Path) -> None:
    (tmp_path / "ch05.py").write_text(
        "raise SystemExit('never run')\n\n\ndef causal_mask(n):\n    # lower triangle\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
    )
    solution = assign.load_solution(tmp_path, "check_causal_mask")
    assert solution.signature == "n"
    assert solution.body == ["# lower triangle", "return torch.ones(n, n, dtype=torch.bool).tril()"]


def test_a_solution_with_other_parameters_than_the_stub_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ch05.py").write_text(
        (SOLUTIONS / "ch05.py")
        .read_text()
        .replace("def padding_mask(lengths, max_len)", "def padding_mask(lengths, n)")
    )
    with pytest.raises(
        assign.AssignError,
        match=r"my_padding_mask\(lengths, max_len\) and the solution padding_mask\(lengths, n\)",
    ):
        assign.assignment_notebook(CHAPTERS / "05_masking.ipynb", tmp_path)


def test_missing_solutions_or_chapters_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    course = tmp_path / "course"
    assert (
        assign.main(
            ["nbgrader", "3", "--course", str(course), "--solutions", str(tmp_path / "nowhere")]
        )
        == 2
    )
    assert "no reference solutions" in capsys.readouterr().err
    assert assign.main(["nbgrader", "99", "--course", str(course)]) == 2
    assert "chapter '99': expected one 99_*.ipynb" in capsys.readouterr().err
    (tmp_path / "ch03.py").write_text("")
    assert (
        assign.main(["nbgrader", "3", "--course", str(course), "--solutions", str(tmp_path)]) == 2
    )
    assert (
        "check_scaled_dot_product_attention: no function scaled_dot_product_attention(...)"
        in capsys.readouterr().err
    )
    with pytest.raises(assign.AssignError, match="no chapters folder"):
        assign.find_chapter("3", None)
    with pytest.raises(SystemExit):
        assign.main(["nbgrader", "3"])  # --course is required


def test_the_command_writes_the_course_and_keeps_an_edited_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    course = tmp_path / "course"
    assert (
        assign.main(
            ["nbgrader", "3", "chapters/05_masking.ipynb", "--course", str(course), "--points", "3"]
        )
        == 0
    )
    assert sorted(p.relative_to(course).as_posix() for p in course.rglob("*.ipynb")) == [
        "source/ch03/03_scaled_dot_product_attention.ipynb",
        "source/ch05/05_masking.ipynb",
    ]
    config = (course / "nbgrader_config.py").read_text()
    assert "c.ClearSolutions.code_stub" in config and "sqlite:///gradebook.db" in config
    compile(config, "nbgrader_config.py", "exec")
    (course / "nbgrader_config.py").write_text("# mine\n")
    assert assign.main(["nbgrader", "3", "--course", str(course), "--assignment", "week1"]) == 0
    assert (course / "nbgrader_config.py").read_text() == "# mine\n"
    assert (course / "source" / "week1" / "03_scaled_dot_product_attention.ipynb").is_file()
    assert "wrote " in capsys.readouterr().out
    with pytest.raises(assign.AssignError, match="points must be a positive integer"):
        assign.assignment_notebook(
            CHAPTERS / "03_scaled_dot_product_attention.ipynb", SOLUTIONS, points=0
        )


def test_cells_tagged_assignment_are_included_read_only(tmp_path: Path) -> None:
    chapter = json.loads((CHAPTERS / "03_scaled_dot_product_attention.ipynb").read_text())
    chapter["cells"][5].setdefault("metadata", {})["tags"] = ["assignment"]
    path = tmp_path / "03_mine.ipynb"
    path.write_text(json.dumps(chapter))
    cells = assign.assignment_notebook(path, SOLUTIONS)["cells"]
    assert _src(cells[2]) == _src(chapter["cells"][5])
    assert (
        cells[2]["metadata"]["nbgrader"]["locked"]
        and not cells[2]["metadata"]["nbgrader"]["solution"]
    )


# ------------------------------------------------------------------------- the real nbgrader flow
WRONG = {  # chapter -> (the function to replace in the student version, a typical wrong body, hint)
    "03_scaled_dot_product_attention": (
        "def my_attention(q, k, v, mask=None):",
        "    return (q @ k.transpose(-2, -1)).softmax(-1) @ v",
        "Hint: your output is attention WITHOUT the scale",
    ),
    "05_masking": (
        "def buggy_causal_mask(n):",
        "    return torch.ones(n, n, dtype=torch.bool).tril(1)",
        "Hint: you allow the next token too",
    ),
    "06_positional_encoding": (
        "def my_table(positions, d_model, base=10000.0):",
        "    angles = positions[:, None].double() / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)\n"
        "    return torch.stack([angles.cos(), angles.sin()], -1).flatten(-2)",
        "Hint: sine and cosine are swapped",
    ),
}


def _nbgrader_available() -> bool:
    return importlib.util.find_spec("nbgrader") is not None


def _nbgrader(course: Path, *args: str) -> float:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return time.perf_counter() - start


def test_nbgrader_round_trip(tmp_path: Path) -> None:
    if not _nbgrader_available():
        if os.environ.get("MTLIB_ALLOW_NO_NBGRADER") == "1":
            pytest.skip("nbgrader is not installed (pip install 'mtlib[instructor]')")
        pytest.fail(
            "nbgrader is not installed: pip install -e '.[test]' (or set MTLIB_ALLOW_NO_NBGRADER=1 to skip)"
        )
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    timings = {}
    start = time.perf_counter()
    assign.write_course([CHAPTERS / f"{name}.ipynb" for name in WRONG], course, SOLUTIONS)
    timings["mtlib.assign"] = time.perf_counter() - start
    timings["generate_assignment"] = _nbgrader(course, "generate_assignment", "ch*")

    for name, (header, wrong_body, _) in WRONG.items():
        assignment = f"ch{name[:2]}"
        source = json.loads((course / "source" / assignment / f"{name}.ipynb").read_text())
        release = json.loads((course / "release" / assignment / f"{name}.ipynb").read_text())
        # the student version has the chapter's stubs and no solution
        answers = [
            _src(c) for c in release["cells"] if c["metadata"].get("nbgrader", {}).get("solution")
        ]
        assert answers and all('raise NotImplementedError("your code here")' in a for a in answers)
        assert not any("SOLUTION" in _src(c) for c in release["cells"])
        good = json.loads(json.dumps(source))
        for cell in good["cells"]:
            cell["source"] = _without_markers(_src(cell))
        wrong = json.loads(json.dumps(good))  # correct but for one typical mistake in exercise 1
        swapped = 0
        for cell in wrong["cells"]:
            if _src(cell).startswith(header):
                cell["source"] = f"{header}\n{wrong_body}\n"
                swapped += 1
        assert swapped == 1, f"{name}: no solution cell starts with {header!r} (the stub changed?)"
        for student, notebook in (("correct", good), ("untouched", release), ("wrong", wrong)):
            target = course / "submitted" / student / assignment / f"{name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(notebook))

    timings["autograde (9 notebooks)"] = _nbgrader(course, "autograde", "ch*", "--create")
    print("nbgrader round trip, seconds:", {k: round(v, 1) for k, v in timings.items()})

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for name, (_, _, hint) in WRONG.items():
            assignment = f"ch{name[:2]}"
            scores = {
                s: gradebook.find_submission(assignment, s)
                for s in ("correct", "untouched", "wrong")
            }
            assert scores["correct"].max_score >= 3
            assert scores["correct"].score == scores["correct"].max_score, assignment
            assert scores["untouched"].score == 0, assignment
            grades = {g.name: g.score for g in scores["wrong"].notebooks[0].grades}
            mistaken = [g for g in grades if g.startswith("exercise1-")]
            assert [grades[g] for g in mistaken] == [0]  # the wrong answer earns nothing
            assert (
                scores["wrong"].score == scores["wrong"].max_score - 1
            )  # the others all they are worth
            graded = json.loads(
                (course / "autograded" / "wrong" / assignment / f"{name}.ipynb").read_text()
            )
            errors = [
                o
                for c in graded["cells"]
                for o in c.get("outputs", [])
                if o["output_type"] == "error"
            ]
            assert any(hint in o["evalue"] for o in errors), (
                assignment,
                [o["evalue"] for o in errors],
            )
            assert any("failed on case 1 of" in o["evalue"] for o in errors)
