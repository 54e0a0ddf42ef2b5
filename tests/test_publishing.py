"""Static checks of what the published book relies on (no build, no network, no browser).

The rendered pages themselves are checked in a real browser by tests/test_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pkgutil
import re
import struct
from pathlib import Path

import pytest
import yaml

import mtlib

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
SPHINX = CONFIG["sphinx"]["config"]
VENDOR = ROOT / "book" / "_extra" / "_static" / "_vendor"
API = (ROOT / "book" / "api.md").read_text()


def test_every_public_mtlib_module_has_an_automodule_block_in_the_api_page():
    public = {"mtlib"} | {
        m.name for m in pkgutil.walk_packages(mtlib.__path__, "mtlib.") if not any(p.startswith("_") for p in m.name.split("."))
    }
    documented = set(re.findall(r"^\.\. automodule:: (\S+)", API, re.M))
    assert public - documented == set(), f"book/api.md misses {sorted(public - documented)}: python -m tests.sync_api_page"
    assert documented - public == set(), f"book/api.md documents modules that do not exist: {sorted(documented - public)}"
    assert "book/api" in (ROOT / "_toc.yml").read_text()


def test_math_is_bundled_not_loaded_from_a_cdn():
    assert "sphinx-mathjax-offline" in CONFIG["sphinx"]["extra_extensions"]
    assert "mathjax_path" not in SPHINX, "sphinx-mathjax-offline sets mathjax_path to the bundled copy"


def test_widget_javascript_is_vendored_and_unchanged():
    scripts = SPHINX["nb_ipywidgets_js"]
    assert scripts, "nb_ipywidgets_js must name the vendored scripts (the default is two CDNs)"
    for src in scripts:
        assert "://" not in src, f"{src} would be loaded from the network"
        assert (VENDOR.parent / src).is_file(), f"{src} is not under book/_extra/_static/ (bash tests/vendor_js.sh)"
    assert SPHINX["html_extra_path"] == ["book/_extra"]
    for line in (VENDOR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        actual = hashlib.sha256((VENDOR / name).read_bytes()).hexdigest()
        assert actual == digest, f"{name} differs from the npm package (bash tests/vendor_js.sh)"


def test_no_javascript_in_a_source_static_folder():
    """jupyter-book adds every .js under the book's _static/ (and html_static_path) to EVERY page."""
    for folder in [ROOT / "_static", *(ROOT / p for p in SPHINX.get("html_static_path", []))]:
        assert not list(folder.rglob("*.js")) if folder.exists() else True, f"{folder} holds .js files"


def test_the_test_extra_has_the_browser_driver_and_requirements_the_offline_math():
    test_extra = re.search(r"^test = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert test_extra and '"playwright' in test_extra.group(1)
    reqs = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^sphinx-mathjax-offline", reqs, re.M)


def test_readme_documents_the_gpu_lane_and_the_browser_stage():
    readme = (ROOT / "README.md").read_text()
    assert "MTLIB_DEVICE=cuda python -m pytest tests" in readme
    assert "--nbval-lax chapters/" in readme
    assert "chromium" in readme


def _png_dpi(png: bytes) -> float | None:
    """The resolution matplotlib records in a PNG's pHYs chunk (None without one)."""
    pos = 8
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        if png[pos + 4 : pos + 8] == b"pHYs":
            x_per_metre, _, unit = struct.unpack(">IIB", png[pos + 8 : pos + 17])
            return x_per_metre * 0.0254 if unit == 1 else None
        pos += 12 + length
    return None


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.name)
def test_figures_are_stored_at_150_dpi_or_more(path):
    nb = json.loads(path.read_text())
    for number, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                dpi = _png_dpi(base64.b64decode(png))
                assert dpi is not None and dpi >= 149.5, f"{path.name}: code cell {number} stores a figure at {dpi} dpi"
