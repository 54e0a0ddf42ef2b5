"""The Chinese edition (zh_CN): extract, check and build, from one set of English sources.

The book is written once, in English. Sphinx's gettext builder extracts the prose of every page
(headings, paragraphs, list items of the markdown cells; never code cells or outputs, because
``gettext_additional_targets`` stays empty) into one message catalog per page, and translators
fill ``locale/zh_CN/LC_MESSAGES/<page>.po``. The zh_CN build renders the same sources with the
translated prose, so code cells and outputs cannot drift: :func:`drift_problems` proves it on the
built HTML.

Usage, from the repository root::

    python -m tests.i18n extract   # after an English edit: update locale/zh_CN (new messages
                                   # empty, changed ones fuzzy with the previous English kept)
    python -m tests.i18n renumber  # after a re-execution moved numbers in the prose: carry each
                                   # number-only change into the translation (no translator needed)
    python -m tests.i18n check     # CI: catalogs up to date, coverage table, markup, msgfmt -c
    python -m tests.i18n build     # both editions: _build/html (English) + _build/html/zh_CN/
    python -m tests.i18n drift     # CI, after build: zh code cells and outputs == English ones

Pages come from ``_toc.yml``, so a new chapter joins the edition when it is listed there. The
book's title and the part captions of ``_toc.yml`` (which Sphinx does not translate) have their
own catalog, ``locale/zh_CN/LC_MESSAGES/_toc.po``, generated from ``_toc.yml`` by ``extract``.

Policy for ``book/api.md``: its own prose is translated; the messages Sphinx extracts from
mtlib's docstrings (autodoc) stay English in both editions. They are counted apart and never
gate coverage.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import io
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import toc_files

ROOT = Path(__file__).resolve().parents[1]
LANG = "zh_CN"
LOCALE = Path("locale")
BUILD = Path("_build")
# jupyter-book --path-output of the gettext builder. Fixed, because the pot files' "#:" source
# locations are relative to it ("../../../../chapters/..."): another depth would rewrite them all.
EXTRACT_OUT = BUILD / "i18n"
ZH_OUT = BUILD / LANG  # the generated zh_CN _config.yml / _toc.yml and the zh_CN build
HTML = BUILD / "html"  # the English site; the zh_CN site is copied into HTML / LANG
TOC_CATALOG = "_toc"  # locale/zh_CN/LC_MESSAGES/_toc.po: the title and the part captions
PO_WIDTH = 76  # what sphinx-intl writes; keep it, so that a refresh re-wraps nothing
# Minimum share of translated messages on every page, in percent (CI: check --min-coverage).
MIN_COVERAGE = 95.0
PAGE_SUFFIXES = (".md", ".ipynb")
# babel flags any message with "%" or "{name}" as a Python format string; ours are prose.
FORMAT_FLAGS = {
    "python-format",
    "no-python-format",
    "python-brace-format",
    "no-python-brace-format",
}
# The theme strings the theme leaves English (sphinx-book-theme's search box placeholder).
ZH_THEME_OPTIONS = {"search_bar_text": "搜索本书……"}


# --------------------------------------------------------------------------- pages and catalogs


def toc_pages(toc_path: Path) -> list[str]:
    """The docnames of ``_toc.yml`` (the root first, then every ``file:`` entry in order)."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    rest = {k: v for k, v in toc.items() if k != "root"}
    return [toc["root"]] + [str(p) for p in toc_files(rest) if p != toc["root"]]


