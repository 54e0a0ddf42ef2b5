"""The built book in a real browser: every page of _toc.yml, served locally, fully offline.

Run after a clean build of both editions (``tests/run_all.sh`` does, in its ``browser`` stage)::

    rm -rf _build && python -m tests.i18n build
    MTLIB_BROWSER=1 python -m pytest tests/test_browser.py

It drives Debian's ``chromium`` (``apt-get install chromium``; or set ``CHROMIUM`` to another
Chromium binary) with Playwright for Python; no ``playwright install``, no browser download.
Every request that is not to the local server is refused, so the test means the same with or
without a network: a page that needs a CDN fails here. Per page: the title, math typeset by
the bundled MathJax (no raw ``\\(``, no MathJax errors), every image loaded, no failed local
request, no JavaScript error (except the allow-list below), and on chapters that call
``viz.explorer`` the saved widget state and the widgets drawn. Every page is checked in both
editions (English, and the Chinese one under ``zh_CN/``), with the language switch leading to the
same page in the other edition; search is tried with an English and a Chinese word. Screenshots
of one chapter are written to ``_build/screenshots/``.

Without ``MTLIB_BROWSER=1`` (the unit-test stage, before the book is built) the module is skipped.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.helpers import toc_files

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())

if os.environ.get("MTLIB_BROWSER") != "1":
    pytest.skip("browser checks run after the book build: MTLIB_BROWSER=1 (tests/run_all.sh)", allow_module_level=True)

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402 (needs the skip above first)

# Console errors from upstream code, not from this book (jupyter-book 1.0.4.post1, Chromium 156).
# Keep this list short; every entry says where the error comes from.
ALLOWED_CONSOLE_ERRORS = [
    # sphinx-thebe 0.3.1 declares THEBE_JS_URL in two script tags on every notebook page.
    re.compile(r"Identifier 'THEBE_JS_URL' has already been declared"),
    # pydata-sphinx-theme 0.17 logs this when localStorage holds no theme mode yet.
    re.compile(r"Got invalid theme mode"),
    # The ipywidgets HTML manager calls MathJax 2's MathJax.Hub.Queue; MathJax 3 has no Hub
    # (widget labels are plain text here, so nothing is lost).
    re.compile(r"MathJax\.Hub|reading 'Queue'"),
]


PAGES = [TOC["root"], *toc_files(TOC)]
CHAPTERS = [p for p in PAGES if p.startswith("chapters/")]
ZH = "zh_CN/"  # the Chinese edition, built beside the English one (python -m tests.i18n build)
EDITIONS = ["", ZH]


def _uses_explorer(page: str) -> bool:
    nb = json.loads((ROOT / f"{page}.ipynb").read_text())
    return any("viz.explorer(" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def server():
    assert (HTML / "index.html").exists(), f"build the book first: no {HTML / 'index.html'}"
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    executable = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert executable, "no chromium on PATH: apt-get install -y chromium (or set CHROMIUM=/path/to/chrome)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield b
        b.close()


class Visit:
    """One page load with everything the checks need recorded."""

    def __init__(self, browser: Browser, base: str, path: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.refused: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        local = urlsplit(base).netloc

        def route(r):
            if urlsplit(r.request.url).netloc == local or r.request.url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                self.refused.append(r.request.url)
                r.abort()

        self.context.route("**/*", route)
        self.page: Page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on(
            "response",
            lambda r: r.status >= 400 and urlsplit(r.url).netloc == local and self.failed.append(f"{r.status} {r.url}"),
        )
        response = self.page.goto(f"{base}/{path}", wait_until="load")
        assert response is not None and response.ok, f"{path}: HTTP {response and response.status}"

    def wait_for_math(self) -> None:
        if self.page.evaluate("() => document.querySelectorAll('.math').length") == 0:
            return
        self.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
        self.page.evaluate("() => MathJax.startup.promise")

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(rx.search(e) for rx in ALLOWED_CONSOLE_ERRORS)]

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser, server):
    visits: list[Visit] = []

    def _visit(path: str) -> Visit:
        v = Visit(browser, server, path)
        visits.append(v)
        return v

    yield _visit
    for v in visits:
        v.close()


# Text the reader sees, without code cells and their outputs (code may hold a literal "\(").
_PROSE_TEXT = """() => {
  const main = document.querySelector('main') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, .cell_output, .cell_input').forEach(e => e.remove());
  return copy.innerText;
}"""


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh_CN"])
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline(visit, page, edition):
    v = visit(f"{edition}{page}.html")
    v.wait_for_math()
    p = v.page

    h1 = p.locator("main h1").first.inner_text().strip().rstrip("#").strip()
    assert h1, f"{page}: no title"
    assert h1 in p.title(), f"{page}: <title> {p.title()!r} does not name the page title {h1!r}"

    n_math = p.evaluate("() => document.querySelectorAll('.math').length")
    if n_math:
        typeset = p.evaluate("() => document.querySelectorAll('mjx-container').length")
        assert typeset >= n_math, f"{page}: {typeset} typeset formulas for {n_math} math nodes"
        assert p.evaluate("() => document.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]').length") == 0, (
            f"{page}: MathJax reports an error in a formula"
        )
    prose = p.evaluate(_PROSE_TEXT)
    for raw in ("\\(", "\\[", "$$"):
        assert raw not in prose, f"{page}: raw TeX {raw!r} on the page: {prose[max(0, prose.find(raw) - 80) :][:200]!r}"

    broken = p.evaluate(
        "() => [...document.querySelectorAll('main img')].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert not broken, f"{page}: images not loaded: {broken}"

    if page in CHAPTERS and _uses_explorer(page):
        state = p.evaluate(
            "() => { const s = document.querySelector('script[type=\"application/vnd.jupyter.widget-state+json\"]');"
            " return s ? Object.keys(JSON.parse(s.textContent).state).length : 0 }"
        )
        assert state > 0, f"{page}: the chapter shows an explorer but no widget state is saved (python -m tests.execute_notebooks)"
        views = p.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        assert views > 0, f"{page}: no widget view on the page"
        # The HTML manager draws each view as a sibling of its script tag; a slider has a handle.
        p.wait_for_function(
            f"() => document.querySelectorAll('.jupyter-widgets.widget-slider, .widget-slider').length >= {views}",
            timeout=30_000,
        )
        assert p.locator(".widget-slider .ui-slider-handle, .widget-slider .noUi-handle").count() >= views, (
            f"{page}: slider drawn without a handle"
        )

    # The language switch: the same page in the other edition, and it exists.
    switch = p.locator("a.lang-switch")
    assert switch.count() == 1, f"{edition}{page}: no language switch"
    href = switch.get_attribute("href") or ""
    other = "" if edition else ZH
    assert href.split("#")[0].split("?")[0].endswith(f"/{other}{page}.html"), f"{edition}{page}: switch goes to {href}"
    assert edition or "/zh_CN/" in href, href
    assert not edition or "/zh_CN/" not in href, href
    assert p.request.get(href).ok, f"{edition}{page}: the language switch's target {href} is missing"
    assert switch.inner_text().strip() == ("English" if edition else "中文")

    assert not v.failed, f"{page}: failed local requests: {v.failed}"
    assert not v.refused, f"{page}: the page tried to reach the network: {sorted(set(v.refused))[:5]}"
    assert not v.unexpected_errors(), f"{page}: JavaScript errors: {v.unexpected_errors()}"


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh_CN"])
@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_has_launch_download_and_repository_buttons(visit, page, edition):
    v = visit(f"{edition}{page}.html")
    hrefs = v.page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    repo = CONFIG["repository"]["url"]
    name = page.split("/")[-1]
    assert any(h.startswith("https://colab.research.google.com/github/") and name in h for h in hrefs), "no Open in Colab"
    assert any(h.startswith(CONFIG["launch_buttons"]["binderhub_url"]) and name in h for h in hrefs), "no Binder"
    assert any(h.startswith(repo) for h in hrefs), "no repository button"
    downloads = [h for h in hrefs if "/_sources/" in h and h.endswith(f"{name}.ipynb")]
    assert downloads, "no .ipynb download button"
    assert v.page.request.get(downloads[0]).ok, f"the download {downloads[0]} is missing from the build"


@pytest.mark.parametrize(("edition", "word"), [("", "softmax"), (ZH, "注意力"), (ZH, "掩码")])
def test_search_finds_pages(visit, edition, word):
    v = visit(f"{edition}search.html?q={word}")
    v.page.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0", timeout=30_000)
    titles = v.page.locator("#search-results li a").all_inner_texts()
    assert any(t.strip() for t in titles), "search returned no linked results"
    assert not v.unexpected_errors(), v.unexpected_errors()


def test_screenshot_of_a_chapter_with_math_and_a_widget(visit):
    with_widgets = [c for c in CHAPTERS if "widget-view+json" in (HTML / f"{c}.html").read_text()]
    page = with_widgets[0] if with_widgets else CHAPTERS[0]
    v = visit(f"{page}.html")
    v.wait_for_math()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = page.split("/")[-1]
    first_math = v.page.locator("mjx-container[display='true']").first
    if first_math.count():
        first_math.scroll_into_view_if_needed()
        v.page.screenshot(path=str(SCREENSHOTS / f"{name}_math.png"))
    slider = v.page.locator(".widget-slider").first
    if slider.count():
        slider.wait_for(state="visible", timeout=30_000)
        slider.scroll_into_view_if_needed()
        v.page.mouse.wheel(0, -300)  # the figure above the slider too
        v.page.wait_for_timeout(300)
        v.page.screenshot(path=str(SCREENSHOTS / f"{name}_widget.png"))
    assert list(SCREENSHOTS.glob(f"{name}_*.png")), "no screenshot written"


@pytest.fixture(scope="module")
def prefixed_server():
    """The same build served one folder up, so that the book lives under the prefix /html/."""
    handler = functools.partial(_QuietHandler, directory=str(HTML.parent))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/html"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("edition", EDITIONS, ids=["en", "zh_CN"])
def test_language_switch_works_from_file_urls_and_under_a_prefix(browser, prefixed_server, edition):
    page = CHAPTERS[0]
    other = "" if edition else ZH
    context = browser.new_context()
    context.route("http*://**/*", lambda r: r.continue_() if r.request.url.startswith(prefixed_server) else r.abort())
    try:
        p = context.new_page()
        p.goto((HTML / f"{edition}{page}.html").as_uri(), wait_until="load")
        href = p.locator("a.lang-switch").get_attribute("href")
        assert href == (HTML / f"{other}{page}.html").as_uri(), f"from file://: {href}"

        p.goto(f"{prefixed_server}/{edition}{page}.html#learning-goals", wait_until="load")
        href = p.locator("a.lang-switch").get_attribute("href")
        assert href == f"{prefixed_server}/{other}{page}.html#learning-goals", f"under a prefix: {href}"
        p.locator("a.lang-switch").click()
        p.wait_for_load_state("load")
        assert p.url.startswith(f"{prefixed_server}/{other}{page}.html")
        assert p.locator("a.lang-switch").inner_text().strip() == ("中文" if edition else "English")
    finally:
        context.close()
