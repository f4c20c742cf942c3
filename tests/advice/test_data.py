"""The data of an advice and its budget sample: every sampled query keeps its relevant documents,
distractors are drawn to the target, passkey and needle lose queries per length, and a sampled task
folder's run says what was left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from longembed.advice.data import AdviceData, PreparedTask, load_data, sample_data, synthetic_lengths
from longembed.advice.spec import AdviseSpec
from longembed.results.advice import SampledTask
from longembed.tasks import RetrievalData, write_task_dir
from longembed.tasks.base import Passage, TaskMetadata
from longembed.tasks.task_dir import TaskDirRecord


def retrieval(n_queries: int = 20, n_documents: int = 40) -> RetrievalData:
    """Query i is about documents 2i and 2i + 1 (relevant) and has a score-0 judgement of document 2i + 2."""
    corpus = {f"d{j:02d}": f"document {j}" for j in range(n_documents)}
    queries = {f"q{i:02d}": f"query {i}" for i in range(n_queries)}
    qrels = {f"q{i:02d}": {f"d{2 * i:02d}": 1, f"d{2 * i + 1:02d}": 2, f"d{(2 * i + 2) % n_documents:02d}": 0}
             for i in range(n_queries)}
    return RetrievalData(corpus, queries, qrels).validate()


def relevant(data: RetrievalData, qid: str) -> set[str]:
    return {d for d, score in data.qrels[qid].items() if score > 0}


def test_a_sample_keeps_each_sampled_querys_relevant_documents_and_draws_distractors() -> None:
    data = retrieval()
    sample = sample_data(data, n_queries=5, n_documents=14, seed=3)
    assert len(sample.corpus) == 14
    for qid in sample.queries:
        assert relevant(data, qid) <= set(sample.corpus)  # every relevant document is kept
        assert sample.qrels[qid] == {d: s for d, s in data.qrels[qid].items() if d in sample.corpus}
    answered = [q for q in data.queries if relevant(data, q) <= set(sample.corpus)]
    assert list(sample.queries) == answered  # the 5 drawn, and every query the sample answers rides along
    assert len(sample.queries) >= 5
    distractors = set(sample.corpus) - {d for q in sample.queries for d in relevant(data, q)}
    assert len(distractors) == 14 - 2 * len(sample.queries)
    assert list(sample.corpus) == [d for d in data.corpus if d in sample.corpus]  # original order
    assert sample_data(data, 5, 14, seed=3) == sample  # seeded
    assert sample_data(data, 5, 14, seed=4).queries != sample.queries


def test_a_sample_keeps_the_answers_of_its_queries_so_advise_reports_passage_hit() -> None:
    data = retrieval()
    data.answers = {q: {d: [(0, 8)] for d in relevant(data, q)} for q in data.queries}
    sample = sample_data(data.validate(), n_queries=5, n_documents=14, seed=3)
    assert sample.answers == {q: data.answers[q] for q in sample.queries}


def test_queries_that_share_the_sampled_documents_ride_along() -> None:
    """QMSum's shape: several queries per document; a sample of 3 documents keeps all their queries."""
    corpus = {f"m{j}": f"meeting {j}" for j in range(10)}
    queries = {f"q{j}-{k}": f"question {k} on meeting {j}" for j in range(10) for k in range(4)}
    qrels = {q: {q.split("-")[0].replace("q", "m"): 1} for q in queries}
    data = RetrievalData(corpus, queries, qrels).validate()
    sample = sample_data(data, n_queries=3, n_documents=3, seed=0)
    assert len(sample.corpus) == 3 and len(sample.queries) == 12
    assert {q.split("-")[0].replace("q", "m") for q in sample.queries} == set(sample.corpus)


def test_queries_whose_documents_do_not_fit_are_passed_over_after_the_minimum() -> None:
    sample = sample_data(retrieval(), n_queries=5, n_documents=4, seed=0)
    assert len(sample.queries) == 2 and len(sample.corpus) == 4  # two queries of two documents each fill it
    assert len(sample_data(retrieval(), n_queries=5, n_documents=1, seed=0).queries) == 1  # the first is kept
    kept = sample_data(retrieval(), n_queries=5, n_documents=4, seed=0, minimum=3)
    assert len(kept.queries) == 3 and len(kept.corpus) == 6  # the minimum's documents, beyond the target


