"""Personalized passkey retrieval (LongEmbed section 3.2, Figures 3 and 7), generated offline.

Per length: 100 people's documents of filler sentences, each hiding its person's 5-digit key on its own
line, and 50 questions "What is the pass key for <name>?".  The exact recipe: docs/reference/synthetic-tasks.md.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from longembed.errors import UserError
from longembed.tasks.base import (
    SYNTHETIC_LENGTHS,
    RetrievalData,
    TaskMetadata,
    check_length,
    word_budget,
)
from longembed.tasks.haystack import Haystack, as_haystack, insert_needle, prefix_words, sentence_boundaries
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

METADATA = TaskMetadata(
    name="passkey",
    description="Personalized passkey retrieval: find the document holding the named person's pass key "
    "among documents of filler sentences (50 queries and 100 documents per length by default: "
    "--queries-per-length N asks N, over 2N documents).",
    main_score="accuracy@1",
    lengths=SYNTHETIC_LENGTHS,
    source="Generated on the fly (no data needed); the original is dwzhu/LongEmbed, config passkey.",
    title="Passkey",
    hub_config="passkey",
)

DEFAULT_SEED = 20240418

FILLER_SENTENCES: tuple[str, ...] = (
    "The grass is green.",
    "The sky is blue.",
    "The sun is yellow.",
    "Here we go.",
    "There and back again.",
)

#: The paper's set: 50 queries over 100 documents per length.
NUM_QUERIES = PAPER_QUERIES
NUM_DOCS = DOCUMENTS_PER_QUERY * NUM_QUERIES

# Single-word names (no spaces, no apostrophes) so that every key sentence has the same word count.
FIRST_NAMES: tuple[str, ...] = (
    "Aaliyah", "Abel", "Adrian", "Aisha", "Alba", "Amara", "Anders", "Anika", "Arturo", "Beatrix",
    "Bruno", "Camila", "Cesar", "Dalia", "Damon", "Elena", "Emeka", "Esther", "Farid", "Freya",
    "Gideon", "Hana", "Hugo", "Imani", "Ingrid", "Isaac", "Jasper", "Keiko", "Kwame", "Leila",
    "Lorenzo", "Malayah", "Marcus", "Mei", "Nadia", "Nikolai", "Olga", "Omar", "Priya", "Quentin",
    "Rafael", "Rosa", "Santiago", "Sky", "Tariq", "Thea", "Uma", "Viktor", "Yara", "Zane",
)
LAST_NAMES: tuple[str, ...] = (
    "Abbott", "Alvarez", "Andersen", "Baptiste", "Bergstrom", "Carvalho", "Chen", "Dubois", "Eriksen",
    "Fitzgerald", "Graves", "Haddad", "Hollis", "Ibarra", "Jankowski", "Kapoor", "Kowalski", "Lindqvist",
    "McLean", "Mays", "Morrow", "Nakamura", "Nwosu", "Okafor", "Oyelaran", "Petrov", "Quinlan", "Ramos",
    "Reyes", "Rossi", "Sandoval", "Schultz", "Silva", "Sorensen", "Tanaka", "Thornton", "Ueda", "Valdez",
    "Varga", "Vasquez", "Wallace", "Weber", "Whitaker", "Yamada", "Yilmaz", "Young", "Zamora", "Zhou",
    "Zielinski", "Brennan",
)
#: Distinct people (full names) the pool gives, and so the most queries per length (2 people each).
NAME_POOL = len(FIRST_NAMES) * len(LAST_NAMES)
MAX_QUERIES = NAME_POOL // DOCUMENTS_PER_QUERY


def key_sentence(name: str, passkey: int) -> str:
    """The sentence that hides ``name``'s pass key (wording of LongEmbed's Figure 7)."""
    return f"{name}'s pass key is {passkey}. Remember it. {passkey} is the pass key for {name}."


def key_sentence_offset(document: str) -> int:
    """The number of words before a passkey document's key sentence (which starts, with the person's
    name, on its own line): where in the document the key is hidden, for analyses of a run's scores."""
    marker = "'s pass key is "
    position = document.find(marker)
    if position < 0:
        raise UserError(f"not a passkey document: no {marker!r} in it")
    return len(document[: document.rfind("\n", 0, position) + 1].split())