def toc_messages(config_path: Path, toc_path: Path) -> list[str]:
    """The strings of the ``_toc`` catalog: the book's title, then each part caption."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    out = [str(config["title"])]
    out += [str(part["caption"]) for part in toc.get("parts", []) if part.get("caption")]
    return list(dict.fromkeys(out))


def po_path(locale_dir: Path, domain: str) -> Path:
    """``locale/zh_CN/LC_MESSAGES/<domain>.po`` (domain = docname, or ``_toc``)."""
    return locale_dir / LANG / "LC_MESSAGES" / f"{domain}.po"


def catalogs(directory: Path, suffix: str) -> dict[str, Path]:
    """Every catalog under ``directory`` by domain (``chapters/01_x`` -> path)."""
    return {
        p.relative_to(directory).with_suffix("").as_posix(): p
        for p in sorted(directory.rglob(f"*{suffix}"))
    }


def run_extraction(root: Path, out: Path) -> Path:
    """Run Sphinx's gettext builder on the book at ``root`` into ``out``; return the pot folder.

    Also writes ``_toc.pot`` (title and part captions). ``SOURCE_DATE_EPOCH`` pins the pots'
    creation date, so two extractions of the same sources give the same bytes.
    """
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0"}
    cmd = [
        "jupyter-book",
        "build",
        str(root),
        "--path-output",
        str(out),
        "--builder",
        "custom",
        "--custom-builder",
        "gettext",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"gettext extraction failed: {' '.join(cmd)}")
    pot_dir = out / "_build" / "gettext"
    _write_toc_pot(root, pot_dir)
    return pot_dir


def _write_toc_pot(root: Path, pot_dir: Path) -> None:
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    cat = Catalog(
        fuzzy=True,
        project="Attention, Step by Step",
        header_comment="# The book's title and the part captions of _toc.yml (python -m tests.i18n extract).",
        # the same date as the pages' pots (SOURCE_DATE_EPOCH=0): extraction is reproducible
        creation_date=datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc),
    )
    for text in toc_messages(root / "_config.yml", root / "_toc.yml"):
        cat.add(text, locations=[("_toc.yml", 0)])
    with (pot_dir / f"{TOC_CATALOG}.pot").open("wb") as f:
        write_po(f, cat, width=PO_WIDTH, include_lineno=False)


def update_catalogs(pot_dir: Path, locale_dir: Path, only: Sequence[str] = ()) -> dict[str, str]:
    """Merge every pot into ``locale_dir``'s zh_CN catalogs (what ``sphinx-intl update`` does).

    New messages come in empty; a changed English message keeps its old translation marked
    ``fuzzy`` (the build shows English for it until a translator clears the flag) and the old
    English as ``#| msgid``, so the translator sees what changed. Messages no longer in the
    English sources are dropped. Like sphinx-intl, a catalog is rewritten only when its set of
    messages changes (a moved paragraph leaves it alone; whatever tool the translator saved it
    with, its wrapping stays), so two runs on the same sources change nothing.
    ``only`` limits the update to those domains (e.g. ``book/glossary``). Returns
    ``{domain: "created" | "updated"}``.
    """
    from babel.messages.pofile import read_po

    changed: dict[str, str] = {}
    pots = catalogs(pot_dir, ".pot")
    unknown = sorted(set(only) - set(pots))
    if unknown:
        raise SystemExit(f"no such page: {', '.join(unknown)} (pages: {', '.join(pots)})")
    for domain, pot_file in pots.items():
        if only and domain not in only:
            continue
        with pot_file.open("rb") as f:
            template = read_po(f)
        target = po_path(locale_dir, domain)
        if target.exists():
            with target.open("rb") as f:
                cat = read_po(f, locale=LANG)
            if {m.id for m in cat if m.id} == {m.id for m in template if m.id}:
                continue
            cat.update(template, update_creation_date=False)
            status = "updated"
        else:
            cat = template
            cat.locale = LANG
            status = "created"
        for message in cat:  # prose, not format strings: babel's guesses ("10% longer") only
            message.flags -= FORMAT_FLAGS  # make msgfmt -c fail on a faithful "10%，"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_po_bytes(cat))
        changed[domain] = status
    return changed


def _po_bytes(cat: Any) -> bytes:
    """A babel catalog as .po bytes, with ``#| msgid`` (the previous English) on fuzzy messages.

    babel 2.19's ``include_previous`` re-wraps a multi-line previous msgid into one comment
    that neither polib nor msgfmt can read, so the ``#|`` lines are written here instead.
    """
    from babel.messages.pofile import normalize, write_po

    buf = io.BytesIO()
    write_po(buf, cat, width=PO_WIDTH, ignore_obsolete=True)
    blocks = buf.getvalue().decode("utf-8").split("\n\n")
    messages = list(cat)  # the header first, then the messages in the order written
    assert len(blocks) == len(messages) + 1 and blocks[-1] == "", "unexpected .po layout"
    for i, message in enumerate(messages[1:], start=1):
        if message.fuzzy and message.previous_id:
            previous = (
                message.previous_id[0]
                if isinstance(message.previous_id, (list, tuple))
                else message.previous_id
            )
            lines = blocks[i].split("\n")
            at = next(
                j
                for j, line in enumerate(lines)
                if line.startswith("msgid ") or line.startswith("msgctxt ")
            )
            lines.insert(at, "#| msgid " + normalize(previous, prefix="#| ", width=PO_WIDTH))
            blocks[i] = "\n".join(lines)
    return "\n\n".join(blocks).encode("utf-8")


# --------------------------------------------------------------------------- renumber

# A number as the prose writes it: 0.58, 1,383, 76, 1e-6, 2.3e-02, -0.5 (not part of a word
# such as d2 or W1, nor a heading number such as 1.3 inside a {ref}: those match too, and the
# rule below only acts when the text around the numbers is unchanged).
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")


def renumbered(previous: str, msgid: str, msgstr: str) -> str | None:
    """The translation of ``msgid``, if it differs from ``previous`` only in its numbers.

    A re-executed chapter moves the numbers its prose quotes ("0.58" becomes "0.61"): the English
    message changes, its translation goes fuzzy, and no translator is needed to change the same
    numbers in the Chinese. Returns None unless the text around the numbers is identical, each
    changed number maps to one new value (a "0.5" that becomes "0.6" in one place and "0.7" in
    another is ambiguous), and the translation holds the same numbers as the previous English
    (in any order, as Chinese word order may move them).
    """
    old_nums, new_nums = NUMBER.findall(previous), NUMBER.findall(msgid)
    if NUMBER.sub("#", previous) != NUMBER.sub("#", msgid) or len(old_nums) != len(new_nums):
        return None
    mapping: dict[str, str] = {}
    for a, b in zip(old_nums, new_nums, strict=True):
        if mapping.setdefault(a, b) != b:
            return None
    if sorted(NUMBER.findall(msgstr)) != sorted(old_nums):
        return None
    return NUMBER.sub(lambda m: mapping[m.group(0)], msgstr)


def renumber(locale_dir: Path, only: Sequence[str] = ()) -> tuple[int, list[str]]:
    """Carry number-only English changes into the fuzzy translations of every catalog.

    Returns the number of messages fixed and one line per fuzzy message left for a translator.
    """
    import polib
    from babel.messages.pofile import read_po

    fixed, left = 0, []
    for domain, po_file in catalogs(locale_dir / LANG / "LC_MESSAGES", ".po").items():
        if only and domain not in only:
            continue
        # babel does not read the "#| msgid" lines back; polib does
        previous = {e.msgid: e.previous_msgid for e in polib.pofile(str(po_file))
                    if e.previous_msgid}
        with po_file.open("rb") as f:
            cat = read_po(f, locale=LANG)
        changed = False
        for message in cat:
            if not (message.id and message.fuzzy):
                continue
            message.previous_id = previous.get(message.id) or ()  # kept when written back
            if not (message.previous_id and message.string):
                continue
            new = renumbered(message.previous_id, message.id, message.string)
            if new is None:
                left.append(f"{domain}: {message.id[:70]!r}")
                continue
            message.string = new
            message.flags.discard("fuzzy")
            message.previous_id = ()
            fixed += 1
            changed = True
        if changed:
            for message in cat:
                message.flags -= FORMAT_FLAGS
            po_file.write_bytes(_po_bytes(cat))
    return fixed, left


# --------------------------------------------------------------------------- check (a): up to date


def stale_catalogs(pot_dir: Path, locale_dir: Path) -> list[str]:
    """Differences between fresh pots and the committed catalogs, one line per problem.

    A page without a catalog, a catalog without a page, and any msgid added or removed are
    reported (``python -m tests.i18n extract`` fixes all of them).
    """
    import polib

    problems = []
    pots = catalogs(pot_dir, ".pot")
    pos = catalogs(locale_dir / LANG / "LC_MESSAGES", ".po")
    for domain in sorted(set(pos) - set(pots)):
        problems.append(f"{domain}: catalog for a page that is not in the book any more")
    for domain, pot_file in pots.items():
        if domain not in pos:
            problems.append(f"{domain}: no catalog {po_path(locale_dir, domain)}")
            continue
        want = {e.msgid for e in polib.pofile(str(pot_file))}
        have = {e.msgid for e in polib.pofile(str(pos[domain])) if not e.obsolete}
        for msgid in sorted(want - have):
            problems.append(f"{domain}: new English message not in the catalog: {msgid[:100]!r}")
        for msgid in sorted(have - want):
            problems.append(f"{domain}: catalog message no longer in the English: {msgid[:100]!r}")
    return problems


# --------------------------------------------------------------------------- check (b): coverage


@dataclass
class Coverage:
    """Message counts of one catalog. ``docstrings`` (api only) are not in the three others."""

    domain: str
    translated: int = 0
    fuzzy: int = 0
    untranslated: int = 0
    docstrings: int = 0
    docstrings_translated: int = 0

    @property
    def total(self) -> int:
        return self.translated + self.fuzzy + self.untranslated

    @property
    def percent(self) -> float:
        return 100.0 * self.translated / self.total if self.total else 100.0


def is_page_message(occurrences: Iterable[tuple[str, Any]]) -> bool:
    """True when a message occurs in a page (.md/.ipynb) or _toc.yml, not only in docstrings."""
    return any(path.split(":")[0].endswith((*PAGE_SUFFIXES, "_toc.yml")) for path, _ in occurrences)


def coverage(po_file: Path, domain: str) -> Coverage:
    """Translated / fuzzy / untranslated page messages of one catalog (obsolete ones ignored)."""
    import polib

    cov = Coverage(domain)
    for entry in polib.pofile(str(po_file)):
        if entry.obsolete:
            continue
        done = entry.translated()
        if not is_page_message(entry.occurrences):
            cov.docstrings += 1
            cov.docstrings_translated += done
        elif done:
            cov.translated += 1
        elif entry.fuzzy:
            cov.fuzzy += 1
        else:
            cov.untranslated += 1
    return cov


def coverage_table(rows: Sequence[Coverage], minimum: float) -> str:
    """The table CI prints: one row per catalog, a total, pages below ``minimum`` marked."""
    lines = [f"{'page':42} {'transl.':>7} {'fuzzy':>6} {'untr.':>6} {'total':>6} {'%':>6}"]
    for c in rows:
        mark = "  < min" if c.percent < minimum else ""
        lines.append(
            f"{c.domain:42} {c.translated:7} {c.fuzzy:6} {c.untranslated:6} {c.total:6} {c.percent:6.1f}{mark}"
        )
    total = Coverage("all pages")
    for c in rows:
        total.translated += c.translated
        total.fuzzy += c.fuzzy
        total.untranslated += c.untranslated
    lines.append(
        f"{total.domain:42} {total.translated:7} {total.fuzzy:6} {total.untranslated:6} {total.total:6} {total.percent:6.1f}"
    )
    for c in rows:
        if c.docstrings:
            lines.append(
                f"({c.domain}: {c.docstrings} more messages come from mtlib's docstrings, which stay English "
                f"by policy and are not counted; {c.docstrings_translated} of them translated)"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- check (c): markup

_ROLE = re.compile(r"\{[\w:.+-]+\}`[^`]*`")
_CODE = re.compile(r"(``+)(.+?)\1|`[^`\n]+`", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\n]+?\$", re.S)
_LINK = re.compile(r"\]\(([^)\s]*)[^)]*\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_TAG = re.compile(r"</?[a-zA-Z][\w-]*(?:\s[^<>]*)?/?>")
_FOOTNOTE = re.compile(r"\[\^[^\]\s]+\]")
_SUBST = re.compile(r"\{\{[^{}]*\}\}")
_BLOCK_START = re.compile(r"\d+[.)]\s|[-*+]\s|#{1,6}\s|>\s?")


def _role_key(role: str) -> str:
    """``{doc}`the notation <notation>``` -> ``{doc}notation``: the text may be translated, the target not."""
    name, body = role.split("`", 1)
    body = body[:-1]
    target = re.search(r"<([^<>]+)>\s*$", body)
    return name + (target.group(1) if target and name != "{cite}" else body).strip()


def markup_problems(msgid: str, msgstr: str) -> list[str]:
    """What a translation lost or changed of the English message's markup, one line each.

    Compared as multisets between msgid and msgstr: MyST roles with their targets
    (``{cite}`key```, ``{ref}``, ``{doc}``, ``{numref}``...; a role's display text may be
    translated), ``$math$`` and ``$$math$$``, inline code, link targets ``](...)`` and
    ``<https://...>``, HTML tags, footnote references, substitutions, and the number of ``**``.
    A footnote reference (``[^name]``) is reported in any translated message: MyST cannot
    translate it. Also the traps of a Chinese msgstr: a start that makes it a list, heading or quote
    ("1. ": Sphinx then drops the translation silently; write "1\\. "), and ``**`` that CommonMark
    cannot read as bold next to full-width punctuation (:func:`_bold_problems`).
    """
    out = []
    roles = [_ROLE.findall(msgid), _ROLE.findall(msgstr)]
    diff = _multiset_diff([_role_key(r) for r in roles[0]], [_role_key(r) for r in roles[1]])
    if diff:
        out.append(f"role: {diff}")
    plain_id, plain_str = _ROLE.sub(" ", msgid), _ROLE.sub(" ", msgstr)
    code = [[m.group(0) for m in _CODE.finditer(s)] for s in (plain_id, plain_str)]
    if diff := _multiset_diff(*code):
        out.append(f"code: {diff}")
    plain_id, plain_str = _CODE.sub(" ", plain_id), _CODE.sub(" ", plain_str)
    for name, pattern in (
        ("math", _MATH),
        ("link", _LINK),
        ("link", _AUTOLINK),
        ("html", _TAG),
        ("footnote", _FOOTNOTE),
        ("substitution", _SUBST),
    ):
        if diff := _multiset_diff(pattern.findall(plain_id), pattern.findall(plain_str)):
            out.append(f"{name}: {diff}")
        plain_id, plain_str = pattern.sub(" ", plain_id), pattern.sub(" ", plain_str)
    if msgid.count("**") != msgstr.count("**"):
        out.append(
            f"bold: {msgid.count('**')} '**' in the English, {msgstr.count('**')} in the translation"
        )
    if _FOOTNOTE.search(msgid):
        out.append(
            "footnote: MyST parses a translated message without the page's footnote definitions, so a "
            "footnote reference cannot be translated (the build warns); rewrite the English without it"
        )
    start = _BLOCK_START.match(msgstr)
    if start:
        out.append(
            f"starts with {start.group(0)!r}: Sphinx reads a list/heading/quote and drops it (escape: '1\\. ')"
        )
    out += _bold_problems(msgstr)
    return out


def _is_punct(ch: str) -> bool:
    """CommonMark's punctuation: ASCII punctuation or a Unicode P* character (，。（ ...)."""
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def _bold_problems(text: str) -> list[str]:
    """``**`` that CommonMark will not read as bold where the text means it.

    The n-th ``**`` opens when n is odd and closes when even. An opener must be left-flanking:
    not followed by a space, and if followed by punctuation, preceded by a space or punctuation.
    A closer must be right-flanking, the mirror image. Chinese full-width punctuation is
    punctuation, and an ideograph is not a space: ``**注意：**这里`` is not bold.
    """
    out = []
    runs = [m.start() for m in re.finditer(r"(?<!\*)\*\*(?!\*)", text)]
    for n, at in enumerate(runs):
        before = text[at - 1] if at > 0 else " "
        after = text[at + 2] if at + 2 < len(text) else " "
        if n % 2 == 0 and _is_punct(after) and not (before.isspace() or _is_punct(before)):
            out.append(
                f"bold: '**' before {after!r} right after text does not open bold (add a space before **)"
            )
        if n % 2 == 1 and _is_punct(before) and not (after.isspace() or _is_punct(after)):
            out.append(
                f"bold: '**' after {before!r} right before text does not close bold (add a space after **)"
            )
    return out


