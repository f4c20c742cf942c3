"""The judging page's Advise routes (longembed.judging.advising) over fake strategies and a fake ``advise``
that waits for the test: judging goes on while it runs, it reads a snapshot of the judgments taken when it
started (and writes nothing into the task), the page gets the recommendation, the strategy table with
judged@10 and the warning, then the offer to pool the mostly unjudged strategy, which adds exactly the
results counted."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from longembed.errors import UserError
from longembed.judging.advising import ADVICE_FOLDER, AdviceJob, AdviceSettings
from longembed.judging.app import create_judging_app
from longembed.judging.session import JudgingSession
from longembed.results import Interval, StrategyCost, StrategyResult
from longembed.results.advice import Advice, AdviceEstimate, Recommendation, VersusBest
from longembed.tasks.judgment_log import QRELS_FILE, JudgmentLog

DOCS = [f"d{i}.txt" for i in range(12)]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        qrels.setdefault(query, {})[doc] = int(grade)
    return qrels


def searcher(order: list[str]):
    def search(question: str, k: int) -> list[dict]:
        return [{"rank": i, "id": d, "source": d, "passage": {"text": d}} for i, d in enumerate(order[:k], 1)]
    return search


def fake_advice(judged: dict[str, float | None]) -> Advice:
    cost = StrategyCost(0.1, 1.0, 8, 1000, 1.0, "x")
    strategies = []
    for i, (name, share) in enumerate(judged.items()):
        versus = None if i == 0 else VersusBest(Interval(-3.0, -9.0, 2.0), "task", 0.3, "exact", 0.3, False,
                                                 Interval(-3.0, -10.0, 3.0), "undecided", 3)
        strategies.append(StrategyResult(name, f"{name} described", "dense", f"runs/{name}", 70.0 - 3 * i,
                                         Interval(70.0 - 3 * i, 60.0 - 3 * i, 80.0 - 3 * i), cost,
                                         versus_best=versus, judged_at_10=share))
    first = strategies[0].name
    return Advice("m", "ape", "mean", 512, 512, ["task"], strategies,
                  Recommendation(first, first, 2.0, [], [], "cost", f"**{first}** scores best"),
                  AdviceEstimate([], 0.0, 0.0, None, ""), 1.0, margin=2.0)


class WaitingAdvise:
    """advise's stand-in: records what it read, then waits until the test lets it finish."""

    def __init__(self, advice: Advice | Exception) -> None:
        self.advice, self.release, self.calls, self.read_qrels = advice, threading.Event(), [], {}

    def __call__(self, model: str, **options) -> Advice:
        self.calls.append((model, options))
        (task,) = options["task_dirs"]
        self.read_qrels = read_qrels(Path(task) / QRELS_FILE)
        options["log"]("[1/2] bm25: BM25 (lexical; no model)")
        assert self.release.wait(30)
        if isinstance(self.advice, Exception):
            raise self.advice
        return self.advice


