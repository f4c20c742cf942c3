"""Passage hit@1 against a naive reference on a toy run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import words

from longembed import load_encoder
from longembed.evaluation.passage_hits import passage_hit_interval, passage_hits, run_passage_hit
from longembed.evaluation.runner import evaluate_model
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, TaskMetadata


def naive_hit_rate(answers, ranking, shown) -> tuple[int, int]:
    hits = counted = 0
    for qid in answers:
        for doc_id in ranking[qid][:10]:
            if doc_id in answers[qid]:
                start, end = shown[(qid, doc_id)]
                counted += 1
                hits += any(max(start, a) < min(end, b) for a, b in answers[qid][doc_id])
                break
    return hits, counted


def test_hit_at_1_matches_a_naive_count() -> None:
    answers = {"q1": {"a": [(10, 20)]}, "q2": {"b": [(0, 5), (50, 60)]}, "q3": {"c": [(0, 5)]},
               "q4": {"a": [(30, 40)], "b": [(0, 3)]}}
    ranking = {"q1": ["x", "a"], "q2": ["b"], "q3": ["x"] * 10 + ["c"], "q4": ["b", "a"]}
    shown = {("q1", "a"): (15, 25), ("q2", "b"): (20, 50), ("q3", "c"): (0, 5), ("q4", "b"): (0, 3),
             ("q4", "a"): (30, 40)}
    hits = passage_hits(answers, ranking, lambda q, d: shown[(q, d)])
    assert hits == {"q1": 100.0, "q2": 0.0, "q4": 100.0}  # q3's answer is ranked 11th: not counted
    expected_hits, counted = naive_hit_rate(answers, ranking, shown)
    interval = passage_hit_interval(hits)
    assert interval.estimate == pytest.approx(100.0 * expected_hits / counted)
    assert interval.low <= interval.estimate <= interval.high
    assert passage_hit_interval({}) is None


class AnsweredTask:
    """Four documents of 40 sentences; each query's answer is one sentence the task locates."""

    metadata = TaskMetadata(name="answered", description="", main_score="ndcg@10", lengths=None, source="tests")

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        corpus, queries, qrels, answers = {}, {}, {}, {}
        for i, topic in enumerate(["valve pressure", "apple harvest", "winter snow", "river boat"]):
            sentences = [f"{words(10, seed=50 * i + k)}." for k in range(40)]
            answer = f"The {topic} answer sits in sentence {i}."
            sentences[10 + 5 * i] = answer
            corpus[f"d{i}"] = " ".join(sentences)
            queries[f"q{i}"] = f"{topic} answer"
            qrels[f"q{i}"] = {f"d{i}": 1}
            start = corpus[f"d{i}"].index(answer)
            answers[f"q{i}"] = {f"d{i}": [(start, start + len(answer))]}
        return RetrievalData(corpus, queries, qrels, answers=answers).validate()


def test_eval_reports_passage_hit_at_1_beside_ndcg_with_its_interval(tmp_path: Path) -> None:
    run = evaluate_model(BM25Model(), tasks=[AnsweredTask()], output_dir=tmp_path / "r", estimate=False,
                         show_progress=False, log=None)
    written = json.loads((tmp_path / "r" / "results.json").read_text())["tasks"]["answered"]
    assert written["metrics"]["passage_hit@1"] == 100.0 and "ndcg@10" in written["metrics"]
    assert written["secondary_per_query"]["passage_hit@1"] == {f"q{i}": 100.0 for i in range(4)}
    assert written["secondary_intervals"]["passage_hit@1"]["estimate"] == 100.0
    assert run.tasks["answered"].metrics["passage_hit@1"] == 100.0
    pooled = run_passage_hit(run)  # what advise shows beside the score
    assert pooled is not None and pooled.estimate == 100.0


@pytest.mark.slow
def test_a_chunked_dense_run_reports_the_passage_search_would_show(tiny_models, tmp_path: Path) -> None:
    encoder = load_encoder(tiny_models["bert"], method="pi", max_length=128)
    run = evaluate_model(encoder, tasks=[AnsweredTask()], output_dir=tmp_path / "r", cache_dir=tmp_path / "c",
                         estimate=False, show_progress=False, log=None, granularity="chunks", chunking="tokens:32",
                         late=False)
    hits = run.tasks["answered"].secondary_per_query["passage_hit@1"]
    data = AnsweredTask().load(None)
    ranking = run.tasks["answered"].first_ranked
    assert set(hits) <= set(data.queries) and set(v for v in hits.values()) <= {0.0, 100.0}
    assert run.tasks["answered"].metrics["passage_hit@1"] == pytest.approx(np.mean(list(hits.values())))
    assert ranking is not None