def _multiset_diff(english: list[str], translated: list[str]) -> str:
    a, b = Counter(english), Counter(translated)
    if a == b:
        return ""
    return f"missing {sorted((a - b).elements())} extra {sorted((b - a).elements())}"


def catalog_markup_problems(po_file: Path) -> list[str]:
    """:func:`markup_problems` of every translated, non-fuzzy message of a catalog."""
    import polib

    out = []
    for entry in polib.pofile(str(po_file)).translated_entries():
        for problem in markup_problems(entry.msgid, entry.msgstr):
            out.append(f"{problem}\n      msgid: {entry.msgid[:110]!r}")
    return out


# --------------------------------------------------------------------------- check (d): msgfmt


def msgfmt_problems(po_file: Path) -> list[str]:
    """``msgfmt -c`` (GNU gettext) on one catalog: syntax, header, format strings.

    Without GNU gettext (``apt-get install gettext``), babel's own checks run instead.
    """
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:  # not installed: babel's checks (syntax, format strings) instead
        from babel.messages.pofile import read_po

        with po_file.open("rb") as f:
            cat = read_po(f, abort_invalid=True)
        return [f"{m.id!r}: {err}" for m, errors in cat.check() for err in errors]
    result = subprocess.run(
        [msgfmt, "-c", "-o", os.devnull, str(po_file)], capture_output=True, text=True, check=False
    )
    return (
        []
        if result.returncode == 0
        else [line for line in result.stderr.splitlines() if line.strip()]
    )


