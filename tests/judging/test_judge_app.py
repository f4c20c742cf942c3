"""The judging routes (longembed.judging.app) over a session with fake strategies: a question pooled once
and recorded, its payload free of strategy names, clicks saved in order, next question and progress,
errors as 400s, and concurrent clicks through the app all saved."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from longembed.cli.main import main
from longembed.judging.app import create_judging_app
from longembed.judging.session import JudgingSession
from longembed.tasks.judgment_log import LOG_FILE, JudgmentLog
from longembed.tasks.task_dir import TaskDirTask, read_qrels

DOCS = [f"d{i}.txt" for i in range(12)]


def searcher(order: list[str], calls: list[str]):
    def search(question: str, k: int) -> list[dict]:
        calls.append(question)
        return [{"rank": i, "id": d, "score": 9.0, "source": d, "systems": {"SECRET_NAME": {}},
                 "passage": {"text": f"{d} for {question}", "before": "", "after": ""}}
                for i, d in enumerate(order[:k], 1)]
    return search


@pytest.fixture
def app_and_folder(tmp_path: Path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": d}) + "\n" for d in DOCS))
    calls: list[str] = []
    searchers = {"SECRET_NAME": searcher(DOCS, calls), "OTHER_SECRET": searcher(DOCS[::-1], calls)}
    session = JudgingSession(JudgmentLog(folder), searchers, depth=3, seed=1, queued=["first queued?", "second?"])
    return TestClient(create_judging_app(session)), folder, calls


def test_a_question_is_pooled_once_judged_and_saved(app_and_folder):
    client, folder, calls = app_and_folder
    answer = client.post("/judge/questions", json={"text": "who?"})
    assert answer.status_code == 200
    assert "SECRET" not in answer.text
    question = answer.json()["question"]
    assert sorted(r["doc_id"] for r in question["results"]) == ["d0.txt", "d1.txt", "d10.txt", "d11.txt", "d2.txt",
                                                                 "d9.txt"]
    assert client.post("/judge/questions", json={"text": "who?"}).json()["question"] == question
    assert calls == ["who?", "who?"]  # two strategies, searched once: the second ask read the log
    for result, grade in zip(question["results"], [2, 1, 0, 0, 0, 0], strict=True):
        saved = client.post("/judge/judgments", json={"query_id": "j1", "doc_id": result["doc_id"], "grade": grade})
        assert saved.status_code == 200
    progress = saved.json()["progress"]
    assert (progress["questions_done"], progress["judgments"], progress["results_left"]) == (1, 6, 0)
    data = TaskDirTask(folder).load()
    assert sorted(data.qrels["j1"].values()) == [0, 0, 0, 0, 1, 2]
    shown_first = question["results"][0]["doc_id"]
    assert data.qrels["j1"][shown_first] == 2


def test_next_goes_to_unfinished_then_queued_questions_then_done(app_and_folder):
    client, _folder, _calls = app_and_folder
    first = client.post("/judge/next").json()
    assert first["question"]["text"] == "first queued?" and first["progress"]["queued"] == 1
    again = client.post("/judge/next").json()["question"]  # unfinished: the same question, as recorded
    assert again == first["question"]
    for result in again["results"]:
        client.post("/judge/judgments", json={"query_id": again["query_id"], "doc_id": result["doc_id"], "grade": 0})
    assert client.post("/judge/next").json()["question"]["text"] == "second?"
    second = client.get("/judge/questions/j2").json()["question"]
    for result in second["results"]:
        client.post("/judge/judgments", json={"query_id": "j2", "doc_id": result["doc_id"], "grade": 1})
    done = client.post("/judge/next").json()
    assert done["done"] is True and done["progress"]["queued"] == 0


def test_errors_are_400s_and_write_nothing(app_and_folder):
    client, folder, _calls = app_and_folder
    client.post("/judge/questions", json={"text": "who?"})
    size = (folder / LOG_FILE).stat().st_size
    for body in [{"query_id": "j1", "doc_id": "d0.txt", "grade": 5}, {"query_id": "j9", "doc_id": "d0.txt", "grade": 1},
                 {"query_id": "j1", "doc_id": "d5.txt", "grade": 1}, {"query_id": "j1", "doc_id": "d0.txt"}]:
        answer = client.post("/judge/judgments", json=body)
        assert answer.status_code == 400 and answer.json()["error"]["message"]
    assert client.post("/judge/questions", json={"text": "  "}).status_code == 400
    assert client.post("/judge/questions", content=b"not json").status_code == 400
    assert (folder / LOG_FILE).stat().st_size == size


def test_the_page_files_are_served_with_the_search_page_s_headers(app_and_folder):
    client, _folder, _calls = app_and_folder
    page = client.get("/")
    assert page.status_code == 200 and "judge.js" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert client.get("/page/judge.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/page/../app.py").status_code == 404


def test_concurrent_clicks_through_the_app_are_all_saved(app_and_folder):
    client, folder, _calls = app_and_folder
    docs = [r["doc_id"] for r in client.post("/judge/questions", json={"text": "who?"}).json()["question"]["results"]]
    clicks = [(doc, grade) for doc in docs for grade in (0, 1, 2)] * 2

    def click(pair):
        return client.post("/judge/judgments", json={"query_id": "j1", "doc_id": pair[0], "grade": pair[1]}).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(click, clicks)) == {200}
    lines = (folder / LOG_FILE).read_text().splitlines()
    judgments = [json.loads(line) for line in lines if json.loads(line)["event"] == "judgment"]
    assert len(judgments) == len(clicks)
    last = {}
    for record in judgments:  # the log's order decides: the qrels hold each document's last grade in it
        last[record["doc_id"]] = record["grade"]
    assert read_qrels(folder / "qrels" / "test.tsv", {"j1"}, set(DOCS))["j1"] == last


def test_judge_refuses_an_output_folder_that_is_not_its_own(tmp_path):
    """A BEIR folder written elsewhere is never overwritten: its queries and qrels would be replaced."""
    task = tmp_path / "theirs"
    (task / "qrels").mkdir(parents=True)
    (task / "queries.jsonl").write_text('{"_id": "q1", "text": "mine"}\n')
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a document")
    assert main(["judge", "--docs", str(docs), "--out", str(task), "--model", "bm25", "--no-serve"]) != 0
    assert (task / "queries.jsonl").read_text() == '{"_id": "q1", "text": "mine"}\n'
    ours = tmp_path / "ours"
    assert main(["judge", "--docs", str(docs), "--out", str(ours), "--model", "bm25", "--no-serve"]) == 0
    assert main(["judge", "--docs", str(docs), "--out", str(ours), "--model", "bm25", "--no-serve"]) == 0  # resumed
    assert (ours / "judgments.jsonl").read_text() == "" and (ours / "corpus.jsonl").read_text().count("\n") == 1
