"""The judging page in Debian's chromium, driven by Playwright, over ``longembed judge`` in its own process
(BM25 and naive chunks of the packaged all-MiniLM-L6-v2, pool depth 3, ten queued questions): a scripted
user judges the ten questions by clicks and keys; the server is killed (SIGKILL) mid-question and
restarted, and the page resumes at the next unjudged result; the files then hold exactly the clicks
made, load as a BEIR task, and each question's pool is the union of each strategy's own top 3 as
``longembed search --json`` prints it (the CLI's main in-process: a process per search would load the
model 20 times).  On a second server, a user judges three questions, presses Advise, keeps judging while
it runs and sees the recommendation with each strategy's judged@10 (those of advice.json).
Screenshots (390 and 1280 px, and the advice) go to the test's tmp folder: look at them."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import missing, require_package

from longembed.cli.main import main
from longembed.judging.advising import ADVICE_FOLDER
from longembed.results.advice import Advice
from longembed.tasks.judgment_log import LOG_FILE
from longembed.tasks.task_dir import TaskDirTask

pytestmark = pytest.mark.slow  # a server process, chromium and the packaged all-MiniLM-L6-v2

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DOCUMENTS = {
    "eiffel.txt": "The Eiffel Tower stands in Paris. It was built in 1889 for the World's Fair, designed by the "
                  "company of Gustave Eiffel, and was the tallest structure in the world until 1930.",
    "fuji.txt": "Mount Fuji is the highest mountain in Japan, 3,776 metres. It is an active volcano that last "
                "erupted in 1707, during the Edo period.",
    "amazon.txt": "The Amazon river flows through Brazil, Peru and Colombia. It carries more water than any other "
                  "river, about a fifth of all the fresh water that reaches the oceans.",
    "photosynthesis.md": "# Photosynthesis\n\nPlants turn light into chemical energy. Chlorophyll absorbs red and "
                         "blue light and reflects green, which is why leaves look green.",
    "wall.txt": "The Great Wall of China was built over many centuries. Its best known parts date from the Ming "
                "dynasty, which rebuilt it in brick and stone.",
    "moon.txt": "Apollo 11 landed on the Moon in July 1969. Neil Armstrong and Buzz Aldrin walked on the surface "
                "while Michael Collins orbited above.",
    "coffee.txt": "Coffee beans are the seeds of the coffee plant. Arabica and robusta are the two species grown "
                  "most; Brazil grows more coffee than any other country.",
    "penicillin.txt": "Alexander Fleming discovered penicillin in 1928, when mould killed the bacteria in one of "
                      "his dishes. It became the first widely used antibiotic.",
    "everest.txt": "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level. "
                   "Tenzing Norgay and Edmund Hillary first reached its summit in 1953.",
    "printing.txt": "Johannes Gutenberg built a printing press with movable metal type around 1440 in Mainz; his "
                    "Bible was printed in the 1450s.",
}
QUESTIONS = ["When was the Eiffel Tower built?", "How high is Mount Fuji?", "Which river carries the most water?",
             "Why are leaves green?", "Who rebuilt the Great Wall in brick?", "Who walked on the Moon in 1969?",
             "Which country grows the most coffee?", "Who discovered penicillin?",
             "Who first climbed the highest mountain?", "Who invented the printing press?"]
DEPTH, STRATEGIES = 3, ["bm25", "naive-chunks"]


@pytest.fixture(scope="module")
def browser():
    sync_api = require_package("playwright.sync_api")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        missing("chromium is not installed (apt-get install -y chromium): the judging page tests drive it")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return documents_and_questions(tmp_path_factory.mktemp("judge"))


def documents_and_questions(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    (root / "questions.txt").write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    return root


#: how many pixels of the question box's placeholder do not fit in it (its text measured in its own font)
PLACEHOLDER_OVERFLOW = """() => {
  const input = document.getElementById("question"), box = getComputedStyle(input);
  const font = getComputedStyle(input, "::placeholder"), context = document.createElement("canvas").getContext("2d");
  context.font = `${font.fontWeight} ${font.fontSize} ${font.fontFamily}`;
  const inner = input.clientWidth - parseFloat(box.paddingLeft) - parseFloat(box.paddingRight);
  return context.measureText(input.placeholder).width - inner;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_judge(root: Path, port: int, indexes: Path) -> subprocess.Popen:
    """``longembed judge`` in its own process, its indexes in ``indexes`` (shared by the servers of a
    worker: the same documents); returns once the page answers."""
    command = [sys.executable, "-m", "longembed.cli.main", "judge", "--docs", str(root / "docs"), "--out",
               str(root / "task"), "--model", "default", "--strategies", ",".join(STRATEGIES), "--k", str(DEPTH),
               "--questions", str(root / "questions.txt"), "--port", str(port)]
    command += ["--indexes", str(indexes)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("longembed judge did not start:\n" + server.communicate()[0])
            time.sleep(0.3)


def wait_question(page, text: str) -> None:
    page.wait_for_function("t => document.getElementById('asked').textContent === t", arg=text)


def current_doc(page) -> str:
    return page.locator(".result.current .doc-id").inner_text()


def grade_by_click(page, position: int, grade: int) -> str:
    item = page.locator(".result").nth(position)
    doc = item.locator(".doc-id").inner_text()
    item.locator(f"button[data-grade='{grade}']").click()
    return doc


def grade_by_key(page, key: str) -> str:
    doc = current_doc(page)
    page.keyboard.press(key)
    return doc


def wait_saved(page, judgments: int) -> None:
    page.wait_for_function("n => document.querySelector('#progress b:nth-of-type(2)')?.textContent === String(n)",
                           arg=judgments)


def wait_grade(base: str, query_id: str, doc: str, grade: int) -> None:
    """Until the server holds ``grade`` for the result (a changed mind adds no judgment to the count)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        results = httpx.get(f"{base}/judge/questions/{query_id}").json()["question"]["results"]
        if any(r["doc_id"] == doc and r["grade"] == grade for r in results):
            return
        time.sleep(0.1)
    pytest.fail(f"the grade {grade} of {doc} was not saved")


def test_a_user_judges_ten_questions_through_a_kill_and_the_files_hold_exactly_the_clicks(browser, folders):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_judge(folders, port, folders / "indexes")
    clicks: dict[tuple[str, str], int] = {}
    count = 0
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(base + "/")
        keys = {"2": 2, "1": 1, "0": 0, "r": 2, "p": 1, "x": 0}
        for number, question in enumerate(QUESTIONS, 1):
            wait_question(page, question)
            query_id = f"j{number}"
            results = page.locator(".result").count()
            assert 1 <= results <= DEPTH * len(STRATEGIES)
            if number == 1:
                page.screenshot(path=str(folders / "judge-page-1280.png"))
            for position in range(results):
                if number % 2:  # odd questions by click, even ones by key
                    doc = grade_by_click(page, position, (number + position) % 3)
                    clicks[(query_id, doc)] = (number + position) % 3
                else:
                    key = list(keys)[(number + position) % len(keys)]
                    doc = grade_by_key(page, key)
                    clicks[(query_id, doc)] = keys[key]
                count += 1
                wait_saved(page, len(clicks))
                if number == 6 and position == 0:  # a kill -9 mid-question, then a restart
                    server.send_signal(signal.SIGKILL)
                    server.wait(timeout=30)
                    server = start_judge(folders, port, folders / "indexes")
                    page.reload()
                    wait_question(page, question)
                    assert page.locator(".result").nth(1).get_attribute("class").split() == ["result", "current"]
            if number == 1:  # a changed mind: the first result again, by key, after moving up with k
                for _ in range(results):
                    page.keyboard.press("k")
                doc = grade_by_key(page, "2")
                assert doc == page.locator(".result .doc-id").first.inner_text()
                clicks[(query_id, doc)] = 2
                count += 1
                wait_grade(base, query_id, doc, 2)
            if number < len(QUESTIONS):
                if number % 2:
                    page.locator("#next").click()
                else:
                    page.keyboard.press("n")
        page.keyboard.press("n")
        page.wait_for_function("() => document.getElementById('status').textContent.startsWith('Every question')")
        assert all(url.startswith(base + "/") for url in requested), requested
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)

    task = folders / "task"
    qrels = TaskDirTask(task).load().qrels  # loads as a BEIR task (questions with a relevant result only)
    rows = [line.split("\t") for line in (task / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    assert {(q, d): int(g) for q, d, g in rows} == clicks
    assert all(clicks[(q, d)] == g for q, docs in qrels.items() for d, g in docs.items())
    records = [json.loads(line) for line in (task / LOG_FILE).read_text().splitlines()]
    assert len([r for r in records if r["event"] == "judgment"]) == count
    for record in (r for r in records if r["event"] == "question"):  # the pool: each strategy's own top k
        tops = [{r["id"] for r in search_json(folders / "indexes" / s, record["text"], DEPTH)["results"]}
                for s in STRATEGIES]
        assert set(record["pool"]) == set().union(*tops)
        assert record["strategies"] == STRATEGIES and record["pool_depth"] == DEPTH


def search_json(index: Path, question: str, k: int) -> dict:
    """What ``longembed search --index INDEX --json -k K QUESTION`` prints, parsed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["search", "--index", str(index), "--json", "-k", str(k), question]) == 0
    return json.loads(printed.getvalue())


@pytest.fixture(scope="module")
def live_folders(tmp_path_factory):
    """The live server's own task folder: the first test's query ids must not depend on test order."""
    return documents_and_questions(tmp_path_factory.mktemp("judge-live"))


@pytest.fixture(scope="module")
def live(live_folders, folders):
    """One server for the layout and advise tests (each start brings two indexes up to date and loads the
    model); they share a worker (one xdist group), so the server starts once, on the first test's indexes
    (the same documents: whichever server starts first builds them)."""
    port = free_port()
    server = start_judge(live_folders, port, folders / "indexes")
    yield f"http://127.0.0.1:{port}"
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=60)