def check(root: Path, minimum: float, fresh: bool = False) -> int:
    """All four catalog checks; print a report and return the number of failures."""
    out = Path(tempfile.mkdtemp(prefix="i18n-check-")) if fresh else root / EXTRACT_OUT
    print(f"extracting the English messages into {out} ...", flush=True)
    try:
        return _check(root, run_extraction(root, out), minimum)
    finally:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)


def _check(root: Path, pot_dir: Path, minimum: float) -> int:
    locale_dir = root / LOCALE
    failures = 0

    stale = stale_catalogs(pot_dir, locale_dir)
    print(f"\n(a) catalogs up to date with the English sources: {'no' if stale else 'yes'}")
    for line in stale:
        print(f"  {line}")
    if stale:
        print("  fix: python -m tests.i18n extract   (then translate what is new or fuzzy)")
    failures += len(stale)

    pos = catalogs(locale_dir / LANG / "LC_MESSAGES", ".po")
    rows = [coverage(path, domain) for domain, path in pos.items()]
    print(f"\n(b) coverage (messages of each page; minimum {minimum:g}% per page)")
    print(coverage_table(rows, minimum))
    low = [c.domain for c in rows if c.percent < minimum]
    failures += len(low)

    markup = {domain: catalog_markup_problems(path) for domain, path in pos.items()}
    n_markup = sum(len(v) for v in markup.values())
    print(f"\n(c) markup damage in translated messages: {n_markup}")
    for domain, problems in markup.items():
        for p in problems:
            print(f"  {domain}: {p}")
    failures += n_markup

    fmt = {domain: msgfmt_problems(path) for domain, path in pos.items()}
    n_fmt = sum(len(v) for v in fmt.values())
    tool = (
        "msgfmt -c"
        if shutil.which("msgfmt")
        else "babel's checks (GNU gettext's msgfmt is not installed)"
    )
    print(f"\n(d) {tool}: {'passes' if not n_fmt else f'{n_fmt} problems'}")
    for domain, problems in fmt.items():
        for p in problems:
            print(f"  {domain}: {p}")
    failures += n_fmt

    print(
        f"\ni18n check: {'FAILED' if failures else 'passed'}"
        + (
            f" ({len(stale)} stale, {len(low)} pages under {minimum:g}%, {n_markup} markup, {n_fmt} msgfmt)"
            if failures
            else ""
        )
    )
    return failures


