"""Write book/api.md: one explicit ``automodule`` block per public mtlib module.

Usage (from the repository root): ``python -m tests.sync_api_page`` after adding a module;
``--check`` exits 1 if the page is stale. tests/test_publishing.py checks that every public
module has its block. One page of explicit blocks (not a generated tree of stub files) is what
works with ``_toc.yml``; a package's own block shows only its overview (``:no-members:``), its
names are documented once, under the module that defines them.
"""

from __future__ import annotations

import argparse
import pkgutil
import sys
from pathlib import Path

import mtlib

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "api.md"

# Sections in the order of the book; a module goes to the first section whose prefix it has.
SECTIONS = [
    ("The package", ("mtlib",), True),
    ("Utilities and plots", ("mtlib.utils", "mtlib.viz"), True),
    ("Attention", ("mtlib.attention", "mtlib.masks", "mtlib.positional"), True),
    ("The Transformer", ("mtlib.blocks", "mtlib.transformer", "mtlib.loading"), True),
    ("Models", ("mtlib.models",), False),
    ("Training", ("mtlib.train", "mtlib.distributed", "mtlib.denoising"), False),
    ("Data", ("mtlib.data",), False),
    ("Exercises", ("mtlib.exercises",), False),
    ("Experiments", ("mtlib.experiments",), False),
    ("Tools", ("mtlib.bench", "mtlib.assign"), False),
]

HEADER = """\
# API reference: `mtlib`

Every public module of `mtlib`, generated from its docstrings (Google style; shapes are
batch-first, see {doc}`notation`). A package's own entry shows its overview; its classes and
functions are listed under the module that defines them. Types from PyTorch, NumPy and
matplotlib are not linked (that would need the network at build time). The book's Chinese
edition shows this reference in English too: it is generated from the docstrings, which live in
the code and change with it.

<!-- Written by `python -m tests.sync_api_page`: edit that script, not this page. -->
"""


def public_modules() -> list[tuple[str, bool]]:
    """(name, is_package) for mtlib and every submodule without a ``_`` component."""
    found = [("mtlib", True)]
    for m in pkgutil.walk_packages(mtlib.__path__, "mtlib."):
        if not any(part.startswith("_") for part in m.name.split(".")):
            found.append((m.name, m.ispkg))
    return sorted(found)


def _section(name: str) -> str:
    for title, prefixes, exact in SECTIONS:
        for prefix in prefixes:
            if name == prefix or (not exact and name.startswith(prefix + ".")):
                return title
    return "Other modules"


def render() -> str:
    by_section: dict[str, list[tuple[str, bool]]] = {}
    for name, is_pkg in public_modules():
        by_section.setdefault(_section(name), []).append((name, is_pkg))
    out = [HEADER]
    for title in [t for t, _, _ in SECTIONS] + ["Other modules"]:
        if title not in by_section:
            continue
        out.append(f"## {title}\n")
        for name, is_pkg in by_section[title]:
            options = "\n   :no-members:" if is_pkg else ""
            out.append(f"```{{eval-rst}}\n.. automodule:: {name}{options}\n```\n")
            if name == "mtlib.exercises":  # what every checker raises; defined in a private module
                out.append("```{eval-rst}\n.. autoexception:: mtlib.exercises.CheckFailed\n```\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if book/api.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        stale = PAGE.read_text() != text
        print("book/api.md is stale: python -m tests.sync_api_page" if stale else "book/api.md is up to date")
        return int(stale)
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}: {text.count('.. automodule::')} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
