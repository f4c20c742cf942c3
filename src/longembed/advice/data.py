"""The data every strategy of one advice scores, read once, and its budget sample.

Real tasks (``--task-dir`` folders, benchmark tasks such as qmsum) are read once into
:class:`PreparedTask` objects, so every strategy scores exactly the same documents and queries (the
paired comparison checks it: same data fingerprint, same query ids).  Passkey and needle are given to
the runs by name with the run's ``queries_per_length`` and ``--haystack``, as ``longembed eval`` builds
them; they are deterministic, so every run generates the same data.

Budget sampling (:meth:`AdviceData.selection` with a fraction below 1) keeps, of a real task, a seeded
random sample of its queries with every sampled query's relevant documents, fills the rest of the
document sample with seeded random distractors, and keeps every other query all of whose relevant
documents are in the sample (they cost no document encodes); of passkey and needle, fewer queries per length (the
first N of the nested query set, 2 documents each).  It is recorded (:class:`~longembed.results.advice.
SampledTask`) and a sampled task folder's run says so in its ``config.task_dirs`` ("sampled").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from longembed.advice.spec import MIN_SAMPLED_QUERIES, AdviseSpec
from longembed.errors import UserError
from longembed.evaluation.task_options import SYNTHETIC_TASKS
from longembed.results.advice import SampledTask
from longembed.tasks import SYNTHETIC_LENGTHS, Blocks, RetrievalData, Task, TaskDataMissing, get_task
from longembed.tasks.base import TaskMetadata, check_length, restricted_answers
from longembed.tasks.haystack import load_haystack
from longembed.tasks.query_sets import PAPER_QUERIES
from longembed.tasks.task_dir import TaskDirRecord, task_dir_tasks


@dataclass
class PreparedTask:
    """A real task whose data was read once (and perhaps sampled): ``load`` returns that data.

    ``record``: what a task folder's run records in ``config.task_dirs`` (None for benchmark tasks).
    """

    metadata: TaskMetadata
    data: RetrievalData
    record: TaskDirRecord | None = None

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        check_length(self.metadata, length)
        return self.data


@dataclass
class Selection:
    """What the runs get: the tasks (prepared real tasks, passkey/needle by name), the queries per
    length, and what was sampled (empty: everything)."""

    tasks: list[str | Task]
    queries_per_length: int
    sampled: list[SampledTask] = field(default_factory=list)


@dataclass
class AdviceData:
    """The advice's data, in full: real tasks read once, passkey/needle names, their lengths and queries
    per length, and the benchmark tasks skipped for missing data (name -> why)."""

    real: list[PreparedTask]
    synthetic: list[str]
    lengths: list[int] | None
    queries_per_length: int
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [*self.synthetic, *(t.metadata.name for t in self.real)]

    def selection(self, fraction: float = 1.0, seed: int = 0) -> Selection:
        """Every task in full (``fraction`` 1), or a sample of about ``fraction`` of each task's queries
        and documents (see the module docstring); never fewer than 10 queries (per length) than a task
        has, with every relevant document of theirs."""
        if fraction >= 1.0:
            return Selection([*self.synthetic, *self.real], self.queries_per_length)
        sampled: list[SampledTask] = []
        queries_per_length = self.queries_per_length
        if self.synthetic:
            queries_per_length = _sampled_count(self.queries_per_length, fraction)
            sampled += [SampledTask(name, queries_per_length, self.queries_per_length, per_length=True)
                        for name in self.synthetic]
        real = []
        for task in self.real:
            data = task.data
            n_queries = _sampled_count(len(data.queries), fraction)
            n_documents = max(n_queries, round(len(data.corpus) * fraction))  # at least one per query
            sample = sample_data(data, n_queries, n_documents, seed, minimum=min(MIN_SAMPLED_QUERIES, len(data.queries)))
            sampled.append(SampledTask(task.metadata.name, len(sample.queries), len(data.queries),
                                       len(sample.corpus), len(data.corpus)))
            real.append(PreparedTask(task.metadata, sample, _sampled_record(task.record, data, sample)))
        return Selection([*self.synthetic, *real], queries_per_length, sampled)


def _sampled_count(total: int, fraction: float) -> int:
    """``fraction`` of ``total``, at least :data:`MIN_SAMPLED_QUERIES` (or all, when there are fewer)."""
    return min(total, max(MIN_SAMPLED_QUERIES, math.floor(total * fraction)))


def sample_data(
    data: RetrievalData, n_queries: int, n_documents: int, seed: int = 0, minimum: int = 1
) -> RetrievalData:
    """A seeded sample of ``data``: up to ``n_queries`` queries drawn at random, each with all its
    relevant documents, and random distractors up to ``n_documents`` documents in all; then every other
    query whose relevant documents all made it into the sample rides along.

    The first ``minimum`` queries drawn are always kept (the documents grow to hold their relevant ones);
    after them, a drawn query whose relevant documents would take the sample past ``n_documents`` is
    passed over.  Documents are what a budget pays for (queries are short), so the riders are free
    statistical power: on QMSum, where about eight queries share a meeting, ten sampled meetings carry
    about eighty queries instead of ten.  Corpus and queries keep their original order.
    """
    rng = np.random.default_rng(seed)
    query_ids, doc_ids = list(data.queries), list(data.corpus)
    chosen: list[str] = []
    relevant: set[str] = set()
    for index in rng.permutation(len(query_ids)):
        qid = query_ids[index]
        needed = {d for d, score in data.qrels[qid].items() if score > 0}
        if len(chosen) >= minimum and len(relevant | needed) > n_documents:
            continue
        chosen.append(qid)
        relevant |= needed
        if len(chosen) == n_queries:
            break
    others = [doc_ids[i] for i in rng.permutation(len(doc_ids)) if doc_ids[i] not in relevant]
    kept = relevant | set(others[: max(0, n_documents - len(relevant))])
    keep_queries = set(chosen) | {q for q in query_ids if _answered_within(data.qrels[q], kept)}
    passages = None if data.passages is None else {d: p for d, p in data.passages.items() if d in kept}
    query_contexts = (None if data.query_contexts is None
                      else {q: c for q, c in data.query_contexts.items() if q in keep_queries})
    blocks = (None if data.blocks is None
              else Blocks({q: b for q, b in data.blocks.queries.items() if q in keep_queries},
                          {d: b for d, b in data.blocks.documents.items() if d in kept}))
    return RetrievalData(
        corpus={d: t for d, t in data.corpus.items() if d in kept},
        queries={q: t for q, t in data.queries.items() if q in keep_queries},
        qrels={q: {d: s for d, s in data.qrels[q].items() if d in kept} for q in data.queries if q in keep_queries},
        contexts=data.contexts, passages=passages, query_contexts=query_contexts, blocks=blocks,
        answers=restricted_answers(data.answers, keep_queries, kept),
    ).validate()


def _answered_within(judgements: dict[str, int], documents: set[str]) -> bool:
    """Whether a query has relevant documents and every one of them is in ``documents``."""
    relevant = [d for d, score in judgements.items() if score > 0]
    return bool(relevant) and all(d in documents for d in relevant)


def _sampled_record(record: TaskDirRecord | None, full: RetrievalData, sample: RetrievalData) -> TaskDirRecord | None:
    """A task folder's record for a sampled run: the sample's counts, the queries sampled out counted as
    left out ("sampled")."""
    if record is None:
        return None
    out = len(full.queries) - len(sample.queries)
    return dataclasses.replace(
        record, documents=len(sample.corpus), queries=len(sample.queries), queries_left_out=record.queries_left_out + out,
        left_out_by_reason={**record.left_out_by_reason, "sampled": out},
    )


def load_data(spec: AdviseSpec, window: int, say: Callable[[str], None]) -> AdviceData:
    """Read the spec's tasks: task folders (errors name file:line), benchmark tasks (skipped, and said,
    when their data is missing), passkey/needle names with their lengths (up to ``window`` tokens, the
    longest the strategies read, unless ``spec.lengths`` says; with a haystack, those it fills)."""
    names = list(spec.tasks or (SYNTHETIC_TASKS if spec.haystack is not None else ()))
    synthetic = [n for n in names if n in SYNTHETIC_TASKS]
    if spec.haystack is not None and not synthetic:
        raise UserError(f"--haystack builds passkey and needle, and --tasks lists neither ({', '.join(names)})")
    data_dir = None if spec.data_dir is None else Path(spec.data_dir).expanduser()
    real: list[PreparedTask] = []
    skipped: dict[str, str] = {}
    for name in (n for n in names if n not in SYNTHETIC_TASKS):
        task = get_task(name)
        try:
            real.append(PreparedTask(task.metadata, task.load(data_dir)))
        except TaskDataMissing as exc:
            skipped[name] = str(exc)
            say(f"skipped {name}: {exc}")
    for folder in task_dir_tasks(spec.task_dirs or [], spec.task_names or []):
        data = folder.load()
        real.append(PreparedTask(folder.metadata, data, folder.record))
        if folder.record is not None:
            say(folder.record.describe(folder.metadata.name))
    lengths = synthetic_lengths(spec, window) if synthetic else None
    synthetic = [n for n in synthetic if _generates(n, spec, data_dir, lengths, skipped, say)]  # type: ignore[arg-type]
    if not real and not synthetic:
        raise UserError("no task could be read: " + "; ".join(f"{n}: {why}" for n, why in skipped.items()))
    if not synthetic and (spec.lengths is not None or spec.queries_per_length != PAPER_QUERIES):
        raise UserError("--lengths and --queries-per-length apply to passkey and needle, and neither runs")
    return AdviceData(real, synthetic, lengths if synthetic else None, spec.queries_per_length, skipped)


def _generates(
    name: str, spec: AdviseSpec, data_dir: Path | None, lengths: list[int], skipped: dict[str, str],
    say: Callable[[str], None],
) -> bool:
    """Whether passkey or needle can be built here (needle without --haystack reads the essays under
    --data-dir): its shortest length is generated now, and a task that cannot be is skipped, and said."""
    options = {"haystack": spec.haystack} if spec.haystack is not None else {}
    try:
        get_task(name, **options).load(data_dir, lengths[0])
    except TaskDataMissing as exc:
        skipped[name] = str(exc)
        say(f"skipped {name}: {exc}")
        return False
    return True


def synthetic_lengths(spec: AdviseSpec, window: int) -> list[int]:
    """``spec.lengths``, else the LongEmbed lengths up to ``window`` that the haystack (if any) fills."""
    if spec.lengths is not None:
        return sorted({int(n) for n in spec.lengths})
    longest = window
    if spec.haystack is not None:
        served = load_haystack(spec.haystack).longest_length()
        if served is None:
            raise UserError(f"haystack {spec.haystack}: too few words for even the shortest length "
                             f"({SYNTHETIC_LENGTHS[0]} tokens)")
        longest = min(window, served)
    lengths = [n for n in SYNTHETIC_LENGTHS if n <= longest]
    if not lengths:
        raise UserError(f"no LongEmbed length fits {longest} tokens (the shortest is {SYNTHETIC_LENGTHS[0]}): "
                         "give --lengths")
    return lengths