# --------------------------------------------------------------------------- build


def translations(po_file: Path) -> dict[str, str]:
    """msgid -> msgstr of the translated, non-fuzzy messages of a catalog ({} if it is missing).

    Read with babel (Sphinx's own dependency), so that building needs nothing more.
    """
    from babel.messages.pofile import read_po

    if not po_file.exists():
        return {}
    with po_file.open("rb") as f:
        cat = read_po(f)
    return {str(m.id): str(m.string) for m in cat if m.id and m.string and not m.fuzzy}


def zh_config(config: dict[str, Any], toc_strings: dict[str, str]) -> dict[str, Any]:
    """The zh_CN ``_config.yml``: the English one with the language, title and theme strings.

    ``recursive_update`` merges ``sphinx.config`` into jupyter-book's own settings instead of
    replacing them, so ``html_theme_options`` keeps the launch buttons and repository buttons.
    """
    zh = copy.deepcopy(config)
    zh["title"] = toc_strings.get(str(config["title"]), config["title"])
    sphinx = zh.setdefault("sphinx", {})
    sphinx["recursive_update"] = True
    conf = sphinx.setdefault("config", {})
    conf["language"] = LANG
    conf.setdefault("html_theme_options", {}).update(ZH_THEME_OPTIONS)
    return zh


