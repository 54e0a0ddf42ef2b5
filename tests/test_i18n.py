"""The Chinese edition's machinery (tests/i18n.py): markup checker, coverage, staleness, drift,
generated zh_CN config. Fast: one tiny book is extracted (a few seconds); the real builds run
once in tests/run_all.sh, not here."""

from __future__ import annotations

import shutil
from pathlib import Path

import polib
import pytest
import yaml

from tests import i18n

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


# --------------------------------------------------------------------------- markup checker

GOOD = [
    (
        "Attention {cite}`vaswani2017attention` scales by $1/\\sqrt{d_k}$.",
        "注意力 {cite}`vaswani2017attention` 按 $1/\\sqrt{d_k}$ 缩放。",
    ),
    (
        "See {doc}`the notation page <notation>` and `mask=`.",
        "参见 {doc}`记号页 <notation>` 和 `mask=`。",
    ),
    (
        "Read [the docs](https://pytorch.org/docs) or <https://d2l.ai>.",
        "阅读[文档](https://pytorch.org/docs)或 <https://d2l.ai>。",
    ),
    ("**Bold** words and a <br> tag.", "**粗体** 文字和一个 <br> 标签。"),
    ("1. Why attention", "1\\. 为什么需要注意力"),
    # bold next to full-width punctuation that CommonMark still reads as bold
    ("the **mask** (", "**掩码（mask）**（"),
    (
        "**Knowledge distillation** {cite}`hinton2015distilling`",
        "**知识蒸馏（knowledge distillation）**{cite}`hinton2015distilling`",
    ),
    ("**Note:** here", "**注意：** 这里"),
    ("$$\na = b\n$$", "$$\na = b\n$$"),
]


@pytest.mark.parametrize(("msgid", "msgstr"), GOOD)
def test_a_faithful_translation_has_no_markup_problem(msgid, msgstr):
    assert i18n.markup_problems(msgid, msgstr) == []


DAMAGE = [
    ("role", "As {cite}`vaswani2017attention` shows.", "如文献所示。"),
    ("role", "As {cite}`vaswani2017attention` shows.", "如 {cite}`vaswani2017` 所示。"),
    ("role", "See {ref}`troubleshooting`.", "参见 {ref}`故障排除`。"),
    ("role", "See {doc}`the notation page <notation>`.", "参见 {doc}`记号页 <notaton>`。"),
    ("role", "Figure {numref}`fig-heat` shows it.", "如图所示。"),
    ("math", "It scales by $1/\\sqrt{d_k}$.", "它按 $1/\\sqrt{d}$ 缩放。"),
    ("math", "$$\na = b\n$$", "a = b"),
    ("code", "Pass `mask=` here.", "在这里传入 mask=。"),
    ("code", "Pass `mask=` here.", "在这里传入 `掩码=`。"),
    ("link", "Read [the docs](https://pytorch.org/docs).", "阅读[文档](https://pytorch.org)。"),
    ("link", "See <https://d2l.ai>.", "参见 d2l.ai。"),
    ("html", "Line one<br>line two.", "第一行第二行。"),
    ("bold", "A **bold** claim.", "一个**粗体**论断**。"),
    ("starts with", "1. Why attention", "1. 为什么需要注意力"),
    ("starts with", "Minus one", "- 减一"),
    ("footnote", "One score.[^state] The rest.", "一个分数。其余。"),
    ("bold", "**Knowledge distillation:** trains", "**知识蒸馏：**训练"),
    ("bold", "the (**key**) part", "这个**（键）**部分"),
]


@pytest.mark.parametrize(
    ("kind", "msgid", "msgstr"), DAMAGE, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(DAMAGE)]
)
def test_the_markup_checker_catches_each_kind_of_damage(kind, msgid, msgstr):
    problems = i18n.markup_problems(msgid, msgstr)
    assert any(p.startswith(kind) for p in problems), problems


def test_catalog_markup_problems_skips_fuzzy_and_untranslated(tmp_path):
    po = polib.POFile()
    po.append(
        polib.POEntry(msgid="Pass `mask=`.", msgstr="传入 mask=。", occurrences=[("a.md", "1")])
    )
    po.append(
        polib.POEntry(
            msgid="Pass `bias=`.",
            msgstr="传入 bias=。",
            flags=["fuzzy"],
            occurrences=[("a.md", "2")],
        )
    )
    po.append(polib.POEntry(msgid="Pass `cache=`.", msgstr="", occurrences=[("a.md", "3")]))
    po.save(str(tmp_path / "a.po"))
    problems = i18n.catalog_markup_problems(tmp_path / "a.po")
    assert len(problems) == 1 and "mask=" in problems[0]


