"""The search page in a real browser: Debian's chromium driven by Playwright (never Playwright's own browsers).

``longembed serve --index`` runs in its own process on 127.0.0.1 (a free port) over a real index built by
``longembed index``; the test types a question as a user would, expects the right document on top with
its passage on the first screen (1280 x 800), checks that no request left 127.0.0.1, that a document's
HTML is shown as text and never run, and that with an API key the page shows nothing of the index
until the key works.  Screenshots go to the test's tmp folder.

Where chromium or Playwright is missing the tests skip, naming what to install; under ``CI`` they fail.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import missing, real_model_folder, require_package
from search_support import DOCUMENTS, build_real_index

pytestmark = pytest.mark.slow  # a server process, chromium and the real all-MiniLM-L6-v2

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


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_real_index(tmp_path_factory.mktemp("page"), real_model_folder("all-MiniLM-L6-v2"))


def serve_index(index_dir: Path, api_key: str | None = None):
    """``longembed serve --index`` in its own process on a free port of 127.0.0.1; (base url, stop)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "LONGEMBED_API_KEY"}
    if api_key is not None:
        env["LONGEMBED_API_KEY"] = api_key  # the server reads its key from here, not from the process list
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--index", str(index_dir), "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("longembed serve --index did not start:\n" + server.communicate()[0])
            time.sleep(0.3)

    def stop() -> None:
        server.send_signal(signal.SIGTERM)
        output = server.communicate(timeout=60)[0]
        assert "Traceback" not in output, output

    return base, stop


KEY = "s3cret"


@pytest.fixture(scope="module")
def live(index_dir):
    """One server for the module (each costs a process and a model load), with an API key: every test
    passes the page's key form as a user does."""
    base, stop = serve_index(index_dir, api_key=KEY)
    yield base
    stop()


def open_page(browser, base: str):
    """A fresh page at 1280 x 800 that records every URL it requests."""
    page = browser.new_page(viewport=VIEWPORT)
    page.requested = []
    page.on("request", lambda request: page.requested.append(request.url))
    page.goto(base + "/")
    return page


def unlock(page, key: str = KEY) -> None:
    """Type the API key into the page's form; the search box then appears."""
    page.wait_for_selector("#key-form:not([hidden])")
    page.locator("#api-key").fill(key)
    page.locator("#api-key").press("Enter")
    page.wait_for_selector("#search-form:not([hidden])")


def ask(page, question: str) -> None:
    page.locator("#query").fill(question)
    page.locator("#query").press("Enter")
    page.wait_for_selector("#results .result")


def test_a_question_finds_its_document_with_the_passage_on_the_first_screen(browser, live, tmp_path: Path) -> None:
    page = open_page(browser, live)
    unlock(page)
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
    index = httpx.get(live + "/search/index", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()
    for value in (str(index["documents"]), str(index["chunks"]), index["model"], index["strategy"], index["built_at"]):
        assert value in facts
    assert page.locator("#results .result").count() == len(DOCUMENTS)
    second = page.locator("#results .result").nth(1)  # below the first: a short context, opened on demand
    assert second.locator(".passage.short").is_visible() and second.locator(".passage:not(.short)").is_hidden()
    second.locator("button.more").click()
    assert second.locator(".passage:not(.short)").is_visible() and second.locator(".passage.short").is_hidden()
    assert "characters" in second.locator(".passage:not(.short) .where").inner_text()
    assert "?q=who" in page.url  # the question is in the address, to share or reload
    assert page.requested and all(url.startswith(live + "/") for url in page.requested), page.requested
    page.close()


def test_a_documents_html_is_shown_as_text_never_run(browser, live) -> None:
    page = open_page(browser, live)
    unlock(page)
    ask(page, "img script onerror window xss")
    item = page.locator('#results .result[data-id="notes/xss.txt"]')
    assert item.count() == 1
    assert "<script>window.__xss=2</script>" in item.locator("mark").last.text_content()
    assert page.locator("#results img, #results script").count() == 0
    assert page.evaluate("window.__xss") is None
    page.close()


def test_the_page_shows_nothing_of_the_index_until_its_key_works(browser, live, tmp_path: Path) -> None:
    page = open_page(browser, live)
    page.wait_for_selector("#key-form:not([hidden])")
    assert page.locator("#facts-panel").is_hidden() and page.locator("#search-form").is_hidden()
    assert "founders" not in page.content() and "all-MiniLM" not in page.content()
    page.locator("#api-key").fill("wrong")
    page.locator("#api-key").press("Enter")
    page.wait_for_selector("#key-reason:has-text('refused')")
    assert page.locator("#facts-panel").is_hidden() and page.evaluate("sessionStorage.length") == 0
    sent = []
    page.on("request", lambda request: sent.append(request.headers.get("authorization")))
    unlock(page)
    ask(page, "who founded Y Combinator?")
    assert page.locator("#results .result .doc-id").first.inner_text() == "essays/founders.txt"
    assert f"Bearer {KEY}" in sent
    assert page.evaluate("sessionStorage.getItem('longembed-api-key')") == KEY
    page.reload()  # the key lasts as long as the tab: no second prompt, the question is still in the address
    page.wait_for_selector("#results .result")
    assert page.locator("#key-form").is_hidden()
    page.screenshot(path=str(tmp_path / "with-key.png"))
    page.close()
