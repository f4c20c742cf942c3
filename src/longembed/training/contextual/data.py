"""The training documents of ``longembed train contextual``: long texts cut into chunks, each chunk with the
queries it answers, from benchmark-safe data only.

- SQuAD 2.0 dev: an article's paragraphs, in order, are one long text; each paragraph is a chunk and its
  answerable questions are its queries (a paragraph without one stays as context and as a negative).
  The ``held_out_articles`` articles every longembed run holds out with the same seed
  (``training.data.held_out_squad_articles``) are left out: the short-text check scores them.
- HotpotQA dev (distractor), the questions the benchmark's ``hotpotqa`` task does not use: the ten
  passages of a question (title, newline, sentences) are one text, each a chunk; the question's queries
  are its supporting passages (two positives).  Which questions and passages the task uses is decided by
  the task's own selection, as for every training source (``training.data``): a question of the task, or
  one with a supporting passage in the task's corpus, is left out; a distractor in the task's corpus is
  dropped from the text.

QMSum, SQuALITY and the essays are never read.  Texts are packed to a token budget: consecutive SQuAD
paragraphs up to ``doc_tokens``, a new document when the next would not fit; a HotpotQA text over the
budget loses distractor passages from its end.  A chunk longer than the model's window (it must also
embed alone, for the distillation term) is left out, and counted; nothing is dropped unrecorded.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import MissingFileError, UserError
from longembed.tasks.base import read_json_file
from longembed.tasks.hotpotqa import read_hotpotqa, select_hotpotqa
from longembed.training.data import (
    HOTPOTQA_FILE,
    SQUAD_FILE,
    _data_file,
    held_out_squad_articles,
    hotpotqa_paragraph,
)

#: What joins a document's chunks into one text (a chunk's span never includes it).
SEPARATOR = "\n"
SOURCES = ("squad", "hotpotqa")


@dataclass(frozen=True)
class ContextDocument:
    """A long text as chunks, in order, and its queries: (query text, indices of the chunks that answer it)."""

    chunks: tuple[str, ...]
    queries: tuple[tuple[str, tuple[int, ...]], ...]
    group: str

    @property
    def text(self) -> str:
        return SEPARATOR.join(self.chunks)

    def spans(self) -> list[tuple[int, int]]:
        """Each chunk's (start, end) characters in :attr:`text`."""
        out, start = [], 0
        for chunk in self.chunks:
            out.append((start, start + len(chunk)))
            start += len(chunk) + len(SEPARATOR)
        return out


@dataclass(frozen=True)
class RawDocument:
    """A document before packing: chunks, each chunk's queries, and which chunks may be dropped to fit."""

    chunks: list[str]
    queries: list[list[str]]
    group: str
    splittable: bool  # SQuAD: cut into several documents; HotpotQA: distractors dropped instead


def squad_documents(data_dir: Path | str, held_out_titles: Sequence[str]) -> tuple[list[RawDocument], dict[str, int]]:
    """One raw document per SQuAD article not held out: its paragraphs and their answerable questions."""
    path = _data_file(data_dir, SQUAD_FILE)
    held = set(held_out_titles)
    out, counts = [], {"articles": 0, "held_out_articles": 0, "unanswerable questions": 0}
    for article in read_json_file(path)["data"]:
        if article["title"] in held:
            counts["held_out_articles"] += 1
            continue
        counts["articles"] += 1
        chunks, queries = [], []
        for paragraph in article["paragraphs"]:
            chunks.append(paragraph["context"].strip())
            answerable = [qa["question"].strip() for qa in paragraph["qas"] if not qa.get("is_impossible")]
            counts["unanswerable questions"] += sum(1 for qa in paragraph["qas"] if qa.get("is_impossible"))
            queries.append(answerable)
        out.append(RawDocument(chunks, queries, f"squad:{article['title']}", splittable=True))
    return out, counts