def zh_toc(toc: dict[str, Any], toc_strings: dict[str, str]) -> dict[str, Any]:
    """The zh_CN ``_toc.yml``: the same pages, part captions translated (English if not yet)."""
    zh = copy.deepcopy(toc)
    for part in zh.get("parts", []):
        if part.get("caption"):
            part["caption"] = toc_strings.get(str(part["caption"]), part["caption"])
    return zh


def write_zh_config(root: Path, out: Path, locale_dir: Path | None = None) -> tuple[Path, Path]:
    """Write the generated zh_CN ``_config.yml`` and ``_toc.yml`` into ``out``.

    ``locale_dir`` replaces ``locale/`` (to try catalogs elsewhere, e.g. a translator's copy).
    """
    strings = translations(po_path(locale_dir or root / LOCALE, TOC_CATALOG))
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    zh = zh_config(config, strings)
    if locale_dir is not None:
        zh["sphinx"]["config"]["locale_dirs"] = [str(locale_dir.resolve())]
    out.mkdir(parents=True, exist_ok=True)
    header = "# Generated by python -m tests.i18n build from the English file: do not edit.\n"
    config_path, toc_path = out / "_config.yml", out / "_toc.yml"
    config_path.write_text(
        header + yaml.safe_dump(zh, allow_unicode=True, sort_keys=False),
        encoding="utf-8",
    )
    toc_path.write_text(
        header + yaml.safe_dump(zh_toc(toc, strings), allow_unicode=True, sort_keys=False),
        encoding="utf-8",
    )
    return config_path, toc_path


