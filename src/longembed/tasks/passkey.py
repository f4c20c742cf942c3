"""Personalized passkey retrieval (LongEmbed section 3.2, Figures 3 and 7), generated offline.

Recipe, per evaluation length L (one of 256 ... 32768 tokens):

* word budget B = L * 0.75 words; no document has more than B words (``str.split()``);
* 100 candidate documents, shared by 50 queries (LongEmbed's footnote 4: candidates are shared
  within a length to make evaluation 50x cheaper than the original per-query candidate sets);
* every document belongs to one person (a unique full name) and holds that person's 5-digit pass key
  in the key sentence ``"<name>'s pass key is <n>. Remember it. <n> is the pass key for <name>."``;
* the rest of the document is the filler ``"The grass is green. The sky is blue. The sun is yellow.
  Here we go. There and back again."`` repeated, sentence by sentence, as long as the document stays
  within B words (all documents of a length therefore have the same filler length);
* the key sentence sits at a uniformly random sentence boundary of the filler, on its own line
  (a newline before and after it, as in Figure 7);
* query: ``"What is the pass key for <name>?"``; its only relevant document is its person's; the other
  50 documents hold other people and act as distractors.

Determinism: each length draws from its own ``random.Random(f"longembed-passkey:{seed}:{L}")``, so a
length's data does not depend on which other lengths were generated, nor on the order. Which 50 of
the 100 people are queried is random, so relevance is unrelated to document-id order (this matters
when a model gives several documents exactly the same score: ties are broken by document id).
"""

from __future__ import annotations

import random
from pathlib import Path

from longembed.tasks.base import (
    SYNTHETIC_LENGTHS,
    RetrievalData,
    TaskMetadata,
    check_length,
    word_budget,
)
from longembed.tasks.registry import register_task

METADATA = TaskMetadata(
    name="passkey",
    description="Personalized passkey retrieval: find the document holding the named person's pass key "
    "among 100 documents of filler sentences (50 queries per length).",
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

NUM_DOCS = 100
NUM_QUERIES = 50

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


def key_sentence(name: str, passkey: int) -> str:
    """The sentence that hides ``name``'s pass key (wording of LongEmbed's Figure 7)."""
    return f"{name}'s pass key is {passkey}. Remember it. {passkey} is the pass key for {name}."


def query_text(name: str) -> str:
    """The query asking for ``name``'s pass key."""
    return f"What is the pass key for {name}?"


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


def generate(length: int, seed: int = DEFAULT_SEED) -> RetrievalData:
    """Generate the passkey data of one length (see the module docstring for the recipe)."""
    check_length(METADATA, length)
    rng = random.Random(f"longembed-passkey:{seed}:{length}")
    budget = word_budget(length)

    pairs = rng.sample(range(len(FIRST_NAMES) * len(LAST_NAMES)), NUM_DOCS)
    names = [f"{FIRST_NAMES[p // len(LAST_NAMES)]} {LAST_NAMES[p % len(LAST_NAMES)]}" for p in pairs]
    passkeys = rng.sample(range(10_000, 100_000), NUM_DOCS)

    corpus: dict[str, str] = {}
    doc_ids: list[str] = []
    for i, (name, passkey) in enumerate(zip(names, passkeys, strict=True)):
        key = key_sentence(name, passkey)
        filler = filler_sentences(budget - len(key.split()))
        position = rng.randint(0, len(filler))
        doc_id = f"passkey-{length}-doc{i:03d}"
        corpus[doc_id] = insert_line(filler, position, key)
        doc_ids.append(doc_id)

    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for j, i in enumerate(rng.sample(range(NUM_DOCS), NUM_QUERIES)):
        qid = f"passkey-{length}-q{j:03d}"
        queries[qid] = query_text(names[i])
        qrels[qid] = {doc_ids[i]: 1}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels).validate()


class PasskeyTask:
    """The passkey task; ``seed`` fixes the generated data (the same seed always gives the same data)."""

    metadata = METADATA

    def __init__(self, seed: int = DEFAULT_SEED) -> None:
        self.seed = seed

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        """Generate the data of ``length`` tokens; ``data_dir`` is ignored (nothing is read)."""
        check_length(METADATA, length)
        assert length is not None
        return generate(length, seed=self.seed)


register_task(METADATA, PasskeyTask)