def test_msgfmt_check_passes_a_good_catalog_and_fails_a_broken_one(tmp_path):
    if shutil.which("msgfmt") is None:
        pytest.skip("GNU gettext's msgfmt is not installed")
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=utf-8", "Language": "zh_CN"}
    po.append(
        polib.POEntry(
            msgid="a {doc}`notation` page",
            msgstr="一个 {doc}`notation` 页面",
            flags=["python-brace-format"],
        )
    )
    po.save(str(tmp_path / "good.po"))
    assert i18n.msgfmt_problems(tmp_path / "good.po") == []
    po[0].msgstr = "一个页面"  # the placeholder {doc} is gone: msgfmt -c reports it
    po.save(str(tmp_path / "bad.po"))
    assert i18n.msgfmt_problems(tmp_path / "bad.po")


# --------------------------------------------------------------------------- coverage


def test_coverage_counts_page_messages_and_sets_docstrings_apart(tmp_path):
    po = polib.POFile()
    page = [("../../../../book/api.md", "3")]
    po.append(polib.POEntry(msgid="one", msgstr="一", occurrences=page))
    po.append(polib.POEntry(msgid="two", msgstr="二", occurrences=page))
    po.append(polib.POEntry(msgid="three", msgstr="三", flags=["fuzzy"], occurrences=page))
    po.append(polib.POEntry(msgid="four", msgstr="", occurrences=page))
    # in a page and in a docstring: a page message
    po.append(polib.POEntry(msgid="both", msgstr="", occurrences=[("mtlib.attention", "2"), *page]))
    po.append(
        polib.POEntry(
            msgid="doc1", msgstr="", occurrences=[("mtlib.attention.MultiHeadAttention", "23")]
        )
    )
    po.append(polib.POEntry(msgid="doc2", msgstr="", occurrences=[("../../../../docstring", "1")]))
    po.append(polib.POEntry(msgid="gone", msgstr="旧", obsolete=True))
    po.save(str(tmp_path / "api.po"))

    cov = i18n.coverage(tmp_path / "api.po", "book/api")
    assert (cov.translated, cov.fuzzy, cov.untranslated, cov.docstrings) == (2, 1, 2, 2)
    assert cov.percent == pytest.approx(40.0)
    table = i18n.coverage_table([cov, i18n.Coverage("book/intro", translated=10)], minimum=95)
    assert "book/api" in table and "< min" in table.splitlines()[1]
    assert "< min" not in table.splitlines()[2]
    assert "2 more messages come from mtlib's docstrings" in table


# --------------------------------------------------------------------------- up to date (a tiny real book)