def ask_and_judge(page, question: str, relevant: int = 0) -> int:
    """Type ``question``, grade its results by key (the ``relevant``-th one 2, the others 0); the count."""
    page.locator("#question").fill(question)
    page.locator("#question").press("Enter")
    wait_question(page, question)
    results = page.locator(".result").count()
    for position in range(results):
        page.keyboard.press("2" if position == relevant else "0")
    page.wait_for_function("() => document.body.dataset.pending === '0'")
    return results


@pytest.mark.xdist_group("judge_live")
@pytest.mark.parametrize("width, height, question", [(390, 844, "What did Gutenberg print?"),
                                                     (1280, 800, "Which mountain is the highest?")])
def test_the_page_fits_a_phone_and_a_desktop(browser, live_folders, live, width: int, height: int,
                                              question: str) -> None:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(live + "/")
    assert page.evaluate(PLACEHOLDER_OVERFLOW) <= 0  # the placeholder is read whole
    page.locator("#question").fill(question)  # at once: the page's own first request must not overwrite it
    page.locator("#question").press("Enter")
    wait_question(page, question)
    page.keyboard.press("2")
    page.keyboard.press("x")
    page.wait_for_function("() => document.body.dataset.pending === '0'")  # both clicks saved
    page.screenshot(path=str(live_folders / f"judge-page-{width}.png"))
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
    for selector in ("#ask-form button", "#next", ".result button[data-grade='0']", "#asked", "#progress"):
        box = page.locator(selector).first.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, selector
        assert 0 <= box["y"] < height, selector  # on the screen, the question and progress included
    current = page.locator(".result.current").bounding_box()
    assert current is not None and current["y"] + current["height"] <= height  # the result the keys act on, whole
    for button in page.locator(".result.current button").all():
        assert button.bounding_box()["height"] < 48  # one line of text: no label broken over three
    print(f"screenshots: {live_folders}")