def key_sentence_span(document: str) -> tuple[int, int]:
    """The (start, end) characters of a passkey document's key sentence: its line, where the answer is."""
    position = document.find("'s pass key is ")
    if position < 0:
        raise UserError("not a passkey document: no \"'s pass key is \" in it")
    start = document.rfind("\n", 0, position) + 1
    end = document.find("\n", position)
    return start, len(document) if end < 0 else end


def query_text(name: str) -> str:
    """The query asking for ``name``'s pass key."""
    return f"What is the pass key for {name}?"


#: Words of every key sentence (single-word names and 5-digit keys: the same for everyone).
KEY_WORDS = len(key_sentence("First Last", 10_000).split())


def filler_sentences(max_words: int) -> list[str]:
    """Filler sentences, cycling through :data:`FILLER_SENTENCES`, with at most ``max_words`` words."""
    out: list[str] = []
    words = 0
    i = 0
    while True:
        sentence = FILLER_SENTENCES[i % len(FILLER_SENTENCES)]
        n = len(sentence.split())
        if words + n > max_words:
            return out
        out.append(sentence)
        words += n
        i += 1


def insert_line(sentences: list[str], position: int, line: str) -> str:
    """Join ``sentences`` with spaces, with ``line`` on its own line before ``sentences[position]``."""
    before = " ".join(sentences[:position])
    after = " ".join(sentences[position:])
    return "\n".join(part for part in (before, line, after) if part)


def person_name(person: int) -> str:
    """The full name of person ``person`` of the name pool (first names by ``person // 50``)."""
    return f"{FIRST_NAMES[person // len(LAST_NAMES)]} {LAST_NAMES[person % len(LAST_NAMES)]}"


def check_queries(n: int) -> int:
    """``n`` if passkey can ask that many queries per length (2n distinct people), else a ValueError."""
    check_queries_per_length(n)
    if DOCUMENTS_PER_QUERY * n > NAME_POOL:
        raise UserError(
            f"passkey asks at most {MAX_QUERIES} queries per length (its {len(FIRST_NAMES)} x {len(LAST_NAMES)} "
            f"name pool gives {NAME_POOL} distinct people, 2 per query); got {n}"
        )
    return n


Hider = Callable[[random.Random, str], str]


def filler_hider(length: int, haystack: Haystack | None = None) -> Hider:
    """``hide(rng, key)``: a document of ``length`` tokens, ``key`` on its own line at a uniformly random
    sentence boundary of the length's shared filler (the filler sentences, or the haystack's prefix)."""
    budget = word_budget(length) - KEY_WORDS
    if haystack is None:
        sentences = filler_sentences(budget)
        return lambda rng, key: insert_line(sentences, rng.randint(0, len(sentences)), key)
    prefix = prefix_words(haystack.covering(length), budget)
    boundaries = sentence_boundaries(prefix)
    return lambda rng, key: insert_needle(prefix, rng.choice(boundaries), key)


