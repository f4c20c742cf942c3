"""A seeded sample of a task's queries, with the documents they rank: ``longembed eval --max-queries N``.

Long-document runs cost what their corpus costs to encode (QMSum passages: 2.6M tokens, one late-chunked
model about an hour on two CPU cores), so a comparison of several models on a small machine needs a smaller
problem that is still the same *kind* of problem.  The sample is drawn in whole groups, so that every kept
query still ranks what it ranked in the full task:

- **passage tasks** (``query_contexts``, e.g. ``qmsum_passages``): a group is a context (a meeting) with its
  passages and the queries that search it.  A kept query ranks exactly the passages it ranked before.
- **blocked tasks** (``blocks``, passkey/needle ``--candidates blocks``): a group is a block, likewise.
- **plain corpora** (SQuALITY, HotpotQA, a task folder): a group is a document; a query is kept once all its
  judged documents are kept, and the corpus is the documents kept.  Documents no query judges complete
  nothing and always stay (they are every query's distractors), so only judged documents are dropped: a
  kept query ranks fewer candidates than in the full task and its scores rise.  Compare sampled runs with
  sampled runs of the same N and seed (``longembed compare`` refuses other pairs: the data fingerprints
  differ).

Groups are taken in the order of a shuffle seeded by ``seed``, skipping a group that would take the count
past N, until no group fits; so the sample holds at most N queries, and the same N and seed give the same
sample on every machine.  A task with at most N queries is kept whole.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from longembed.errors import UserError
from longembed.tasks.base import Blocks, RetrievalData, Task, TaskMetadata, restricted_answers


def subsample(data: RetrievalData, max_queries: int, seed: int = 0) -> RetrievalData:
    """At most ``max_queries`` of ``data``'s queries, drawn in whole groups (contexts, blocks or documents:
    see the module's docstring), with the documents they rank.  Returns ``data`` itself when it has no more
    queries than that.

    Raises:
        UserError: ``max_queries`` is below 1, or no group is small enough to fit in it.
    """
    if max_queries < 1:
        raise UserError(f"max_queries must be at least 1, not {max_queries}")
    if len(data.queries) <= max_queries:
        return data
    if data.query_contexts is not None:
        return _sample_contexts(data, max_queries, seed)
    if data.blocks is not None:
        return _sample_blocks(data, max_queries, seed)
    return _sample_documents(data, max_queries, seed)


def _shuffled(keys: list[str] | list[int], seed: int) -> list:
    order = sorted(keys)
    random.Random(f"longembed-subsample:{seed}").shuffle(order)
    return order


def _take_groups(groups: dict, max_queries: int, seed: int) -> list:
    """The groups (group -> its queries) taken in seeded order while the count of queries fits."""
    taken, count = [], 0
    for key in _shuffled(list(groups), seed):
        size = len(groups[key])
        if size and count + size <= max_queries:
            taken.append(key)
            count += size
    if not taken:
        smallest = min(len(q) for q in groups.values() if q)
        raise UserError(f"max_queries={max_queries} holds no whole group: the smallest has {smallest} queries")
    return taken


def _restricted(data: RetrievalData, queries: set[str], documents: set[str]) -> RetrievalData:
    """``data`` with only these queries and documents (qrels, passages and groups cut to match)."""
    return replace(
        data,
        corpus={d: t for d, t in data.corpus.items() if d in documents},
        queries={q: t for q, t in data.queries.items() if q in queries},
        qrels={q: {d: r for d, r in rels.items() if d in documents} for q, rels in data.qrels.items() if q in queries},
        passages=None if data.passages is None else {d: p for d, p in data.passages.items() if d in documents},
        answers=restricted_answers(data.answers, queries, documents),
    )


def _sample_contexts(data: RetrievalData, max_queries: int, seed: int) -> RetrievalData:
    assert data.query_contexts is not None and data.passages is not None and data.contexts is not None
    groups: dict[str, list[str]] = {c: [] for c in data.contexts}
    for qid, context in data.query_contexts.items():
        groups[context].append(qid)
    kept = set(_take_groups(groups, max_queries, seed))
    queries = {q for c in kept for q in groups[c]}
    documents = {d for d, p in data.passages.items() if p.context in kept}
    out = _restricted(data, queries, documents)
    out.contexts = {c: t for c, t in data.contexts.items() if c in kept}
    out.query_contexts = {q: c for q, c in data.query_contexts.items() if q in queries}
    return out.validate()


def _sample_blocks(data: RetrievalData, max_queries: int, seed: int) -> RetrievalData:
    assert data.blocks is not None
    groups: dict[int, list[str]] = {}
    for qid, block in data.blocks.queries.items():
        groups.setdefault(block, []).append(qid)
    kept = set(_take_groups(groups, max_queries, seed))
    queries = {q for b in kept for q in groups[b]}
    documents = {d for d, b in data.blocks.documents.items() if b in kept}
    out = _restricted(data, queries, documents)
    out.blocks = Blocks({q: b for q, b in data.blocks.queries.items() if q in queries},
                        {d: b for d, b in data.blocks.documents.items() if b in kept})
    return out.validate()


def _sample_documents(data: RetrievalData, max_queries: int, seed: int) -> RetrievalData:
    """Documents in seeded order; a document joins when the queries it completes (all their judged
    documents kept) still fit, and a query is kept when complete."""
    judged = {q: set(rels) for q, rels in data.qrels.items()}
    by_document: dict[str, set[str]] = {}
    for qid, docs in judged.items():
        for doc in docs:
            by_document.setdefault(doc, set()).add(qid)
    documents: set[str] = set()
    queries: set[str] = set()
    for doc in _shuffled(list(data.corpus), seed):
        completed = {q for q in by_document.get(doc, ()) if q not in queries and judged[q] <= documents | {doc}}
        if len(queries) + len(completed) > max_queries:
            continue
        documents.add(doc)
        queries |= completed
    if not queries:
        raise UserError(f"max_queries={max_queries} completes no query: each needs all its judged documents")
    return _restricted(data, queries, documents).validate()


@dataclass
class SubsampledTask:
    """A task whose every load is :func:`subsample`-d: the same name and metadata, so runs of the same N and
    seed pair up in ``longembed compare``.  Other attributes (a task folder's ``record``, a generated task's
    options) are the wrapped task's."""

    task: Task
    max_queries: int
    seed: int = 0

    @property
    def metadata(self) -> TaskMetadata:
        return self.task.metadata

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        return subsample(self.task.load(data_dir, length), self.max_queries, self.seed)

    def __getattr__(self, name: str):
        if name == "task":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.task, name)
