"""The search page over an index of the PDF, HTML and Word fixtures, in Debian's chromium at a phone's
width (390 px) and a desktop's (1280 px): "page N" beside the passage's document, the id on one line, and
the PDF's id a link to its file at that page.  Screenshots go to the test's tmp folder (look at them)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import real_model_folder

from longembed.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from conftest import require_package  # noqa: E402
from test_search_page import CHROMIUM_ARGS, chromium_path, serve_index  # noqa: E402

pytestmark = pytest.mark.slow  # a server process, chromium and the real all-MiniLM-L6-v2

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QUESTION = "What is the mean spring range at Port Ellen?"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("documents-page")
    docs = root / "docs"
    docs.mkdir()
    for name in ("manual.pdf", "hyphenated.pdf", "handbook.docx", "docs-page.html", "texinfo-page.html"):
        shutil.copy(FIXTURES / name, docs / name)
    index = root / "index"
    assert main(["index", str(docs), "--index", str(index), "--model", str(real_model_folder("all-MiniLM-L6-v2")),
                 "--strategy", "late-chunks+bm25", "--max-length", "512", "--chunking", "tokens:16"]) == 0
    base, stop = serve_index(index)
    yield base, docs
    stop()


@pytest.fixture(scope="module")
def browser():
    sync_api = require_package("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_page_n_shows_beside_the_pdf_passage_and_links_its_page(browser, live, width: int, tmp_path: Path) -> None:
    base, docs = live
    page = browser.new_page(viewport={"width": width, "height": 844 if width == 390 else 800})
    page.goto(base + "/?q=" + QUESTION.replace(" ", "%20"))
    page.wait_for_selector("#results .result")
    page.screenshot(path=str(tmp_path / f"documents-{width}.png"), full_page=False)
    print(f"screenshot: {tmp_path / f'documents-{width}.png'}")
    first = page.locator("#results .result").first
    doc_id, location = first.locator(".doc-id"), first.locator(".result-head .location")
    assert doc_id.inner_text() == "manual.pdf" and location.inner_text() == "page 2"
    assert "Port Ellen records a mean spring range" in first.locator("mark").inner_text()
    assert first.locator(".passage .where").inner_text().startswith("page 2 · characters ")
    id_box, location_box = doc_id.bounding_box(), location.bounding_box()
    line = float(page.evaluate("(e) => parseFloat(getComputedStyle(e).lineHeight)", doc_id.element_handle()))
    assert id_box["height"] < 1.5 * line, id_box  # the id on one line: never "manual.p" / "df"
    assert location_box["x"] + location_box["width"] <= width and id_box["x"] + id_box["width"] <= width
    if width >= 900:  # beside the id on a desktop; on a phone it may go to the next line, never over it
        assert abs(location_box["y"] - id_box["y"]) < line and location_box["x"] > id_box["x"] + id_box["width"]
    assert doc_id.get_attribute("href") == "/search/file/manual.pdf#page=2"
    with page.context.expect_page() as opened:
        doc_id.click()
    tab = opened.value
    tab.wait_for_load_state()
    assert tab.url == base + "/search/file/manual.pdf#page=2"
    tab.close()
    # the index panel describes the index's chunks (not only the encoder's window: "truncate, up to 512 tokens")
    facts = page.locator("#facts").inner_text()
    assert ("chunks of 16 tokens, no overlap; late chunking: pooled from the document read in windows of up to "
            "512 tokens (truncate); a document scores its best chunk") in " ".join(facts.split())
    # a hit that is not a PDF has no link
    html = page.locator('#results .result[data-id="docs-page.html"] .doc-id')
    assert html.count() == 0 or html.evaluate("(e) => e.tagName") == "SPAN"
    page.close()
