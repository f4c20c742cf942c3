"""A screenshot of the search page (docs/assets/search-page.png): serve an index, ask a question in Debian's
chromium (driven by Playwright, never Playwright's own browsers), save the first screen as a PNG.

    longembed index ../shared/data/paul_graham_essays/PaulGrahamEssays --index runs/pg-index \\
        --model default --method pi --max-length 4096 --strategy late-chunks+bm25
    python benchmarks/search_page_screenshot.py --index runs/pg-index \\
        --question "why do Lisp programmers get so much done?" --out docs/assets/search-page.png

The server runs as ``longembed serve --index`` on a free port of 127.0.0.1 and is stopped at the end;
the script fails if the page requested anything from elsewhere.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

#: the page's height at each width screenshotted: a desktop's 1280 x 800, a phone's 390 x 844
HEIGHTS = {1280: 800, 390: 844}
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path, port: int) -> subprocess.Popen:
    """``longembed serve --index`` on ``port``, once /health answers."""
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--index", str(index), "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit("longembed serve --index did not start:\n" + server.communicate()[0]) from None
            time.sleep(0.5)


def screenshot(base: str, question: str, out: Path, chromium: str, width: int = 1280) -> list[str]:
    """The page after ``question`` at ``width`` px, its first screen saved to ``out``; returns every URL it
    requested."""
    requested: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": HEIGHTS.get(width, 800)})
        page.on("request", lambda request: requested.append(request.url))
        page.goto(base + "/")
        page.wait_for_selector("#search-form:not([hidden])")
        page.locator("#query").fill(question)
        page.locator("#query").press("Enter")
        page.wait_for_selector("#results .result", timeout=300_000)
        page.locator("#query").blur()
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out))
        top = page.locator("#results .result .doc-id").first.inner_text()
        browser.close()
    print(f"top document: {top}; wrote {out}")
    return requested


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="an index built by longembed index")
    parser.add_argument("--question", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/assets/search-page.png"))
    parser.add_argument("--width", type=int, default=1280, help="the window's width in px (390: a phone's)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    port = free_port()
    server = start_server(args.index, port)
    base = f"http://127.0.0.1:{port}"
    try:
        requested = screenshot(base, args.question, args.out, args.chromium, args.width)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=120)
    foreign = [url for url in requested if not url.startswith(base + "/")]
    if foreign:
        raise SystemExit(f"the page requested other servers: {foreign}")


if __name__ == "__main__":
    main()
