"""Rewrite the Colab block of every chapter's setup cell from one template.

Usage (from the repository root)::

    python -m tests.sync_setup_cells              # pin the release tag v<mtlib.__version__>
    python -m tests.sync_setup_cells --ref main   # follow the branch (between releases)
    python -m tests.sync_setup_cells --check      # exit 1 if a chapter differs (changes nothing)

Only the ``if "google.colab" in sys.modules:`` block changes; the chapter's own imports after it
stay. The repository URL comes from ``_config.yml`` (``repository.url``), the same place the
book's buttons read it. After a rewrite, re-execute the notebooks
(``python -m tests.execute_notebooks``) so their stored execution counts stay in order, and
check that the tag exists in the repository before publishing (``git tag v0.2.0 && git push --tags``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

TEMPLATE = """\
if "google.colab" in sys.modules:
    import subprocess

    MTLIB = "mtlib @ git+{url}@{ref}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", MTLIB], check=True)
"""

# The block as chapters write it: the if line, then indented or blank lines, ending with the
# pip call. Anything else in a chapter's setup cell is left alone.
BLOCK = re.compile(r'^if "google\.colab" in sys\.modules:\n(?:(?:    .*)?\n)*?    subprocess\.run\(.*\)\n', re.M)


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def release_ref() -> str:
    """The tag of the mtlib version in this checkout, e.g. ``v0.2.0``."""
    text = (ROOT / "mtlib" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert match, "mtlib/__init__.py defines no __version__"
    return f"v{match.group(1)}"


def rewrite(source: str, ref: str) -> str:
    """Return ``source`` with its Colab block replaced by the template (ValueError if none)."""
    new, count = BLOCK.subn(TEMPLATE.format(url=repository_url(), ref=ref), source, count=1)
    if count != 1:
        raise ValueError('no `if "google.colab" in sys.modules:` block ending in subprocess.run(...)')
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default=None, help="git ref to install (default: v<mtlib.__version__>)")
    parser.add_argument("--check", action="store_true", help="report differences, change nothing")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: chapters/*.ipynb")
    args = parser.parse_args(argv)
    ref = args.ref or release_ref()
    differ = []
    for path in args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip())
        old = "".join(cell["source"])
        new = rewrite(old, ref)
        if new == old:
            continue
        differ.append(path.name)
        if not args.check:
            cell["source"] = new
            nbformat.write(nb, path)
    verb = "differ from" if args.check else "rewritten to"
    print(f"{len(differ)} setup cell(s) {verb} the template (ref {ref}): {', '.join(differ) or '-'}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
