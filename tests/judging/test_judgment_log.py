"""The judgment log (longembed.tasks.judgment_log): every click one fsynced line, the BEIR files rewritten
from it atomically, a torn line or a crash mid-rewrite losing at most the click in flight, concurrent
writers never corrupting the files, and the folder loading as any BEIR task does."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import longembed.tasks.judgment_log as judgment_log
from longembed.errors import UserError
from longembed.tasks.judgment_log import LOG_FILE, JudgmentLog, read_log
from longembed.tasks.task_dir import TaskDirTask

DOCS = [f"doc{i}.txt" for i in range(40)]


def shown(docs: list[str]) -> list[dict]:
    return [{"doc_id": d, "source": d, "passage": {"text": d}} for d in docs]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    task = tmp_path / "task"
    task.mkdir()
    corpus = "".join(json.dumps({"_id": d, "title": "", "text": f"text of {d}"}) + "\n" for d in DOCS)
    (task / "corpus.jsonl").write_text(corpus)
    return task


def qrels_rows(folder: Path) -> list[list[str]]:
    return [line.split("\t") for line in (folder / "qrels" / "test.tsv").read_text().splitlines()]


def test_judgments_become_beir_files_that_load_as_a_task(folder):
    log = JudgmentLog(folder)
    first = log.ask("  who wrote doc1?  ", shown(DOCS[:3]), 10, ["bm25", "chunks"], seed=3)
    second = log.ask("what is doc5?", shown(DOCS[4:7]), 10, ["bm25", "chunks"])
    log.ask("never judged", shown(DOCS[7:9]), 10, ["bm25"])
    assert (first.query_id, second.query_id) == ("j1", "j2")
    log.judge("j1", "doc1.txt", 2)
    log.judge("j1", "doc0.txt", 0)
    log.judge("j1", "doc2.txt", 1)
    log.judge("j2", "doc5.txt", 0)
    log.judge("j2", "doc5.txt", 2)  # a changed mind: the later grade holds
    assert qrels_rows(folder) == [["query-id", "corpus-id", "score"], ["j1", "doc0.txt", "0"], ["j1", "doc1.txt", "2"],
                                  ["j1", "doc2.txt", "1"], ["j2", "doc5.txt", "2"]]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert queries == [{"_id": "j1", "text": "who wrote doc1?"}, {"_id": "j2", "text": "what is doc5?"}]
    data = TaskDirTask(folder).load()
    assert data.qrels == {"j1": {"doc0.txt": 0, "doc1.txt": 2, "doc2.txt": 1}, "j2": {"doc5.txt": 2}}
    records = [r for _, r in read_log(folder / LOG_FILE)]
    assert [r["event"] for r in records] == ["question"] * 3 + ["judgment"] * 5
    click = records[3]
    assert set(click) == {"event", "time", "query_id", "doc_id", "grade", "pool_depth", "strategies"}
    assert (click["doc_id"], click["grade"], click["pool_depth"], click["strategies"]) == ("doc1.txt", 2, 10,
                                                                                          ["bm25", "chunks"])


def test_a_session_resumes_with_the_same_pool_and_the_next_unjudged_result(folder):
    log = JudgmentLog(folder)
    log.ask("q?", shown(["doc3.txt", "doc1.txt", "doc2.txt"]), 10, ["bm25"], ranks={"doc3.txt": {"bm25": 1}})
    log.judge("j1", "doc3.txt", 1)
    again = JudgmentLog(folder).ask("q?", shown(["doc9.txt"]), 5, ["other"])  # asked again: as recorded
    assert again.query_id == "j1" and again.pool == ["doc3.txt", "doc1.txt", "doc2.txt"]
    assert again.next_unjudged() == "doc1.txt" and again.left == 2
    assert again.ranks == {"doc3.txt": {"bm25": 1}} and again.shown[0]["passage"] == {"text": "doc3.txt"}


def test_refused_clicks_write_nothing(folder):
    log = JudgmentLog(folder)
    log.ask("q?", shown(DOCS[:2]), 10, ["bm25"])
    size = (folder / LOG_FILE).stat().st_size
    for query_id, doc, grade in [("j1", "doc0.txt", 3), ("j1", "doc0.txt", True), ("j1", "doc9.txt", 1),
                                 ("j7", "doc0.txt", 1)]:
        with pytest.raises(UserError):
            log.judge(query_id, doc, grade)
    assert (folder / LOG_FILE).stat().st_size == size
    with pytest.raises(UserError):
        log.ask("bad\tid", shown(["a\tb"]), 10, ["bm25"])


def test_a_line_torn_by_a_crash_loses_that_click_only(folder):
    log = JudgmentLog(folder)
    log.ask("q?", shown(DOCS[:4]), 10, ["bm25"])
    log.judge("j1", "doc0.txt", 2)
    log.judge("j1", "doc1.txt", 0)
    torn = json.dumps({"event": "judgment", "query_id": "j1", "doc_id": "doc2.txt", "grade": 1})[:37]
    with open(folder / LOG_FILE, "a") as handle:  # the crash: half a line, no newline
        handle.write(torn)
    reopened = JudgmentLog(folder)  # a restart
    assert reopened.question("j1").grades == {"doc0.txt": 2, "doc1.txt": 0}
    reopened.judge("j1", "doc3.txt", 1)
    lines = (folder / LOG_FILE).read_text().splitlines()
    assert all(json.loads(line) for line in lines) and len(lines) == 4
    assert JudgmentLog(folder).question("j1").grades == {"doc0.txt": 2, "doc1.txt": 0, "doc3.txt": 1}


def test_a_crash_while_the_beir_files_are_rewritten_keeps_them_whole_and_the_click_in_the_log(folder, monkeypatch):
    log = JudgmentLog(folder)
    log.ask("q?", shown(DOCS[:3]), 10, ["bm25"])
    log.judge("j1", "doc0.txt", 2)
    before = (folder / "qrels" / "test.tsv").read_text()

    def crash(*_args):
        raise OSError("power lost")

    monkeypatch.setattr(judgment_log.os, "replace", crash)
    with pytest.raises(OSError, match="power lost"):
        log.judge("j1", "doc1.txt", 1)
    assert (folder / "qrels" / "test.tsv").read_text() == before  # never half a file
    monkeypatch.undo()
    JudgmentLog(folder)  # the restart rewrites the files from the log: the click is there
    assert qrels_rows(folder)[1:] == [["j1", "doc0.txt", "2"], ["j1", "doc1.txt", "1"]]


def test_concurrent_writers_lose_nothing_and_corrupt_nothing(folder):
    """Two logs on one folder (as two servers would be: each its own flock) and four threads each."""
    logs = [JudgmentLog(folder), JudgmentLog(folder)]
    logs[0].ask("q?", shown(DOCS), 10, ["bm25"])
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for doc in DOCS[n::8]:
                logs[n % 2].judge("j1", doc, n % 3)
                logs[(n + 1) % 2].ask(f"question {n}", shown(DOCS[:2]), 10, ["bm25"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    records = [json.loads(line) for line in (folder / LOG_FILE).read_text().splitlines()]
    assert len([r for r in records if r["event"] == "judgment"]) == len(DOCS)
    questions = [r for r in records if r["event"] == "question"]
    assert len(questions) == 9 and len({r["query_id"] for r in questions}) == 9  # no id given twice
    expected = {doc: DOCS.index(doc) % 8 % 3 for doc in DOCS}
    assert TaskDirTask(folder).load().qrels["j1"] == expected
