"""The Colab branch of every chapter's setup cell, executed offline with Colab simulated.

Each chapter's first code cell installs mtlib when ``google.colab`` is imported (on Colab) and
does nothing elsewhere. Here that branch runs for real, with a stand-in ``google.colab`` module
in ``sys.modules`` and ``subprocess.run`` recorded instead of called: it must pip-install mtlib
from the repository configured in ``_config.yml``, at the chapters' common ref, without touching
Colab's preinstalled torch (no ``--upgrade``, no torch requirement of its own).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from tests.sync_setup_cells import TEMPLATE, release_ref, rewrite

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
URL = CONFIG["repository"]["url"]
# The branch between releases, or the release tag of this mtlib (tests/sync_setup_cells.py).
ALLOWED_REFS = {CONFIG["repository"]["branch"], release_ref()}


def _setup_source(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return next("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip())


def _colab_branch(source: str) -> ast.Module:
    """``import sys`` plus the cell's top-level ``if "google.colab" in sys.modules:`` statement."""
    tree = ast.parse(source)
    branches = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Constant)
        and node.test.left.value == "google.colab"
        and isinstance(node.test.ops[0], ast.In)
        and ast.unparse(node.test.comparators[0]) == "sys.modules"
    ]
    assert len(branches) == 1, 'the setup cell needs exactly one top-level `if "google.colab" in sys.modules:`'
    first = tree.body.index(branches[0])
    assert any(isinstance(n, ast.Import) and any(a.name == "sys" for a in n.names) for n in tree.body[:first]), (
        "import sys before the Colab check"
    )
    return ast.Module(body=[ast.Import(names=[ast.alias(name="sys")]), branches[0]], type_ignores=[])


def _run_branch(source: str, monkeypatch, *, on_colab: bool) -> list[tuple[list[str], dict]]:
    calls: list[tuple[list[str], dict]] = []

    def fake_run(cmd, *args, **kwargs):
        calls.append((list(cmd), kwargs))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    if on_colab:
        google = types.ModuleType("google")
        colab = types.ModuleType("google.colab")
        google.colab = colab  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", colab)
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    code = compile(ast.fix_missing_locations(_colab_branch(source)), "<setup cell>", "exec")
    exec(code, {"__name__": "__colab_setup__"})  # noqa: S102 - the chapter's own code, offline
    return calls


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_on_colab_the_setup_cell_pip_installs_mtlib_from_the_repository(path, monkeypatch):
    calls = _run_branch(_setup_source(path), monkeypatch, on_colab=True)
    assert len(calls) == 1, f"expected one pip call on Colab, got {calls}"
    cmd, kwargs = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"], cmd
    assert kwargs.get("check") is True, "a failed install must stop the notebook (check=True)"
    specs = [a for a in cmd[4:] if not a.startswith("-")]
    assert len(specs) == 1, f"install mtlib only (Colab's torch stays): {specs}"
    match = re.fullmatch(r"mtlib @ git\+(?P<url>\S+)@(?P<ref>\S+)", specs[0])
    assert match, f"not a pinned git requirement: {specs[0]!r}"
    assert match["url"] == URL, f"installs from {match['url']}, the book's repository is {URL}"
    assert match["ref"] in ALLOWED_REFS, f"ref {match['ref']!r} is not one of {sorted(ALLOWED_REFS)}"
    for flag in ("-U", "--upgrade", "--force-reinstall", "--no-deps"):
        assert flag not in cmd, f"{flag} would replace or skip Colab's preinstalled packages"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_off_colab_the_setup_cell_installs_nothing(path, monkeypatch):
    assert _run_branch(_setup_source(path), monkeypatch, on_colab=False) == []


def test_all_chapters_pin_the_same_ref_and_match_the_template():
    refs = {re.search(r"git\+\S+@(\S+)\"", _setup_source(p)).group(1) for p in CHAPTERS}
    assert len(refs) == 1, f"chapters install different mtlib refs: {refs} (python -m tests.sync_setup_cells)"
    (ref,) = refs
    for path in CHAPTERS:
        source = _setup_source(path)
        assert rewrite(source, ref) == source, f"{path.name}: Colab block differs from the template (python -m tests.sync_setup_cells --ref {ref})"


def test_template_is_what_the_test_executes(monkeypatch):
    source = "import sys\n\n" + TEMPLATE.format(url=URL, ref=release_ref()) + "\nimport mtlib\n"
    (cmd, _), = _run_branch(source, monkeypatch, on_colab=True)
    assert cmd[-1] == f"mtlib @ git+{URL}@{release_ref()}"