def _jupyter_book(args: list[str]) -> None:
    cmd = ["jupyter-book", "build", ".", *args, "-W", "-n", "--keep-going"]
    print(f"$ {' '.join(cmd)}", flush=True)
    if subprocess.run(cmd, check=False).returncode != 0:
        raise SystemExit(f"the book build failed (warnings are errors): {' '.join(cmd)}")


def build(root: Path, editions: str = "both", locale_dir: Path | None = None) -> None:
    """Build the English book into ``_build/html`` and the zh_CN one into ``_build/html/zh_CN``.

    Both from clean output folders, warning-free (-W -n). The zh_CN build reads the same
    sources with the generated config of :func:`write_zh_config`.
    """
    os.chdir(root)
    if editions in ("both", "en"):
        for stale in (HTML, BUILD / ".doctrees", BUILD / "jupyter_execute"):
            shutil.rmtree(stale, ignore_errors=True)
        _jupyter_book([])
    if editions in ("both", "zh"):
        import jieba  # noqa: F401  (Sphinx's Chinese search index needs it; fail early without)

        shutil.rmtree(ZH_OUT, ignore_errors=True)
        config_path, toc_path = write_zh_config(root, ZH_OUT, locale_dir)
        _jupyter_book(
            ["--config", str(config_path), "--toc", str(toc_path), "--path-output", str(ZH_OUT)]
        )
        shutil.rmtree(HTML / LANG, ignore_errors=True)
        shutil.copytree(ZH_OUT / "_build" / "html", HTML / LANG)
        print(f"zh_CN edition: {HTML / LANG / 'index.html'}")


# --------------------------------------------------------------------------- drift


class _CellBlocks(HTMLParser):
    """The exact source text of every cell input/output ``<div>`` and the number of cells."""

    KINDS = ("cell_input", "cell_output")

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=False)
        self.html = html
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", html)]
        self._open: list[tuple[str | None, int]] = []  # (kind or None, start offset) per open <div>
        self.blocks: list[tuple[str, str]] = []
        self.cells = 0
        self.feed(html)
        self.close()

    def _offset(self) -> int:
        line, col = self.getpos()
        return self._line_starts[line - 1] + col

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "div":
            return
        classes = (dict(attrs).get("class") or "").split()
        self.cells += "cell" in classes
        kind = next((k for k in self.KINDS if k in classes), None)
        self._open.append((kind, self._offset()))

    def handle_endtag(self, tag: str) -> None:
        if tag != "div" or not self._open:
            return
        kind, start = self._open.pop()
        if kind:
            end = self.html.index(">", self._offset()) + 1
            self.blocks.append((kind, self.html[start:end]))


