"""Checks of the book as a whole: table of contents, stored outputs, configuration, citations."""

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers import toc_files

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


TOC_FILES = [TOC["root"], *toc_files(TOC)]


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_there_is_at_least_one_chapter():
    assert CHAPTERS, "chapters/ holds no notebook"


def test_toc_and_chapters_list_the_same_notebooks():
    in_toc = sorted(f for f in TOC_FILES if f.startswith("chapters/"))
    on_disk = sorted(f"chapters/{p.stem}" for p in CHAPTERS)
    assert in_toc == on_disk


def test_every_toc_entry_exists():
    for entry in TOC_FILES:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), f"{entry} is in _toc.yml but not on disk"


def test_chapters_are_numbered():
    for path in CHAPTERS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+", path.stem), f"{path.name} should be named NN_topic.ipynb"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_code_cell_is_executed_in_order_with_outputs_stored(path):
    cells = _code_cells(path)
    counts = [c["execution_count"] for c in cells]
    assert None not in counts, f"{path.name}: {counts.count(None)} code cells were never executed"
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: not run top to bottom in one fresh kernel: {counts}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_setup_cell_installs_mtlib_on_colab_from_the_configured_repository(path):
    setup = "".join(_code_cells(path)[0]["source"])
    url = CONFIG["repository"]["url"]
    branch = CONFIG["repository"]["branch"]
    assert '"google.colab" in sys.modules' in setup
    assert f"mtlib @ git+{url}@{branch}" in setup
    assert "utils.setup(" in setup


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_notebooks_use_tags_not_comment_markers_and_leak_no_local_paths(path):
    text = path.read_text()
    assert "NBVAL_" not in text, "use cell tags (nbval-ignore-output, raises-exception): the book builder ignores comments"
    for leak in ("/work/", "/root/", "/home/", "/tmp/"):
        assert leak not in text, f"{path.name} stores the local path {leak!r} in an output"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_widget_state_is_saved_when_a_chapter_shows_a_widget(path):
    nb = json.loads(path.read_text())
    shows_widget = any(
        "application/vnd.jupyter.widget-view+json" in out.get("data", {}) for c in nb["cells"] for out in c.get("outputs", [])
    )
    if shows_widget:
        state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        assert state, "widget views are shown but no widget state is saved (re-run python -m tests.execute_notebooks)"


def test_config_is_what_the_book_relies_on():
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    assert CONFIG["only_build_toc_files"] is True
    assert {"amsmath", "dollarmath", "colon_fence"} <= set(CONFIG["parse"]["myst_enable_extensions"])
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert CONFIG["launch_buttons"]["binderhub_url"]
    assert CONFIG["repository"]["url"].startswith("https://github.com/")
    for bib in CONFIG["bibtex_bibfiles"]:
        assert (ROOT / bib).exists()
    assert TOC["root"] == "book/intro"


def test_every_citation_has_a_bibliography_entry():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,\s]+),", bib))
    sources = [*CHAPTERS, *(ROOT / "book").glob("*.md")]
    cited = set()
    for path in sources:
        for group in re.findall(r"\{cite(?::[pt])?\}`([^`]+)`", path.read_text()):
            cited.update(key.strip() for key in group.split(","))
    assert cited, "no citations found"
    assert cited <= keys, f"cited but not in references.bib: {sorted(cited - keys)}"


def test_requirements_pin_jupyter_book_1_and_admit_the_ci_torch():
    reqs = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^jupyter-book[^\n]*<2", reqs, re.M) or "jupyter-book==1." in reqs
    assert re.search(r"^torch>=2\.\d+$", reqs, re.M)
    assert re.search(r"^-e \.$", reqs, re.M)


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_commands = [c for c in commands if "tests/run_all.sh" in c]
    assert len(test_commands) == 1, "the README should show one test command"
    assert test_commands[0].strip() in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_outputs_are_ignored_only_where_volatile_by_nature(path):
    """nbval-ignore-output is for the setup cell (it names the device) and widget explorers
    (whose redraws land inside the widget in Jupyter but in the cell under nbval); nothing else."""
    for number, cell in enumerate(_code_cells(path)):
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            source = "".join(cell["source"])
            assert number == 0 or "viz.explorer(" in source, f"{path.name}: code cell {number} ignores its output"
        assert "nbval-skip" not in cell["metadata"].get("tags", []), f"{path.name}: code cell {number} is skipped"
