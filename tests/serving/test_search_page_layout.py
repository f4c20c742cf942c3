"""The search page at a phone's width (390 px) and a desktop's (1280 px), in Debian's chromium: the header
fits (no horizontal scroll, the Search button inside the screen, with the key's button shown), and a
passage keeps the document's line breaks and spacing, so a table's rows stay rows and its columns line
up.  Screenshots go to the test's tmp folder (look at them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import real_model_folder
from test_search_page import KEY, ask, browser, serve_index, unlock  # noqa: F401 (browser: a fixture)

from longembed.cli.main import main

pytestmark = pytest.mark.slow  # a server process, chromium and the real all-MiniLM-L6-v2

TIDES = """Tide tables
===========

The gauge readings at the harbour, by month:

| month    | mean spring range | mean neap range |
|----------|-------------------|-----------------|
| January  | 4.7 m             | 2.1 m           |
| February | 4.6 m             | 2.0 m           |
| March    | 4.9 m             | 2.2 m           |

Readings are taken every six minutes.
"""
FOUNDERS = ("How it started. " * 20 + "Y Combinator was founded in 2005 by Paul Graham, Jessica Livingston, Robert "
            "Morris and Trevor Blackwell, in Cambridge, Massachusetts. " + "The first batch. " * 20)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A server with an API key (the header then also holds 'Forget API key') over the two documents,
    indexed with index's default strategy."""
    root = tmp_path_factory.mktemp("layout")
    docs = root / "docs"
    docs.mkdir()
    (docs / "tides.md").write_text(TIDES, encoding="utf-8")
    (docs / "founders.txt").write_text(FOUNDERS, encoding="utf-8")
    index = root / "index"
    assert main(["index", str(docs), "--index", str(index), "--model", str(real_model_folder("all-MiniLM-L6-v2")),
                 "--no-estimate"]) == 0
    base, stop = serve_index(index, api_key=KEY)
    yield base
    stop()


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_the_header_fits_and_a_tables_rows_stay_rows(browser, live, width: int, height: int,  # noqa: F811
                                                     tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(live + "/")
    unlock(page)
    ask(page, "mean spring range in March")
    page.screenshot(path=str(tmp_path / f"search-page-{width}.png"))
    for selector in ("#search-form button[type=submit]", "#query", "#k", "#forget-key"):
        box = page.locator(selector).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no horizontal scroll
    assert page.evaluate("(b => b.scrollWidth <= b.clientWidth)(document.querySelector('.bar'))")
    first = page.locator("#results .result").first
    assert first.locator(".doc-id").inner_text() == "tides.md"
    text = first.locator(".passage-text")
    shown = text.inner_text()
    assert "Tide tables\n===========\n" in shown and "\n| March    | 4.9 m             | 2.2 m           |\n" in shown
    assert text.evaluate("e => getComputedStyle(e).whiteSpace") in ("pre", "pre-wrap")
    assert "mono" in text.evaluate("e => getComputedStyle(e).fontFamily").lower()  # a table's columns line up
    founders = page.locator("#results .result").nth(1).locator(".passage-text").first
    assert founders.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"  # prose wraps
    page.close()
