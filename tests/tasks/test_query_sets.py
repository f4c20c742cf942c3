"""Tests of queries per length (longembed.tasks.query_sets) in passkey and needle, and of the packaged
needles that make needle sets of up to 200 queries."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import DATA_DIR, require_data

from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, get_task
from longembed.tasks import needle as needle_mod
from longembed.tasks import passkey as passkey_mod
from longembed.tasks.base import word_budget
from longembed.tasks.query_sets import first_queries

#: sha256 of the canonical JSON of {corpus, queries, qrels}, recorded from the generators as they were
#: before queries_per_length existed (commit 16f893d): the 50-query sets must never change.
PAPER_SET_SHA256 = {
    ("passkey", 256): "6ec1ffae742104b2c738203c95c900efa55d4000cf9963dfa0ad1c78a0fa78ca",
    ("passkey", 1024): "5572c5cd13b1e8a45e5f3ea0043ddf18ddce8452c84569ddf1fa21564a931834",
    ("passkey", 4096): "b953b4dc242a75eb85e279f4c79600356bd4546810141d70df8a02e885fe4f8e",
    ("needle", 256): "b0edb14643df07894fcf827a7cfd22ffa20cc590af653461a59a3d570d1a13e1",
    ("needle", 1024): "863ae32f65bd83e9dd61f0e08642295f6c07d5e18adbe4d0247551e251294c03",
    ("needle", 4096): "0894ab2d8819d9d1c312b1e8ff906b16ca2eeedf039cf55067093f6dc78077a4",
}

#: sha256 of the first 100 lines of the packaged needles.jsonl (joined by newlines) as published.
FIRST_100_SHA256 = "f4fef6ebf9693e8328f59026cb88c2c39a406f132dd13bfabfa1f884e7784bee"

TOY_HAYSTACK = ". ".join(f"Sentence {i} of the toy haystack has eight words" for i in range(5000)) + "."


def canonical_sha256(data: RetrievalData) -> str:
    blob = json.dumps({"corpus": data.corpus, "queries": data.queries, "qrels": data.qrels},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def relevant(data: RetrievalData, qid: str) -> str:
    (doc_id,) = data.qrels[qid]
    return doc_id


def is_contained(small: RetrievalData, big: RetrievalData) -> bool:
    """Every document, query and judgement of ``small`` is in ``big``, unchanged."""
    return (
        all(big.corpus.get(d) == t for d, t in small.corpus.items())
        and all(big.queries.get(q) == t for q, t in small.queries.items())
        and all(big.qrels.get(q) == r for q, r in small.qrels.items())
    )


# ---------------------------------------------------------------- the 50-set never changes


@pytest.mark.parametrize(("task", "length"), sorted(PAPER_SET_SHA256))
def test_the_50_query_sets_are_byte_identical_to_the_published_ones(task: str, length: int) -> None:
    if task == "needle":
        require_data(needle_mod.ESSAY_SUBDIR)
    for built in (get_task(task), get_task(task, queries_per_length=50)):
        data = built.load(DATA_DIR, length)
        assert canonical_sha256(data) == PAPER_SET_SHA256[(task, length)]


# ---------------------------------------------------------------- first_queries


def test_first_queries_keeps_relevant_and_lowest_numbered_documents() -> None:
    corpus = {f"d{i}": f"text {i}" for i in range(10)}
    queries = {f"q{j}": f"query {j}" for j in range(5)}
    qrels = {"q0": {"d7": 1}, "q1": {"d3": 1, "d9": 0}, "q2": {"d0": 1}, "q3": {"d5": 1}, "q4": {"d1": 1}}
    data = RetrievalData(corpus, queries, qrels).validate()
    two = first_queries(data, 2)
    # q0 and q1, their relevant d7 and d3, then the lowest-numbered others d0, d1 (d9 is judged 0: dropped)
    assert list(two.queries) == ["q0", "q1"]
    assert list(two.corpus) == ["d0", "d1", "d3", "d7"]
    assert two.qrels == {"q0": {"d7": 1}, "q1": {"d3": 1}}
    assert first_queries(data, 5) is data and first_queries(data, 9) is data


# ---------------------------------------------------------------- passkey


@pytest.mark.parametrize("length", [256, 2048])
def test_passkey_sets_are_nested(length: int) -> None:
    sets = {n: passkey_mod.generate(length, queries_per_length=n) for n in (1, 4, 49, 50, 51, 120, 200)}
    for n, data in sets.items():
        assert len(data.queries) == n and len(data.corpus) == 2 * n
    paper = sets[50]
    for small, big in ((50, 51), (51, 120), (120, 200), (50, 200)):
        assert is_contained(sets[small], sets[big])
        assert list(sets[big].queries)[: small] == list(sets[small].queries)  # same ids, same order
    for n in (1, 4, 49):  # the first n queries of the 50-set, their documents, then the lowest others
        data = sets[n]
        assert list(data.queries) == list(paper.queries)[:n] and is_contained(data, paper)
        own = {relevant(data, q) for q in data.queries}
        others = [d for d in paper.corpus if d not in own]
        assert set(data.corpus) == own | set(others[: 2 * n - len(own)])
    # the new queries ask about new documents; every query has its own person
    big = sets[200]
    new_docs = list(big.corpus)[100:]
    assert all(relevant(big, q) in new_docs for q in list(big.queries)[50:])
    assert len({relevant(big, q) for q in big.queries}) == 200
    # which document of each new pair is asked is random, not always the first
    asked = [new_docs.index(relevant(big, q)) % 2 for q in list(big.queries)[50:]]
    assert 0 < sum(asked) < len(asked)


def test_passkey_people_and_keys_stay_distinct_up_to_the_name_pool() -> None:
    key_re = re.compile(r"(\w+ \w+)'s pass key is (\d{5})\.")
    most = passkey_mod.MAX_QUERIES
    assert most == 1250
    data = passkey_mod.generate(256, queries_per_length=most)
    people, keys = zip(*(key_re.search(text).groups() for text in data.corpus.values()), strict=True)
    assert len(set(people)) == len(people) == 2 * most and len(set(keys)) == len(keys) == 2 * most
    budget = word_budget(256)
    assert {len(text.split()) for text in data.corpus.values()} <= set(range(budget - 4, budget + 1))
    for qid, query in data.queries.items():
        name = re.fullmatch(r"What is the pass key for (\w+ \w+)\?", query).group(1)
        assert key_re.search(data.corpus[relevant(data, qid)]).group(1) == name
    with pytest.raises(ValueError, match="at most 1250 queries per length"):
        passkey_mod.generate(256, queries_per_length=most + 1)


def test_passkey_more_queries_are_deterministic_per_seed() -> None:
    a = passkey_mod.PasskeyTask(seed=5, queries_per_length=80).load(None, 512)
    assert a == passkey_mod.generate(512, seed=5, queries_per_length=80)
    other = passkey_mod.generate(512, seed=6, queries_per_length=80)
    assert list(a.corpus.values())[100:] != list(other.corpus.values())[100:]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10", True])
def test_queries_per_length_must_be_a_positive_whole_number(bad: object) -> None:
    for name in ("passkey", "needle"):
        with pytest.raises(ValueError, match="queries_per_length must be a whole number >= 1"):
            get_task(name, queries_per_length=bad)


# ---------------------------------------------------------------- needle


def test_needle_sets_are_nested_and_share_the_50_set_prefix() -> None:
    needles = needle_mod.load_needles()
    sets = {n: needle_mod.generate(1024, TOY_HAYSTACK, needles, queries_per_length=n) for n in (3, 50, 51, 90, 200)}
    for n, data in sets.items():
        assert len(data.queries) == n and len(data.corpus) == 2 * n
    for small, big in ((50, 51), (51, 90), (90, 200)):
        assert is_contained(sets[small], sets[big])
    assert list(sets[3].queries) == list(sets[50].queries)[:3] and is_contained(sets[3], sets[50])
    # every document of the 200-set is the 50-set's haystack prefix with its own needle inserted
    longest = max(len(n.fact.split()) for n in needles[:100])
    prefix = needle_mod.prefix_words(TOY_HAYSTACK, word_budget(1024) - longest)
    for i, text in enumerate(sets[200].corpus.values()):
        before, _, after = f"\n{text}\n".partition(f"\n{needles[i].fact}\n")
        assert " ".join(p for p in (before.strip(), after.strip()) if p) == prefix
    by_question = {n.question: n.fact for n in needles}
    for qid, question in sets[200].queries.items():
        assert by_question[question] in sets[200].corpus[relevant(sets[200], qid)]
    assert all(int(relevant(sets[200], q)[-3:]) >= 100 for q in list(sets[200].queries)[50:])


def test_needle_needs_2n_needles_above_50(tmp_path: Path) -> None:
    path = tmp_path / "needles.jsonl"
    rows = [{"fact": f"Zorblat {i} owns a teal canoe.", "question": f"Who owns canoe {i}?"} for i in range(120)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    needles = needle_mod.load_needles(path)
    assert len(needle_mod.generate(256, TOY_HAYSTACK, needles, queries_per_length=60).corpus) == 120
    with pytest.raises(ValueError, match="61 queries per length need 122 needles .* the needles file has 120"):
        needle_mod.generate(256, TOY_HAYSTACK, needles, queries_per_length=61)
    # at 50 and below, a file of any size keeps today's rule (one document per needle, up to 100)
    small = needles[:7]
    assert needle_mod.set_size(7) == (7, 7)
    data = needle_mod.generate(256, TOY_HAYSTACK, small, queries_per_length=3)
    assert (len(data.corpus), len(data.queries)) == needle_mod.set_size(7, 3) == (6, 3)
    assert needle_mod.set_size(120) == (100, 50) and needle_mod.set_size(400, 200) == (400, 200)


# ---------------------------------------------------------------- the packaged needles


def test_the_packaged_needles_after_the_first_100_are_no_longer_than_those() -> None:
    needles = needle_mod.load_needles()
    assert len(needles) == 400
    longest = max(len(n.fact.split()) for n in needles[:100])
    assert max(len(n.fact.split()) for n in needles[100:]) <= longest


def test_the_first_100_packaged_needles_are_unchanged() -> None:
    lines = needle_mod.packaged_needles_path().read_text(encoding="utf-8").splitlines()
    digest = hashlib.sha256("\n".join(lines[:100]).encode("utf-8")).hexdigest()
    assert digest == FIRST_100_SHA256


def test_bm25_finds_every_packaged_needle_by_its_question() -> None:
    """Each question is answerable by its own fact only: BM25 over all 400 facts ranks it first."""
    needles = needle_mod.load_needles()
    scores = BM25Model().score([n.question for n in needles], [n.fact for n in needles])
    wrong = [(needles[i].question, needles[j].fact) for i, j in enumerate(scores.argmax(axis=1)) if i != j]
    rate = 1 - len(wrong) / len(needles)
    assert not wrong, f"BM25 top-1 {rate:.4f}; ambiguous: {wrong[:5]}"


def test_no_named_entity_of_a_new_needle_is_in_another_needle() -> None:
    """Capitalised words inside a fact (names of people, places, works) appear in one needle only."""
    generic = {
        "The", "A", "In", "On", "At", "Of", "During", "According", "Every", "Dr.", "Professor", "Celsius",
        "Earth", "New", "Year's", "Day", "Lake", "Mount", "Street", "Island", "Bay", "Point", "Hill", "Hills",
        "Valley", "River", "Cape", "Sea", "Road", "Lane", "Square", "Hall", "Castle", "Tower", "Museum", "School", "College",
        "Park", "Abbey", "Chapel", "Cathedral", "Hospital", "Farm", "Club", "Sound", "Creek", "Gorge", "Falls",
        "Library", "Institute", "Academy", "Bridge", "Grandpa", "Grandma", "Uncle", "Aunt", "Mr.", "Milky", "Way",
        "I", "US", "Sunday", "Friday", "Wednesday", "Thursday", "Tuesday", "Saturday", "November", "February",
        "June", "January", "August", "December",
    }
    owners: dict[str, set[int]] = {}
    for i, needle in enumerate(needle_mod.load_needles()):
        for word in needle.fact.split()[1:]:
            word = word.strip(".,;:'\"").removesuffix("'s")
            if word[:1].isupper() and word not in generic:
                owners.setdefault(word, set()).add(i)
    shared = {word: sorted(ids) for word, ids in owners.items() if len(ids) > 1 and max(ids) >= 100}
    assert not shared


def test_the_new_needles_cover_many_domains() -> None:
    path = needle_mod.packaged_needles_path()
    domains = Counter(json.loads(line)["domain"] for line in path.read_text(encoding="utf-8").splitlines()[100:])
    assert len(domains) == 30 and set(domains.values()) == {10}