@pytest.fixture
def judged(tmp_path: Path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": d}) + "\n" for d in DOCS))
    session = JudgingSession(JudgmentLog(folder), {"a": searcher(DOCS), "b": searcher(DOCS[::-1])}, depth=2)
    return session, folder


def client_for(session: JudgingSession, advise, searchers_for=None) -> TestClient:
    job = AdviceJob(session, AdviceSettings("m", "my docs"), searchers_for, advise)
    return TestClient(create_judging_app(session, job))


def judge_all(client: TestClient, text: str) -> int:
    question = client.post("/judge/questions", json={"text": text}).json()["question"]
    for i, result in enumerate(question["results"]):
        answer = client.post("/judge/judgments", json={"query_id": question["query_id"], "doc_id": result["doc_id"],
                                                       "grade": 2 if i == 0 else 0})
        assert answer.status_code == 200
    return len(question["results"])


def wait_for(client: TestClient, done) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = client.get("/judge/advice").json()
        if done(state):
            return state
        time.sleep(0.02)
    pytest.fail(f"the advice did not get there: {state}")


def test_advise_runs_beside_judging_on_a_snapshot_then_offers_the_unjudged_strategy(judged) -> None:
    session, folder = judged
    fake = WaitingAdvise(fake_advice({"a": 90.0, "b": 80.0, "late": 20.0, "a+tuned": None}))
    offered: list[list[str]] = []

    def searchers_for(names, say):
        offered.append(list(names))
        return {"late": searcher(DOCS[4:])}

    client = client_for(session, fake, searchers_for)
    before = judge_all(client, "first?")
    assert client.post("/judge/advice").json()["state"] == "running"
    wait_for(client, lambda s: s["lines"][-1:] == ["[1/2] bm25: BM25 (lexical; no model)"])
    assert client.post("/judge/advice").json()["state"] == "running"  # one advice at a time
    during = judge_all(client, "second?")  # judging is not blocked while advise runs
    fake.release.set()
    state = wait_for(client, lambda s: s["state"] == "done" and not (s["advice"]["pool_back"] or {}).get("pending"))

    assert len(fake.calls) == 1
    model, options = fake.calls[0]
    assert model == "m" and options["output_dir"] == folder / ADVICE_FOLDER and options["task_names"] == ["task"]
    assert sum(len(d) for d in fake.read_qrels.values()) == before  # the snapshot: the judgments when it started
    assert sum(len(d) for d in read_qrels(folder / QRELS_FILE).values()) == before + during  # none lost
    assert (state["judgments"], state["judged_since"]) == (before, during)
    advice = state["advice"]
    assert advice["choice"] == "a" and advice["reason"] == "a scores best"
    assert [(r["name"], r["judged_at_10"], r["low"], r["pooled"]) for r in advice["strategies"]] == [
        ("a", 90.0, False, True), ("b", 80.0, False, True), ("late", 20.0, True, False), ("a+tuned", None, False, False)]
    assert (advice["strategies"][2]["low_bound"], advice["strategies"][2]["verdict"]) == (54.0, "undecided")
    assert "late" in advice["warning"] and "biased low" in advice["warning"]
    assert "'my docs'" in advice["commands"]["index"] and "--from-advice" in advice["commands"]["index"]
    assert str(folder / ADVICE_FOLDER / "advice.json") in advice["commands"]["index"]
    assert advice["commands"]["search"].startswith("longembed search --index")

    # the offer: late's top 10 and, the pool going from 2 to 10 deep, a's and b's, outside each question's
    # pool, counted, then pooled
    assert offered == [["late"]]
    offer = advice["pool_back"]
    pools = {q.text: set(q.pool) for q in session.log.questions()}
    expected = sum(len(set(DOCS[4:14] + DOCS[:10] + DOCS[::-1][:10]) - pool) for pool in pools.values())
    assert offer == {"strategies": ["late"], "depth": 10, "results": expected} and expected > 0
    left = client.get("/judge/progress").json()["results_left"]
    pooled = client.post("/judge/pool").json()
    assert (pooled["questions"], pooled["added"]) == (2, expected)
    assert pooled["progress"]["results_left"] == left + expected
    assert session.depth == 10 and "late" in session.strategies
    assert client.get("/judge/advice").json()["advice"]["pool_back"] is None
    assert client.post("/judge/pool").status_code == 400  # offered once


def test_a_failed_advice_is_said_and_the_judgments_stay(judged) -> None:
    session, folder = judged
    fake = WaitingAdvise(UserError("every query was left out: judge at least one result relevant"))
    client = client_for(session, fake)
    made = judge_all(client, "only?")
    client.post("/judge/advice")
    fake.release.set()
    state = wait_for(client, lambda s: s["state"] != "running")
    assert state["state"] == "failed" and state["error"].startswith("every query was left out")
    assert sum(len(d) for d in read_qrels(folder / QRELS_FILE).values()) == made
    assert client.post("/judge/judgments", json={"query_id": "j1", "doc_id": session.log.questions()[0].pool[0],
                                                 "grade": 1}).status_code == 200


def test_without_an_advice_job_the_routes_say_so(judged) -> None:
    session, _folder = judged
    client = TestClient(create_judging_app(session))
    answer = client.post("/judge/advice")
    assert answer.status_code == 400 and "does not advise" in answer.json()["error"]["message"]


def test_advise_again_reruns_only_when_the_judgments_changed(judged) -> None:
    session, _folder = judged
    fake = WaitingAdvise(fake_advice({"a": 90.0, "b": 80.0}))
    fake.release.set()
    client = client_for(session, fake)
    judge_all(client, "once?")
    client.post("/judge/advice")
    wait_for(client, lambda s: s["state"] == "done")
    assert client.post("/judge/advice").json()["state"] == "done" and len(fake.calls) == 1  # shown again
    first = session.log.questions()[0]
    client.post("/judge/judgments", json={"query_id": first.query_id, "doc_id": first.pool[0], "grade": 1})
    assert client.post("/judge/advice").json()["state"] == "running"  # a changed mind: advised anew
    wait_for(client, lambda s: s["state"] == "done")
    assert len(fake.calls) == 2
