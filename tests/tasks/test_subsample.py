"""``--max-queries``' sample (longembed.tasks.subsample): at most N queries, drawn in whole groups, each
kept query ranking what it ranked in the full task (passage and blocked tasks) or all its judged documents
(plain corpora); the same N and seed give the same sample."""

from __future__ import annotations

import random

import pytest

from longembed.errors import UserError
from longembed.tasks.base import Blocks, Passage, RetrievalData
from longembed.tasks.subsample import SubsampledTask, subsample


def meetings(sizes: list[int]) -> RetrievalData:
    """Contexts m0.. with 3 passages each; meeting i has sizes[i] queries, each judging one of its passages."""
    contexts, corpus, passages, queries, qrels, query_contexts = {}, {}, {}, {}, {}, {}
    for m, n_queries in enumerate(sizes):
        parts = [f"meeting {m} part {p} " for p in range(3)]
        contexts[f"m{m}"] = "".join(parts)
        start = 0
        for p, part in enumerate(parts):
            corpus[f"m{m}-p{p}"] = part
            passages[f"m{m}-p{p}"] = Passage(f"m{m}", start, start + len(part))
            start += len(part)
        for q in range(n_queries):
            queries[f"m{m}-q{q}"] = f"question {q} of meeting {m}"
            qrels[f"m{m}-q{q}"] = {f"m{m}-p{q % 3}": 1, f"m{m}-p{(q + 1) % 3}": 0}
            query_contexts[f"m{m}-q{q}"] = f"m{m}"
    return RetrievalData(corpus, queries, qrels, contexts, passages, query_contexts).validate()


def candidates(data: RetrievalData, qid: str) -> set[str]:
    """What a query ranks: its context's passages, its block's documents, or the whole corpus (naive)."""
    if data.query_contexts is not None:
        assert data.passages is not None
        return {d for d, p in data.passages.items() if p.context == data.query_contexts[qid]}
    if data.blocks is not None:
        return {d for d, b in data.blocks.documents.items() if b == data.blocks.queries[qid]}
    return set(data.corpus)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_passage_sample_keeps_whole_meetings_and_each_query_ranks_what_it_ranked(seed: int) -> None:
    full = meetings([3, 1, 4, 2, 5, 2, 3])
    sample = subsample(full, 8, seed)
    assert 0 < len(sample.queries) <= 8
    kept_meetings = set(sample.query_contexts.values())
    assert set(sample.contexts) == kept_meetings
    for qid in sample.queries:
        assert candidates(sample, qid) == candidates(full, qid)
        assert sample.qrels[qid] == full.qrels[qid]
    # whole meetings: a kept meeting keeps every one of its queries
    assert {q for q, m in full.query_contexts.items() if m in kept_meetings} == set(sample.queries)
    # greedy in the seeded order: no meeting left out would still have fitted
    room = 8 - len(sample.queries)
    left_out = [m for m in full.contexts if m not in kept_meetings]
    assert all(sum(1 for c in full.query_contexts.values() if c == m) > room for m in left_out)


def test_same_seed_same_sample_and_seeds_differ() -> None:
    full = meetings([2] * 20)
    assert subsample(full, 10, 3).fingerprint() == subsample(meetings([2] * 20), 10, 3).fingerprint()
    assert len({subsample(full, 10, seed).fingerprint() for seed in range(5)}) > 1


def test_a_task_within_the_limit_is_kept_whole() -> None:
    full = meetings([2, 3])
    assert subsample(full, 5) is full
    assert subsample(full, 100) is full


def test_plain_corpus_keeps_a_query_only_with_all_its_judged_documents() -> None:
    rng = random.Random(0)
    corpus = {f"d{i}": f"document {i}" for i in range(40)}
    queries, qrels = {}, {}
    for q in range(30):
        judged = rng.sample(sorted(corpus), rng.choice([1, 1, 2, 3]))
        queries[f"q{q}"] = f"query {q}"
        qrels[f"q{q}"] = {d: int(k == 0) for k, d in enumerate(judged)}
    corpus.update({f"x{i}": f"distractor {i}" for i in range(5)})  # judged by no query
    full = RetrievalData(corpus, queries, qrels).validate()
    sample = subsample(full, 12, seed=2)
    assert 0 < len(sample.queries) <= 12
    for qid in sample.queries:
        assert sample.qrels[qid] == full.qrels[qid]  # every judged document is still there
        assert set(full.qrels[qid]) <= set(sample.corpus)
    assert {f"x{i}" for i in range(5)} <= set(sample.corpus)  # distractors stay
    # a document left out would have completed queries past the limit (greedy, naive recount)
    for doc in set(full.corpus) - set(sample.corpus):
        completes = {q for q, rels in full.qrels.items()
                     if q not in sample.queries and doc in rels and set(rels) <= set(sample.corpus) | {doc}}
        assert completes and len(sample.queries) + len(completes) > 12


def test_a_sample_keeps_the_answer_spans_of_its_queries() -> None:
    full = RetrievalData({f"d{i}": f"text {i}" for i in range(30)}, {f"q{i}": f"q {i}" for i in range(30)},
                         {f"q{i}": {f"d{i}": 1} for i in range(30)},
                         answers={f"q{i}": {f"d{i}": [(0, 4)]} for i in range(30)}).validate()
    sample = subsample(full, 10, seed=1)
    assert sample.answers == {q: {f"d{q[1:]}": [(0, 4)]} for q in sample.queries} and len(sample.answers) == 10


def test_one_document_per_query_shrinks_the_corpus_in_proportion() -> None:
    """HotpotQA's shape: each query has its own document; 300 -> 100 queries keeps 100 documents."""
    full = RetrievalData({f"d{i}": f"text {i}" for i in range(300)}, {f"q{i}": f"q {i}" for i in range(300)},
                         {f"q{i}": {f"d{i}": 1} for i in range(300)}).validate()
    sample = subsample(full, 100)
    assert len(sample.queries) == 100 and len(sample.corpus) == 100
    assert {f"d{q[1:]}" for q in sample.queries} == set(sample.corpus)


def test_blocks_are_kept_whole() -> None:
    corpus = {f"b{b}-d{i}": f"block {b} doc {i}" for b in range(4) for i in range(4)}
    queries = {f"b{b}-q{i}": f"block {b} query {i}" for b in range(4) for i in range(2)}
    qrels = {f"b{b}-q{i}": {f"b{b}-d{i}": 1} for b in range(4) for i in range(2)}
    blocks = Blocks({q: int(q[1]) for q in queries}, {d: int(d[1]) for d in corpus})
    full = RetrievalData(corpus, queries, qrels, blocks=blocks).validate()
    sample = subsample(full, 5, seed=1)
    assert len(sample.queries) == 4 and sample.blocks.count() == 2
    for qid in sample.queries:
        assert candidates(sample, qid) == candidates(full, qid)


def test_refusals() -> None:
    with pytest.raises(UserError, match="at least 1"):
        subsample(meetings([2, 2]), 0)
    with pytest.raises(UserError, match="smallest has 3 queries"):
        subsample(meetings([3, 4]), 2)


class _Task:
    def __init__(self, data: RetrievalData):
        self.data, self.record = data, "the wrapped task's record"
        self.metadata = type("M", (), {"name": "meetings"})()

    def load(self, data_dir, length=None) -> RetrievalData:
        return self.data


def test_the_task_wrapper_samples_every_load_and_passes_attributes_through() -> None:
    task = SubsampledTask(_Task(meetings([2, 2, 2, 2])), 4, seed=0)
    assert task.metadata.name == "meetings" and task.record == "the wrapped task's record"
    assert len(task.load(None).queries) == 4