TINY_CONFIG = {
    "title": "Tiny",
    "only_build_toc_files": True,
    "execute": {"execute_notebooks": "off"},
}


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    """A one-page book, extracted and its catalog created, as `extract` does."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "_config.yml").write_text(yaml.safe_dump(TINY_CONFIG))
    (root / "_toc.yml").write_text(
        yaml.safe_dump(
            {
                "format": "jb-book",
                "root": "intro",
                "parts": [{"caption": "Part one", "chapters": [{"file": "page"}]}],
            }
        )
    )
    (root / "intro.md").write_text("# Tiny\n\nThe first paragraph, with `code`.\n")
    (root / "page.md").write_text("# A page\n\nAttention is a soft lookup.\n")
    pot = i18n.run_extraction(root, root / "_build" / "i18n")
    assert i18n.update_catalogs(pot, root / "locale") == {
        "_toc": "created",
        "intro": "created",
        "page": "created",
    }
    return root


def test_fresh_catalogs_are_up_to_date_and_a_second_update_changes_nothing(tiny_book):
    pot = i18n.run_extraction(tiny_book, tiny_book / "_build" / "i18n")
    assert i18n.stale_catalogs(pot, tiny_book / "locale") == []
    assert i18n.update_catalogs(pot, tiny_book / "locale") == {}
    assert {e.msgid for e in polib.pofile(str(i18n.po_path(tiny_book / "locale", "_toc")))} == {
        "Tiny",
        "Part one",
    }


def test_a_new_english_paragraph_makes_the_check_fail_and_extract_marks_edits_fuzzy(
    tiny_book, tmp_path
):
    root = tmp_path / "book"
    shutil.copytree(tiny_book, root)
    po_file = i18n.po_path(root / "locale", "page")
    po = polib.pofile(str(po_file))
    po.find("Attention is a soft lookup.").msgstr = "注意力是一种软查找。"
    po.save()

    page = root / "page.md"
    page.write_text(
        "# A page\n\nAttention is a soft dictionary lookup.\n\nA new English paragraph, 10% longer.\n"
    )
    pot = i18n.run_extraction(root, root / "_build" / "i18n")
    stale = i18n.stale_catalogs(pot, root / "locale")
    assert any("new English message" in s and "A new English paragraph" in s for s in stale), stale
    assert any("no longer in the English" in s for s in stale), stale

    assert i18n.update_catalogs(pot, root / "locale") == {"page": "updated"}
    assert i18n.stale_catalogs(pot, root / "locale") == []
    entry = polib.pofile(str(po_file)).find("Attention is a soft dictionary lookup.")
    assert entry.fuzzy and entry.msgstr == "注意力是一种软查找。"
    # the translator sees the old English
    assert entry.previous_msgid == "Attention is a soft lookup."
    cov = i18n.coverage(po_file, "page")
    assert (cov.translated, cov.fuzzy, cov.untranslated) == (0, 1, 2)

    # "10%" is prose, not a format string: a faithful "10%，" passes msgfmt -c
    po = polib.pofile(str(po_file))
    po.find("A new English paragraph, 10% longer.").msgstr = "新的英文段落，长 10%，"
    po.save()
    assert i18n.msgfmt_problems(po_file) == []


def test_a_page_without_a_catalog_and_a_catalog_without_a_page_are_errors(tiny_book, tmp_path):
    root = tmp_path / "book"
    shutil.copytree(tiny_book, root)
    i18n.po_path(root / "locale", "page").rename(i18n.po_path(root / "locale", "old_page"))
    stale = i18n.stale_catalogs(root / "_build" / "i18n" / "_build" / "gettext", root / "locale")
    assert any(s.startswith("page: no catalog") for s in stale), stale
    assert any(
        s.startswith("old_page: catalog for a page that is not in the book") for s in stale
    ), stale


# --------------------------------------------------------------------------- drift

CELL = (
    '<div class="cell docutils container">\n<div class="cell_input docutils container">\n'
    '<div class="highlight"><pre>x = {x}</pre></div>\n</div>\n'
    '<div class="cell_output docutils container">\n<div class="output stream highlight-myst-ansi"><pre>{out}</pre></div>\n</div>\n</div>\n'
)


def _page(prose: str, cells: list[tuple[int, str]]) -> str:
    return (
        f"<html><body><main><p>{prose}</p>\n"
        + "".join(CELL.format(x=x, out=o) for x, o in cells)
        + "</main></body></html>"
    )


def test_drift_check_accepts_translated_prose_around_identical_cells():
    en = _page("Attention", [(1, "0.25"), (2, "0.5")])
    zh = _page("注意力", [(1, "0.25"), (2, "0.5")])
    assert i18n.drift_problems(en, zh) == []


@pytest.mark.parametrize(
    "zh_cells",
    [[(1, "0.25"), (2, "0.50")], [(1, "0.25"), (3, "0.5")], [(1, "0.25")]],
    ids=["changed-output", "changed-code", "missing-cell"],
)
def test_drift_check_fails_on_a_planted_difference(zh_cells):
    en = _page("Attention", [(1, "0.25"), (2, "0.5")])
    assert i18n.drift_problems(en, _page("注意力", zh_cells))


def test_drift_check_on_a_real_built_page_if_there_is_one():
    pages = sorted((ROOT / i18n.HTML / "chapters").glob("*.html"))
    if not pages:
        pytest.skip("no built book (python -m tests.i18n build)")
    html = pages[0].read_text(encoding="utf-8")
    blocks = i18n._CellBlocks(html)
    assert blocks.cells > 0 and blocks.blocks
    assert i18n.drift_problems(html, html) == []
    kind, block = blocks.blocks[-1]
    planted = html.replace(block, block.replace("</div>", " </div>", 1), 1)
    assert i18n.drift_problems(html, planted)


# --------------------------------------------------------------------------- generated zh_CN config


def test_generated_zh_config_keeps_the_launch_buttons_and_translates_title_and_captions():
    from jupyter_book.config import get_final_config

    strings = {CONFIG["title"]: "循序渐进学注意力", TOC["parts"][0]["caption"]: "入门"}
    zh = i18n.zh_config(CONFIG, strings)
    assert zh["title"] == "循序渐进学注意力"
    assert (
        zh["launch_buttons"] == CONFIG["launch_buttons"]
        and zh["repository"] == CONFIG["repository"]
    )
    assert (
        zh["sphinx"]["config"]["language"] == "zh_CN" and zh["sphinx"]["recursive_update"] is True
    )
    # the English config is untouched
    assert CONFIG["sphinx"]["config"].get("language") in (None, "en")

    final, _ = get_final_config(
        user_yaml=zh, cli_config={"latex_individualpages": False}, sourcedir=ROOT, validate=False
    )
    theme = final["html_theme_options"]
    assert theme["launch_buttons"]["colab_url"] == CONFIG["launch_buttons"]["colab_url"]
    assert theme["launch_buttons"]["binderhub_url"] == CONFIG["launch_buttons"]["binderhub_url"]
    assert theme["repository_url"] == CONFIG["repository"]["url"] and theme["use_repository_button"]
    assert theme["search_bar_text"] == i18n.ZH_THEME_OPTIONS["search_bar_text"]
    assert final["language"] == "zh_CN" and final["html_title"] == "循序渐进学注意力"
    # the language switch
    assert final["html_js_files"] == CONFIG["sphinx"]["config"]["html_js_files"]

    toc = i18n.zh_toc(TOC, strings)
    assert toc["parts"][0]["caption"] == "入门"
    # untranslated captions stay English
    assert [p["caption"] for p in toc["parts"][1:]] == [p["caption"] for p in TOC["parts"][1:]]
    assert i18n.toc_pages(ROOT / "_toc.yml") == [
        TOC["root"],
        *(c["file"] for p in TOC["parts"] for c in p["chapters"]),
    ]


def test_every_catalog_domain_is_a_page_of_the_book():
    pages = set(i18n.toc_pages(ROOT / "_toc.yml")) | {i18n.TOC_CATALOG}
    domains = set(i18n.catalogs(ROOT / i18n.LOCALE / i18n.LANG / "LC_MESSAGES", ".po"))
    assert domains <= pages, f"catalogs of no page: {sorted(domains - pages)}"


def test_check_fails_below_the_coverage_bar_and_passes_when_all_is_translated(
    tiny_book, tmp_path, capsys
):
    root = tmp_path / "book"
    shutil.copytree(tiny_book, root)
    assert i18n.check(root, minimum=95) > 0  # nothing translated yet
    assert "0.0  < min" in capsys.readouterr().out
    for po_file in i18n.catalogs(root / "locale" / "zh_CN" / "LC_MESSAGES", ".po").values():
        po = polib.pofile(str(po_file))
        for entry in po:
            entry.msgstr = "译文 " + entry.msgid if "`" not in entry.msgid else entry.msgid
        po.save()
    assert i18n.check(root, minimum=95) == 0
    out = capsys.readouterr().out
    assert "i18n check: passed" in out and "all pages" in out


def test_a_message_shared_by_several_pages_has_one_translation() -> None:
    """The same English (a heading such as "**In this chapter you will**", a term) reads the same
    on every zh page. The glossary is left out: its English column is translated as itself."""
    translations: dict[str, dict[str, str]] = {}
    for po_file in sorted((ROOT / "locale" / "zh_CN" / "LC_MESSAGES").rglob("*.po")):
        page = po_file.relative_to(ROOT / "locale").as_posix()
        if po_file.stem == "glossary":
            continue
        for entry in polib.pofile(str(po_file)):
            if entry.msgstr and not entry.fuzzy:
                translations.setdefault(entry.msgid, {})[page] = entry.msgstr
    differing = {
        msgid: pages for msgid, pages in translations.items() if len(set(pages.values())) > 1
    }
    assert not differing, "translated differently on different pages: " + "; ".join(
        f"{msgid!r}: {pages}" for msgid, pages in list(differing.items())[:5]
    )


def test_renumber_carries_number_only_changes_into_the_translation():
    from tests.i18n import renumbered

    # Chinese word order moves the numbers; each changed number maps to one new value
    assert renumbered("falls from 0.96 at length 4 to 0.26 at length 20",
                      "falls from 0.98 at length 4 to 0.31 at length 20",
                      "从长度 4 时的 0.96 降到长度 20 时的 0.26") == "从长度 4 时的 0.98 降到长度 20 时的 0.31"
    assert renumbered("76 of 500 (0.58), 1,383 positions", "20 of 500 (0.75), 1,401 positions",
                      "500 个中 76 个（0.58），1,383 个位置") == "500 个中 20 个（0.75），1,401 个位置"
    # anything but numbers changed, an ambiguous mapping, or a translation missing a number:
    # left fuzzy for a translator
    assert renumbered("a b 0.5", "a c 0.6", "甲 0.5") is None
    assert renumbered("0.5 and 0.5", "0.6 and 0.7", "0.5 和 0.5") is None
    assert renumbered("scores 0.9 and 0.8", "scores 0.9 and 0.7", "得分 0.9") is None
    assert renumbered("d2 and W1 at 0.5", "d2 and W1 at 0.6", "d2 与 W1 为 0.5") == "d2 与 W1 为 0.6"