def hotpotqa_documents(data_dir: Path | str) -> tuple[list[RawDocument], dict[str, int]]:
    """One raw document per HotpotQA question the benchmark does not use (see the module docstring)."""
    examples = read_hotpotqa(_data_file(data_dir, HOTPOTQA_FILE))
    selection = select_hotpotqa(examples)
    used_questions, used_titles = set(selection.questions), selection.titles()
    counts = {"benchmark questions": len(used_questions), "questions with a benchmark passage": 0,
              "benchmark distractors": 0}
    out = []
    for i, example in enumerate(examples):
        if i in used_questions:
            continue
        supporting = {title for title, _ in example["supporting_facts"]}
        titles = [title for title, _ in example["context"]]
        if supporting & used_titles or not supporting <= set(titles):
            counts["questions with a benchmark passage"] += 1
            continue
        chunks, queries = [], []
        for title, sentences in example["context"]:
            if title in used_titles:
                counts["benchmark distractors"] += 1
                continue
            chunks.append(hotpotqa_paragraph(title, sentences))
            queries.append([example["question"].strip()] if title in supporting else [])
        out.append(RawDocument(chunks, queries, f"hotpotqa:{example['_id']}", splittable=False))
    return out, counts


def pack_documents(
    raw: Sequence[RawDocument], chunk_tokens: Sequence[Sequence[int]], budget: int, chunk_limit: int
) -> tuple[list[ContextDocument], dict[str, int]]:
    """Documents of at most ``budget`` text tokens (each chunk's tokens, plus one per separator), from raw
    documents whose chunks have ``chunk_tokens[d][c]`` tokens; chunks over ``chunk_limit`` are left out."""
    counts = {"chunks longer than the window": 0, "distractors cut to fit": 0, "documents without a query": 0,
              "questions whose passages exceed the budget": 0}
    out: list[ContextDocument] = []
    for doc, sizes in zip(raw, chunk_tokens, strict=True):
        keep = [c for c in range(len(doc.chunks)) if sizes[c] <= chunk_limit]
        counts["chunks longer than the window"] += len(doc.chunks) - len(keep)
        if not doc.splittable and any(doc.queries[c] and c not in keep for c in range(len(doc.chunks))):
            counts["questions whose passages exceed the budget"] += 1  # a supporting passage is over the window
            continue
        pieces = _split(keep, sizes, budget, counts) if doc.splittable else _fit(doc, keep, sizes, budget, counts)
        for piece in pieces:
            queries = tuple((q, (k,)) for k, c in enumerate(piece) for q in doc.queries[c])
            if doc.splittable is False:  # one question, its supporting passages all positives
                positives = tuple(k for k, c in enumerate(piece) if doc.queries[c])
                queries = tuple(dict.fromkeys((q, positives) for q, _ in queries))
            if not queries:
                counts["documents without a query"] += 1
                continue
            out.append(ContextDocument(tuple(doc.chunks[c] for c in piece), queries, doc.group))
    return out, counts


def _split(keep: list[int], sizes: Sequence[int], budget: int, counts: dict[str, int]) -> list[list[int]]:
    """Consecutive chunks, a new piece whenever the next chunk would pass the budget."""
    pieces: list[list[int]] = [[]]
    used = 0
    for c in keep:
        cost = sizes[c] + (1 if pieces[-1] else 0)
        if pieces[-1] and used + cost > budget:
            pieces.append([])
            used, cost = 0, sizes[c]
        if cost > budget:  # a single chunk over the budget (only when the budget is below the window)
            counts["chunks longer than the budget"] = counts.get("chunks longer than the budget", 0) + 1
            continue
        pieces[-1].append(c)
        used += cost
    return [p for p in pieces if p]


def _fit(doc: RawDocument, keep: list[int], sizes: Sequence[int], budget: int, counts: dict[str, int]) -> list[list[int]]:
    """A HotpotQA text within the budget: distractors dropped from the end; none if its passages do not fit."""
    piece = list(keep)
    while sum(sizes[c] for c in piece) + len(piece) - 1 > budget:
        distractors = [c for c in piece if not doc.queries[c]]
        if not distractors:
            counts["questions whose passages exceed the budget"] += 1
            return []
        piece.remove(distractors[-1])
        counts["distractors cut to fit"] += 1
    return [piece]