@pytest.mark.xdist_group("judge_live")
def test_a_user_judges_then_advises_from_the_page_and_sees_judged_at_10(browser, live, live_folders) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(live + "/")
    for question in ("Who discovered penicillin?", "Which country grows the most coffee?",
                     "When did Apollo 11 land on the Moon?"):
        ask_and_judge(page, question)
    page.keyboard.press("a")
    page.wait_for_function("() => document.getElementById('advice').dataset.state === 'running'")
    ask_and_judge(page, "Who designed the Eiffel Tower?")  # judging goes on while advise runs
    assert page.locator("#advice").get_attribute("data-state") == "running"
    page.wait_for_function("() => document.getElementById('advice').dataset.state === 'done'", timeout=120_000)
    page.evaluate("window.scrollTo(0, 0)")
    for width, height in ((390, 1400), (1280, 1000)):  # the advice whole, the sticky header above it
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(live_folders / f"judge-advice-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # the table fits a phone
    advice = Advice.load(live_folders / "task" / ADVICE_FOLDER)
    assert page.locator("#advice-choice").inner_text().startswith(f"Use {advice.recommendation.choice}:")
    rows = page.locator("#advice-table tbody tr")
    assert rows.count() == len(advice.strategies)
    for i, strategy in enumerate(advice.strategies):
        cells = rows.nth(i).locator("td")
        assert cells.nth(0).inner_text() == strategy.name
        assert cells.nth(1).inner_text().startswith(f"{strategy.score:.1f} [{strategy.interval.low:.1f}, ")
        judged = cells.nth(3).inner_text()
        assert judged == "–" if strategy.judged_at_10 is None else judged.startswith(f"{strategy.judged_at_10:.1f}%")
    assert any(s.judged_at_10 is not None for s in advice.strategies)
    # the pool is 3 deep: every pooled strategy's top 10 reaches past it, so advise warns
    assert "mostly unjudged" in page.locator("#advice-warning").inner_text()
    assert "longembed index" in page.locator("#advice-commands").inner_text()
    print(f"screenshots: {live_folders}")
