"""The search page in a real browser: Debian's chromium driven by Playwright (never Playwright's own browsers).

A live server on 127.0.0.1 serves the page; the test types a question as a user would, expects the
right document on top with its passage on the first screen (1280 x 800), checks that no request left
127.0.0.1, that a document's HTML is shown as text and never run, and that with an API key the page
shows nothing of the index until the key works.  Screenshots go to the test's tmp folder.

Where chromium or Playwright is missing the tests skip, naming what to install; under ``CI`` they fail.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import missing, real_model_folder, require_package
from search_fakes import FakeSearchIndex
from test_search_route import DOCUMENTS

from longembed import load_encoder
from longembed.serving import ServerSettings, bound_port, build_server

VIEWPORT = {"width": 1280, "height": 800}
#: Flags for a browser that talks to nobody but the page's server (no updates, sync, or first-run calls).
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_path() -> str:
    """Debian's chromium, or :func:`missing` with the command that installs it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        missing("chromium is not installed (apt-get install -y chromium): the search page tests drive it")
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = require_package("playwright.sync_api")
    executable = chromium_path()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def serve_in_thread(index, **settings):
    """A live server for ``index`` on a free port of 127.0.0.1; returns (base url, stop)."""
    encoder = load_encoder(real_model_folder("all-MiniLM-L6-v2"), "pi", max_length=1024)
    server = build_server(encoder, ServerSettings(**settings), port=0, log_level="warning", index=index)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(60)

    return f"http://127.0.0.1:{bound_port(server)}", stop


@pytest.fixture(scope="module")
def live():
    base, stop = serve_in_thread(FakeSearchIndex(DOCUMENTS))
    yield base
    stop()


def open_page(browser, base: str):
    """A fresh page at 1280 x 800 that records every URL it requests."""
    page = browser.new_page(viewport=VIEWPORT)
    page.requested = []
    page.on("request", lambda request: page.requested.append(request.url))
    page.goto(base + "/")
    return page


def ask(page, question: str) -> None:
    page.locator("#query").fill(question)
    page.locator("#query").press("Enter")
    page.wait_for_selector("#results .result")


def test_a_question_finds_its_document_with_the_passage_on_the_first_screen(browser, live, tmp_path: Path) -> None:
    page = open_page(browser, live)
    page.wait_for_selector("#search-form:not([hidden])")
    ask(page, "who founded Y Combinator?")
    page.screenshot(path=str(tmp_path / "search-page.png"))
    first = page.locator("#results .result").first
    assert first.locator(".doc-id").inner_text() == "essays/founders.txt"
    mark = first.locator("mark")
    assert "Y Combinator was founded in 2005" in mark.inner_text()
    box = mark.bounding_box()
    assert box is not None and box["y"] + 40 < VIEWPORT["height"], box  # its first lines are on screen
    assert mark.is_visible()
    # each system's contribution, and the index's facts
    chips = first.locator(".systems").inner_text()
    assert "dense" in chips and "BM25" in chips and "#1" in chips
    facts = page.locator("#facts").inner_text()
    index = FakeSearchIndex(DOCUMENTS).facts()
    for value in (str(index["documents"]), str(index["chunks"]), index["model"], index["strategy"], index["built_at"]):
        assert value in facts
    assert page.locator("#results .result").count() == len(DOCUMENTS)
    assert "?q=who" in page.url  # the question is in the address, to share or reload
    assert page.requested and all(url.startswith(live + "/") for url in page.requested), page.requested
    page.close()


def test_a_documents_html_is_shown_as_text_never_run(browser, live) -> None:
    page = open_page(browser, live)
    page.wait_for_selector("#search-form:not([hidden])")
    ask(page, "img script onerror window xss")
    item = page.locator('#results .result[data-id="notes/xss.txt"]')
    assert item.count() == 1
    assert "<script>window.__xss=2</script>" in item.locator(".passage").inner_text()
    assert page.locator("#results img, #results script").count() == 0
    assert page.evaluate("window.__xss") is None
    page.close()


def test_with_an_api_key_the_page_shows_nothing_until_the_key_works(browser, tmp_path: Path) -> None:
    base, stop = serve_in_thread(FakeSearchIndex(DOCUMENTS), api_key="s3cret")
    try:
        page = open_page(browser, base)
        page.wait_for_selector("#key-form:not([hidden])")
        assert page.locator("#facts-panel").is_hidden() and page.locator("#search-form").is_hidden()
        assert "founders" not in page.content() and "all-MiniLM" not in page.content()
        page.locator("#api-key").fill("wrong")
        page.locator("#api-key").press("Enter")
        page.wait_for_selector("#key-reason:has-text('refused')")
        assert page.locator("#facts-panel").is_hidden()
        page.locator("#api-key").fill("s3cret")
        sent = []
        page.on("request", lambda request: sent.append(request.headers.get("authorization")))
        page.locator("#api-key").press("Enter")
        page.wait_for_selector("#search-form:not([hidden])")
        ask(page, "who founded Y Combinator?")
        assert page.locator("#results .result .doc-id").first.inner_text() == "essays/founders.txt"
        assert "Bearer s3cret" in sent
        assert page.evaluate("sessionStorage.getItem('longembed-api-key')") == "s3cret"
        page.screenshot(path=str(tmp_path / "with-key.png"))
        page.close()
    finally:
        stop()