def drift_problems(english_html: str, chinese_html: str) -> list[str]:
    """Differences between the code cells and outputs of one page in the two editions.

    Every ``cell_input`` and ``cell_output`` block of the built HTML is compared as raw text:
    the number of cells must match, and each block must be byte-identical.
    """
    en, zh = _CellBlocks(english_html), _CellBlocks(chinese_html)
    problems = []
    if en.cells != zh.cells:
        problems.append(f"{en.cells} cells in English, {zh.cells} in zh_CN")
    if len(en.blocks) != len(zh.blocks):
        problems.append(
            f"{len(en.blocks)} input/output blocks in English, {len(zh.blocks)} in zh_CN"
        )
    for i, ((kind, a), (_, b)) in enumerate(zip(en.blocks, zh.blocks, strict=False)):
        if a != b:
            at = next(
                j
                for j in range(min(len(a), len(b)) + 1)
                if j == min(len(a), len(b)) or a[j] != b[j]
            )
            problems.append(
                f"block {i} ({kind}) differs at character {at}: {a[max(0, at - 40) : at + 40]!r} vs {b[max(0, at - 40) : at + 40]!r}"
            )
    return problems


def drift(root: Path) -> int:
    """:func:`drift_problems` for every notebook page of the book; print and count problems."""
    html = root / HTML
    failures = 0
    pages = [p for p in toc_pages(root / "_toc.yml") if (root / f"{p}.ipynb").exists()]
    for page in pages:
        en_file, zh_file = html / f"{page}.html", html / LANG / f"{page}.html"
        if not zh_file.exists():
            print(f"{page}: no zh_CN page {zh_file}")
            failures += 1
            continue
        problems = drift_problems(
            en_file.read_text(encoding="utf-8"), zh_file.read_text(encoding="utf-8")
        )
        n = len(_CellBlocks(en_file.read_text(encoding="utf-8")).blocks)
        print(f"{page}: {n} input/output blocks, {'identical' if not problems else 'DRIFT'}")
        for p in problems:
            print(f"  {p}")
        failures += len(problems) + (n == 0)
    print(f"drift check: {'FAILED' if failures else 'passed'} ({len(pages)} notebook pages)")
    return failures


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.i18n", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_extract = sub.add_parser(
        "extract", help="re-extract the English messages and update locale/zh_CN"
    )
    p_extract.add_argument(
        "pages", nargs="*", help="update only these catalogs (e.g. book/glossary _toc)"
    )
    p_renumber = sub.add_parser(
        "renumber", help="after extract: carry number-only English changes into the translations"
    )
    p_renumber.add_argument("pages", nargs="*", help="only these catalogs (e.g. chapters/01_...)")
    p_check = sub.add_parser("check", help="catalogs up to date, coverage, markup, msgfmt -c")
    p_check.add_argument(
        "--min-coverage",
        type=float,
        default=MIN_COVERAGE,
        help="percent per page (default %(default)s)",
    )
    p_check.add_argument("--fresh", action="store_true", help="extract into a new temporary folder")
    p_build = sub.add_parser("build", help="build both editions (_build/html, _build/html/zh_CN)")
    p_build.add_argument("--editions", choices=["both", "en", "zh"], default="both")
    p_build.add_argument("--locale-dir", type=Path, help="catalogs from here instead of locale/")
    sub.add_parser(
        "drift", help="after build: zh_CN code cells and outputs identical to the English"
    )
    args = parser.parse_args(argv)

    if args.command == "extract":
        pot_dir = run_extraction(ROOT, ROOT / EXTRACT_OUT)
        changed = update_catalogs(pot_dir, ROOT / LOCALE, args.pages)
        for domain, status in sorted(changed.items()):
            print(f"{status}: {po_path(LOCALE, domain)}")
        print(f"{len(changed)} catalogs changed" if changed else "catalogs already up to date")
        return 0
    if args.command == "renumber":
        fixed, left = renumber(ROOT / LOCALE, args.pages)
        print(f"{fixed} translations renumbered; {len(left)} fuzzy messages need a translator")
        for line in left:
            print("  " + line)
        return 0
    if args.command == "check":
        return 1 if check(ROOT, args.min_coverage, fresh=args.fresh) else 0
    if args.command == "build":
        build(ROOT, args.editions, args.locale_dir)
        return 0
    return 1 if drift(ROOT) else 0


if __name__ == "__main__":
    sys.exit(main())
