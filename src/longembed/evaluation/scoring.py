"""Scoring a benchmark run: retrieval problems ("units") -> metrics -> task scores -> the average.

A unit is one task at one length (passkey, needle) or a whole real task.  Queries and documents are
encoded (through the cache) or scored by BM25, ranked by cosine similarity, and evaluated with
:func:`~longembed.evaluation.metrics.evaluate_scores`; every number is a percentage.  A task's score
is its main metric, for synthetic tasks the mean over the evaluated lengths (LongEmbed section 3.2);
the run's average is the unweighted mean of its task scores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from longembed.evaluation.bm25 import BM25Model
from longembed.evaluation.cached_encoder import CachedEncoder
from longembed.evaluation.metrics import evaluate_scores
from longembed.results import CacheUse, Counts, TaskResult, UnitResult
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, RetrievalData, Task, TaskDataMissing
from longembed.tasks.base import WORDS_PER_TOKEN


@dataclass
class Unit:
    """One retrieval problem: a task at one length (passkey/needle) or a whole real task."""

    task: str
    length: int | None
    data: RetrievalData
    load_seconds: float

    @property
    def label(self) -> str:
        return self.task if self.length is None else f"{self.task}/{self.length}"

    def shard(self, side: str) -> str:
        """The cache shard of one side ("documents" or "queries"), e.g. "passkey/4096/documents"."""
        return f"{self.task}/{'all' if self.length is None else self.length}/{side}"


@dataclass
class Side:
    """How one side of every unit is encoded: its prompt and TempScale tau."""

    name: str  # "queries" or "documents"
    prompt: str
    temperature: float


def load_units(
    tasks: Sequence[Task], data_dir: Path | None, lengths: Sequence[int], log: Callable[[str], None]
) -> tuple[list[Unit], dict[str, str]]:
    """Load every task/length; a task with missing data is skipped (name -> message)."""
    units: list[Unit] = []
    skipped: dict[str, str] = {}
    for task in tasks:
        meta = task.metadata
        task_lengths: list[int | None] = (
            [n for n in lengths if n in meta.lengths] if meta.lengths is not None else [None]
        )
        if not task_lengths:
            skipped[meta.name] = f"none of the requested lengths {list(lengths)} is a length of this task"
            log(f"skipped {meta.name}: {skipped[meta.name]}")
            continue
        loaded: list[Unit] = []
        try:
            for length in task_lengths:
                began = time.perf_counter()
                data = task.load(data_dir, length)
                loaded.append(Unit(meta.name, length, data, time.perf_counter() - began))
        except TaskDataMissing as exc:
            skipped[meta.name] = str(exc)
            log(f"skipped {meta.name}: {exc}")
            continue
        units.extend(loaded)
    return units, skipped


def _percent(metrics: dict[str, float]) -> dict[str, float]:
    return {name: round(100.0 * value, 4) for name, value in metrics.items()}


def score_unit(
    unit: Unit,
    model: CachedEncoder | BM25Model,
    sides: dict[str, Side],
    max_length: int | None,
    main_score: str,
) -> UnitResult:
    """Encode (or BM25-score) one unit and evaluate it; metrics in percent."""
    began = time.perf_counter()
    data = unit.data
    doc_ids, doc_texts = list(data.corpus), list(data.corpus.values())
    query_ids, query_texts = list(data.queries), list(data.queries.values())
    cache: CacheUse | None = None
    if isinstance(model, BM25Model):
        scores = model.score(query_texts, doc_texts)
        doc_tokens = np.asarray([round(len(t.split()) / WORDS_PER_TOKEN) for t in doc_texts])
        encode_seconds = 0.0
    else:
        encoded = {}
        for name, texts in (("documents", doc_texts), ("queries", query_texts)):
            side = sides[name]
            encoded[name] = model.encode(
                texts, shard=unit.shard(name), prompt=side.prompt, temperature=side.temperature,
                desc=f"{unit.label} {name}",
            )
        documents, queries = encoded["documents"], encoded["queries"]
        scores = queries.vectors @ documents.vectors.T
        doc_tokens = documents.tokens
        encode_seconds = documents.encode_seconds + queries.encode_seconds
        cache = CacheUse(documents.n_cached, documents.n_encoded, queries.n_cached, queries.n_encoded)
    metrics = _percent(evaluate_scores(scores, query_ids, doc_ids, data.qrels))
    counts = Counts(
        documents=len(doc_ids),
        queries=len(query_ids),
        document_tokens_mean=round(float(np.mean(doc_tokens)), 1),
        document_tokens_max=int(np.max(doc_tokens)),
        tokens_counted="words / 0.75" if isinstance(model, BM25Model) or model.tokenizer is None else "tokenizer",
        documents_truncated=None if max_length is None else int(np.sum(doc_tokens > max_length)),
    )
    return UnitResult(
        score=metrics[main_score],
        metrics=metrics,
        counts=counts,
        cache=cache,
        encode_time_s=round(encode_seconds, 3),
        wall_time_s=round(time.perf_counter() - began + unit.load_seconds, 3),
    )


def task_result(task: Task, unit_results: list[tuple[Unit, UnitResult]]) -> TaskResult:
    """Aggregate the units of one task: for synthetic tasks every metric is the mean over lengths."""
    meta = task.metadata
    if meta.lengths is None:
        ((_, result),) = unit_results
        return TaskResult(
            main_score=meta.main_score, score=result.score, metrics=result.metrics, counts=result.counts,
            cache=result.cache, encode_time_s=result.encode_time_s, wall_time_s=result.wall_time_s,
            stand_in_for=meta.stand_in_for,
        )
    results = [r for _, r in unit_results]
    names = list(results[0].metrics)
    metrics = {n: round(float(np.mean([r.metrics[n] for r in results])), 4) for n in names}
    caches = [r.cache for r in results if r.cache is not None]
    return TaskResult(
        main_score=meta.main_score,
        score=metrics[meta.main_score],
        metrics=metrics,
        counts=Counts.total([r.counts for r in results]),
        cache=sum(caches[1:], caches[0]) if caches else None,
        encode_time_s=round(sum(r.encode_time_s for r in results), 3),
        wall_time_s=round(sum(r.wall_time_s for r in results), 3),
        stand_in_for=meta.stand_in_for,
        by_length={u.length: r.score for u, r in unit_results if u.length is not None},
        lengths={u.length: r for u, r in unit_results if u.length is not None},
    )


def average(tasks: dict[str, TaskResult], lengths: Sequence[int]) -> tuple[float | None, list[str], str]:
    """(unweighted mean of the task scores, the tasks it covers, a note saying what it covers)."""
    names = list(tasks)
    if not names:
        return None, [], "no task ran"
    value = round(float(np.mean([tasks[n].score for n in names])), 4)
    notes = [f"unweighted mean of {len(names)} task score(s): {', '.join(names)}"]
    missing = [t for t in DEFAULT_TASKS if t not in tasks]
    if missing:
        notes.append(f"not included: {', '.join(missing)}")
    if any(tasks[n].by_length is not None for n in names) and list(lengths) != list(SYNTHETIC_LENGTHS):
        notes.append(f"passkey/needle over lengths {', '.join(map(str, lengths))} only")
    return value, names, "; ".join(notes)


def task_summary(name: str, task: TaskResult) -> str:
    """One progress line: "passkey: accuracy@1 = 53.20 (12.3 s)"."""
    return f"{name}: {task.main_score} = {task.score:.2f} ({task.wall_time_s:.1f} s)"