def documents_digest(documents: Sequence[ContextDocument]) -> str:
    """A SHA-256 of every document's chunks and queries, in order: part of a run's identity."""
    digest = hashlib.sha256()
    for doc in documents:
        digest.update(json.dumps([doc.chunks, doc.queries, doc.group]).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class StepItem:
    """One document of a step and the indices (into its ``queries``) of the queries asked this step."""

    document: int
    queries: tuple[int, ...]


def plan_steps(
    documents: Sequence[ContextDocument], steps: int, per_step: int, queries_per_document: int, seed: int,
    squad_share: float | None = None,
) -> list[list[StepItem]]:
    """``steps`` steps of ``per_step`` distinct documents, each with up to ``queries_per_document`` of its
    queries (a seeded sample, redrawn each time the document comes back).

    ``squad_share`` None: the documents in a seeded order, a new order each epoch.  A number: each place of a
    step is a SQuAD document with that probability, else another one, each source read in its own seeded
    order, a new one each time it is used up (HotpotQA gives about 70 documents for each SQuAD one, with one
    question each: the share keeps SQuAD's many-query documents in the steps)."""
    if len(documents) < per_step:
        raise UserError(f"a step needs {per_step} documents and the training data has {len(documents)}")
    rng = random.Random(f"longembed-contextual:{seed}")
    if squad_share is None:
        streams = [list(range(len(documents)))]
    else:
        squad = [d for d, doc in enumerate(documents) if doc.group.startswith("squad:")]
        other = [d for d, doc in enumerate(documents) if not doc.group.startswith("squad:")]
        streams = [squad, other]
    pending: list[list[int]] = [[] for _ in streams]
    plan: list[list[StepItem]] = []
    while len(plan) < steps:
        step: list[int] = []
        while len(step) < per_step:
            k = 0 if len(streams) == 1 or (rng.random() < squad_share and streams[0]) or not streams[1] else 1
            fresh = [d for d in pending[k] if d not in step]
            if not fresh:
                order = list(streams[k])
                rng.shuffle(order)
                pending[k] += order
                fresh = [d for d in pending[k] if d not in step]
                if not fresh:  # this source has no document the step lacks: take the other
                    k = 1 - k
                    order = list(streams[k])
                    rng.shuffle(order)
                    pending[k] += order
                    fresh = [d for d in pending[k] if d not in step]
            pending[k].remove(fresh[0])
            step.append(fresh[0])
        items = []
        for d in step:
            count = len(documents[d].queries)
            chosen = sorted(rng.sample(range(count), min(count, queries_per_document)))
            items.append(StepItem(d, tuple(chosen)))
        plan.append(items)
    return plan


def raw_documents(
    data_dir: Path | str, sources: Sequence[str], held_out_articles: int, seed: int
) -> tuple[list[RawDocument], dict[str, dict[str, int]], list[str]]:
    """The raw documents of ``sources`` under ``data_dir``, their counts by source, and the held-out titles."""
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise UserError(f"unknown training source(s) {unknown}; choose from {SOURCES}")
    if not Path(data_dir).is_dir():
        raise MissingFileError(f"data_dir {data_dir} is not a folder")
    held = [a["title"] for a in held_out_squad_articles(data_dir, held_out_articles, seed)] if "squad" in sources else []
    raw: list[RawDocument] = []
    counts: dict[str, dict[str, int]] = {}
    if "squad" in sources:
        docs, counts["squad"] = squad_documents(data_dir, held)
        raw += docs
    if "hotpotqa" in sources:
        docs, counts["hotpotqa"] = hotpotqa_documents(data_dir)
        raw += docs
    return raw, counts, held