def test_a_passage_task_keeps_its_contexts_consistent() -> None:
    contexts = {"m1": "alpha beta gamma delta", "m2": "epsilon zeta eta theta"}
    spans = {"p1": ("m1", 0, 10), "p2": ("m1", 11, 22), "p3": ("m2", 0, 12), "p4": ("m2", 13, 22)}
    data = RetrievalData(
        corpus={p: contexts[c][a:b] for p, (c, a, b) in spans.items()},
        queries={"q1": "beta", "q2": "zeta"}, qrels={"q1": {"p1": 1}, "q2": {"p3": 1}}, contexts=contexts,
        passages={p: Passage(*where) for p, where in spans.items()}, query_contexts={"q1": "m1", "q2": "m2"},
    ).validate()
    sample = sample_data(data, n_queries=1, n_documents=2, seed=0)
    assert set(sample.queries) == {"q1", "q2"} and set(sample.passages) == set(sample.corpus)  # q2 rides along
    assert set(sample.query_contexts) == set(sample.queries)


def prepared(name: str = "mine", record: TaskDirRecord | None = None) -> PreparedTask:
    meta = TaskMetadata(name=name, description="", main_score="ndcg@10", lengths=None, source="")
    return PreparedTask(meta, retrieval(), record)


def test_selection_samples_every_task_and_records_it() -> None:
    record = TaskDirRecord(path="/x", qrels="qrels/test.tsv", documents=40, queries=20, queries_left_out=1,
                           left_out_by_reason={"unjudged": 1})
    data = AdviceData([prepared(record=record)], ["passkey"], [256], 50)
    full = data.selection()
    assert full.tasks[0] == "passkey" and full.tasks[1].data is data.real[0].data and full.sampled == []
    half = data.selection(0.25, seed=1)
    assert half.queries_per_length == 12  # floor(50 x 0.25)
    task = half.tasks[1]
    assert len(task.data.queries) == 10  # never fewer than 10 queries
    assert half.sampled == [SampledTask("passkey", 12, 50, per_length=True),
                            SampledTask("mine", 10, 20, len(task.data.corpus), 40)]
    assert len(task.data.corpus) == 20  # every relevant document of the 10 queries (2 each), beyond the target 10
    assert task.record.queries == 10 and task.record.documents == 20
    assert task.record.left_out_by_reason == {"unjudged": 1, "sampled": 10} and task.record.queries_left_out == 11
    assert "sampled out to fit longembed advise's --budget-seconds" in task.record.describe("mine")
    assert data.selection(0.0).queries_per_length == 10


def test_loading_checks_the_data_before_any_model_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="advise needs your data"):
        AdviseSpec(output_dir=tmp_path)
    with pytest.raises(ValueError, match="needs an output folder"):
        AdviseSpec(tasks=["passkey"])
    with pytest.raises(ValueError, match="--budget-seconds must be positive"):
        AdviseSpec(tasks=["passkey"], output_dir=tmp_path, budget_seconds=0)
    haystack = tmp_path / "docs"
    haystack.mkdir()
    (haystack / "a.txt").write_text(" ".join(["word"] * 800))  # fills 256, 512 and 1024 tokens (768 words)
    with pytest.raises(ValueError, match="--tasks lists neither"):
        load_data(AdviseSpec(haystack=haystack, tasks=["qmsum"], output_dir=tmp_path), 4096, print)
    spec = AdviseSpec(haystack=haystack, output_dir=tmp_path)
    assert synthetic_lengths(spec, 4096) == [256, 512, 1024]  # what the haystack fills
    assert synthetic_lengths(spec, 512) == [256, 512]  # what the strategies read
    loaded = load_data(spec, 512, print)
    assert (loaded.synthetic, loaded.lengths, loaded.real) == (["passkey", "needle"], [256, 512], [])
    said: list[str] = []
    with pytest.raises(ValueError, match="no task could be read"):
        load_data(AdviseSpec(tasks=["qmsum", "needle"], output_dir=tmp_path), 512, said.append)  # no --data-dir
    assert said[0].startswith("skipped qmsum") and said[1].startswith("skipped needle")
    without_needle = load_data(AdviseSpec(tasks=["passkey", "needle"], output_dir=tmp_path), 512, said.append)
    assert without_needle.synthetic == ["passkey"] and "needle" in without_needle.skipped
    folder = write_task_dir(retrieval(), tmp_path / "mine")
    with pytest.raises(ValueError, match="apply to passkey and needle, and neither runs"):
        load_data(AdviseSpec(task_dirs=[folder], lengths=[256], output_dir=tmp_path), 512, said.append)