def generate(
    length: int, seed: int = DEFAULT_SEED, queries_per_length: int = NUM_QUERIES, haystack: Haystack | None = None,
    candidates: str = ALL_CANDIDATES,
) -> RetrievalData:
    """Generate the passkey data of one length (see the module docstring for the recipe); ``candidates``
    "blocks" cuts it into the paper's blocks (:func:`~longembed.tasks.query_sets.paper_blocks`)."""
    check_length(METADATA, length)
    n = check_queries(queries_per_length)
    check_candidates(candidates, n)
    hide = filler_hider(length, haystack)
    rng = random.Random(f"longembed-passkey:{seed}:{length}")
    people = rng.sample(range(NAME_POOL), NUM_DOCS)
    passkeys = rng.sample(range(10_000, 100_000), NUM_DOCS)
    documents = [hide(rng, key_sentence(person_name(p), k)) for p, k in zip(people, passkeys, strict=True)]
    asked = rng.sample(range(NUM_DOCS), NUM_QUERIES)
    if n > NUM_QUERIES:
        more = random.Random(f"longembed-passkey:{seed}:{length}:more")
        new_people, new_documents, new_asked = more_people(more, n - NUM_QUERIES, hide, people, passkeys)
        people, documents, asked = people + new_people, documents + new_documents, asked + new_asked
    return with_candidates(first_queries(_retrieval_data(length, people, documents, asked), n), candidates)


def more_people(
    rng: random.Random, pairs: int, hide: Hider, people: list[int], passkeys: list[int]
) -> tuple[list[int], list[str], list[int]]:
    """``pairs`` pairs of new people (names and keys distinct from all others), their documents, and which
    of each pair is asked (as indices after the existing ``people``).

    The unused names are shuffled once, then each pair draws in turn (key, place, key, place, which one
    is asked), so the first k pairs are the same whatever the number asked for: the sets are nested.
    """
    taken = set(people)
    unused = [p for p in range(NAME_POOL) if p not in taken]
    rng.shuffle(unused)
    used_keys = set(passkeys)
    new_people, documents, asked = unused[: DOCUMENTS_PER_QUERY * pairs], [], []
    for i, person in enumerate(new_people):
        passkey = rng.randrange(10_000, 100_000)
        while passkey in used_keys:
            passkey = rng.randrange(10_000, 100_000)
        used_keys.add(passkey)
        documents.append(hide(rng, key_sentence(person_name(person), passkey)))
        if i % 2 == 1:
            asked.append(len(people) + i - 1 + rng.randrange(2))
    return new_people, documents, asked


def _retrieval_data(length: int, people: list[int], documents: list[str], asked: list[int]) -> RetrievalData:
    """Document i belongs to ``people[i]``; query j asks for the key of ``people[asked[j]]``."""
    doc_ids = [f"passkey-{length}-doc{i:03d}" for i in range(len(documents))]
    corpus = dict(zip(doc_ids, documents, strict=True))
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for j, i in enumerate(asked):
        qid = f"passkey-{length}-q{j:03d}"
        queries[qid] = query_text(person_name(people[i]))
        qrels[qid] = {doc_ids[i]: 1}
        answers[qid] = {doc_ids[i]: [key_sentence_span(documents[i])]}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels, answers=answers).validate()


class PasskeyTask:
    """The passkey task: ``seed`` fixes the generated data (the same seed always gives the same data),
    ``queries_per_length`` the set's size (2 documents per query; 50 is the paper's set), ``haystack``
    (a :class:`~longembed.tasks.haystack.Haystack` or a folder of documents) replaces the filler sentences,
    ``candidates`` "blocks" ranks each 50 queries among their own 100 documents ("all": all 2N)."""

    metadata = METADATA

    def __init__(
        self,
        seed: int = DEFAULT_SEED,
        queries_per_length: int = NUM_QUERIES,
        haystack: Haystack | Path | str | None = None,
        candidates: str = ALL_CANDIDATES,
    ) -> None:
        self.seed = seed
        self.queries_per_length = check_queries(queries_per_length)
        self.haystack = as_haystack(haystack)
        self.candidates = check_candidates(candidates, self.queries_per_length)

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        """Generate the data of ``length`` tokens; ``data_dir`` is ignored (nothing is read)."""
        check_length(METADATA, length)
        assert length is not None
        return generate(length, seed=self.seed, queries_per_length=self.queries_per_length, haystack=self.haystack,
                        candidates=self.candidates)


register_task(METADATA, PasskeyTask)
