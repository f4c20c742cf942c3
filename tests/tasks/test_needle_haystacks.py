"""Tests of the needle task's haystacks (longembed.tasks.needle, ``haystacks=``): "shared" (LongEmbed's
one prefix per length) is byte-identical to what longembed generated before the option existed;
"distinct" cuts every document from its own window of the haystack, asks the same queries, and is the
construction ``benchmarks/needle_distinct_haystack.py`` published its numbers with."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from types import ModuleType

import pytest
from conftest import DATA_DIR, load_benchmark_script, require_data

from longembed.tasks import RetrievalData, get_task
from longembed.tasks import needle as needle_mod
from longembed.tasks.base import word_budget
from longembed.tasks.haystack import load_haystack

#: ordered_sha256 of the shared sets on the stand-in essays (essay_folder), (length, queries per
#: length) -> digest, recorded from the generator as it was before ``haystacks`` existed (commit 2a107e0).
SHARED_TOY_SHA256 = {
    (256, 3): "6cf527e349de84694bf0d4632411934997461398cc4cdf42ee3ac469f99d3ab1",
    (256, 50): "67147d52f7f4d523f51684f0cfa0e2e9b7c4d969dcbefd71ae4441fe5683d789",
    (256, 120): "d2d19be77a9d41757db888bb933399e0980f777c99d6cfec3bd8fc8a267f694b",
    (1024, 3): "cf6fd260d2636e93fd03dfd6f1b9935f660bf98e4f440bfe8c791432771d5fc1",
    (1024, 50): "864436b909394cbc3e65c016ea44d21dddbb593aeec7184af0a33aaab568e9a3",
    (1024, 120): "f33dd286967746b5d6cc8d44c1f97c4af47b6849159d130b97e1e9894bad085d",
    (4096, 3): "3dff105469a8ad28e21c8b18d3adee0848dc0823d060b6400978fc5edb26cd7d",
    (4096, 50): "13e1dde7d2883784deac7ab2dc52f6a98435078e735e3046b66523543fef3168",
    (4096, 120): "a55c404735eb7c67d2dca79c4472f0c5cc9f9a73257040c7b5098e556b8f0333",
}
#: The same on the real essays (the 50-sets are pinned in test_query_sets.PAPER_SET_SHA256).
SHARED_ESSAYS_SHA256 = {
    (1024, 3): "1d49be73dc3a979dd89d0d8fe7d2b15cf70a526cfb0a7f875070505846b1521c",
    (1024, 120): "207d15cd9263ec6f35fca0d5e1921e64cd1b9f0a011934b2876be49438a641af",
}
#: documents_sha256 of the benchmark script's distinct documents for the first 100 packaged facts, seed
#: 0, recorded from its own copy of the construction before it moved into the task (commit 2a107e0):
#: (haystack, length) -> digest; the essays' are the documents of RESULTS.md's published numbers.
BENCHMARK_SHA256 = {
    ("toy", 1024): "a3e92ff5f78639da45a0a983f8ea123a20a4a4bd545cc1e087123f2343540a5a",
    ("toy", 2048): "53d3845cfdf30d901601a79c963e62a36e4d5330d9d9a8f0dfc4e44e16619f85",
    ("essays", 1024): "3a2d27b89d723c8b66b6e64bc2c601e1c441e0a70d8755b6933813edc04ae795",
    ("essays", 2048): "2cbdc60e7730147dcac2aa2de54727c9af6d98456bae25be14a58f3bff1c5832",
}
#: ordered_sha256 of the task's distinct sets on the stand-in essays (the default seed), so that the data
#: (and the cached vectors and comparisons keyed on it) cannot change unnoticed.
DISTINCT_TOY_SHA256 = {
    (1024, 50): "421a97844d85164b1be22be4b32d4200c5600688f6717695ed67ec07ac3b5175",
    (4096, 120): "962b42baf7b469fba13e98b0432bd69b94dac370701a59c90561812705c88836",
}

#: The words of the stand-in essays.
ESSAY_WORDS = ("startup", "founders", "essay", "painting", "taste", "hackers", "cities", "wealth", "design",
               "schools", "ideas", "lisp", "writing", "users", "growth", "money", "work", "questions", "art",
               "programs", "Boston", "investors", "nerds", "makers", "cleverness")
#: File name -> index of the stand-in essays: rss.txt and goodtaste.txt are read first, the rest by name.
ESSAY_FILES = {"zeta.txt": 0, "goodtaste.txt": 1, "alpha.txt": 2, "rss.txt": 3, "mid.txt": 4}


def essay(k: int, sentences: int = 170) -> str:
    """Essay ``k``: sentences of 5 to 13 words, with the essays' irregular spacing (double spaces and
    wrapped lines inside sentences, which normalising keeps as double spaces; paragraph breaks)."""
    out = []
    for s in range(sentences):
        n = 5 + (k * 7 + s * 3) % 9
        words = [ESSAY_WORDS[(k * 11 + s * 5 + w * 3) % len(ESSAY_WORDS)] for w in range(n)]
        if s % 5 == 2:  # a double space inside a sentence (the essays have hundreds)
            words[1] += " "
        if s % 7 == 3:  # a line wrapped after a trailing space: a double space once normalised
            words[2] += " \n"
        out.append(" ".join(words).capitalize() + "." + ("\n\n" if s % 6 == 5 else "  " if s % 4 == 3 else " "))
    return "".join(out)


def essay_folder(root: Path) -> Path:
    """A stand-in for ``paul_graham_essays/PaulGrahamEssays``: five .txt essays, about 7,600 words."""
    root.mkdir(parents=True)
    for name, k in ESSAY_FILES.items():
        (root / name).write_text(essay(k), encoding="utf-8")
    return root


def ordered_sha256(data: RetrievalData) -> str:
    """sha256 of the data with every id in its order: corpus, queries and qrels as lists of pairs."""
    blob = json.dumps([list(data.corpus.items()), list(data.queries.items()),
                       [[qid, list(rels.items())] for qid, rels in data.qrels.items()]], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def documents_sha256(documents: list[str]) -> str:
    """sha256 of a list of documents, in order."""
    return hashlib.sha256(json.dumps(documents, ensure_ascii=False).encode("utf-8")).hexdigest()


def haystack_part(text: str, fact: str) -> tuple[str, str]:
    """(the document without its needle line, the text before the needle)."""
    before, found, after = f"\n{text}\n".partition(f"\n{fact}\n")
    assert found, "the needle is on its own line"
    return " ".join(p for p in (before.strip(), after.strip()) if p), before.strip()


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(a data folder holding the stand-in essays, their haystack text)."""
    data_dir = tmp_path_factory.mktemp("toy-data")
    folder = essay_folder(data_dir / needle_mod.ESSAY_SUBDIR)
    return data_dir, needle_mod.build_haystack(folder)


@pytest.fixture(scope="module")
def needle_script() -> ModuleType:
    """benchmarks/needle_distinct_haystack.py, imported as a module."""
    return load_benchmark_script("needle_distinct_haystack")


# ---------------------------------------------------------------- shared: unchanged


@pytest.mark.parametrize(("length", "queries"), sorted(SHARED_TOY_SHA256))
def test_shared_is_byte_identical_to_the_sets_before_the_option(toy: tuple[Path, str], length: int,
                                                                 queries: int) -> None:
    data_dir, _ = toy
    for task in (needle_mod.NeedleTask(queries_per_length=queries),
                 get_task("needle", queries_per_length=queries, haystacks="shared")):
        assert ordered_sha256(task.load(data_dir, length)) == SHARED_TOY_SHA256[(length, queries)]


@pytest.mark.parametrize(("length", "queries"), sorted(SHARED_ESSAYS_SHA256))
def test_shared_on_the_essays_is_byte_identical(length: int, queries: int) -> None:
    require_data(needle_mod.ESSAY_SUBDIR)
    data = needle_mod.NeedleTask(queries_per_length=queries, haystacks="shared").load(DATA_DIR, length)
    assert ordered_sha256(data) == SHARED_ESSAYS_SHA256[(length, queries)]


# ---------------------------------------------------------------- distinct


@pytest.mark.parametrize("queries", [3, 50, 120])
def test_distinct_asks_the_same_queries_over_windows_of_the_haystack(toy: tuple[Path, str], queries: int) -> None:
    data_dir, text = toy
    length = 1024
    shared = needle_mod.NeedleTask(queries_per_length=queries).load(data_dir, length)
    distinct = needle_mod.NeedleTask(queries_per_length=queries, haystacks="distinct").load(data_dir, length)
    assert distinct.queries == shared.queries and distinct.qrels == shared.qrels
    assert list(distinct.queries) == list(shared.queries) and list(distinct.corpus) == list(shared.corpus)

    facts = [n.fact for n in needle_mod.load_needles()[: max(100, 2 * queries)]]
    words = text.split()
    budget = word_budget(length) - max(len(f.split()) for f in facts)
    stride = (len(words) - budget) // (len(facts) - 1)
    windows = []
    for doc_id, document in distinct.corpus.items():
        i = int(doc_id.rsplit("doc", 1)[1])
        assert [f for f in facts if f in document] == [facts[i]]  # exactly its own needle, once
        assert document.count(facts[i]) == 1
        window, before = haystack_part(document, facts[i])
        assert window == " ".join(words[i * stride : i * stride + budget])  # its own window, evenly spread
        assert before == "" or before.endswith(".")  # at a sentence boundary
        windows.append(window)
    assert len(set(windows)) == len(windows)  # no two documents share their haystack
    shared_parts = {haystack_part(t, facts[int(d.rsplit("doc", 1)[1])])[0] for d, t in shared.corpus.items()}
    assert len(shared_parts) == 1  # while the shared set's documents all do


def test_distinct_draws_from_the_tasks_seed(toy: tuple[Path, str]) -> None:
    data_dir, text = toy
    needles = needle_mod.load_needles()
    facts = [n.fact for n in needles[:100]]
    data = needle_mod.NeedleTask(seed=3, haystacks="distinct").load(data_dir, 2048)
    expected = needle_mod.distinct_documents(2048, text, facts, random.Random("longembed-needle-distinct:3:2048"))
    assert list(data.corpus.values()) == expected
    assert data == needle_mod.generate(2048, text, needles, seed=3, haystacks="distinct")
    other = needle_mod.NeedleTask(seed=4, haystacks="distinct").load(data_dir, 2048)
    assert other.corpus != data.corpus and other.queries != data.queries
    # the same windows, the needles elsewhere in them
    for (i, a), b in zip(data.corpus.items(), other.corpus.values(), strict=True):
        fact = facts[int(i.rsplit("doc", 1)[1])]
        assert haystack_part(a, fact)[0] == haystack_part(b, fact)[0]
    places = [haystack_part(t, f)[1] for t, f in zip(data.corpus.values(), facts, strict=True)]
    other_places = [haystack_part(t, f)[1] for t, f in zip(other.corpus.values(), facts, strict=True)]
    assert sum(a != b for a, b in zip(places, other_places, strict=True)) > 50


@pytest.mark.parametrize(("length", "queries"), sorted(DISTINCT_TOY_SHA256))
def test_distinct_sets_are_pinned(toy: tuple[Path, str], length: int, queries: int) -> None:
    data_dir, _ = toy
    data = needle_mod.NeedleTask(queries_per_length=queries, haystacks="distinct").load(data_dir, length)
    assert ordered_sha256(data) == DISTINCT_TOY_SHA256[(length, queries)]


def test_distinct_on_a_users_haystack_and_its_errors(tmp_path: Path) -> None:
    folder = tmp_path / "lease"
    folder.mkdir()
    (folder / "lease.txt").write_text(" ".join(f"Clause {i} says the lessee keeps the garden tidy." for i in range(300)),
                                      encoding="utf-8")
    haystack = load_haystack(folder)  # 2,700 words
    data = needle_mod.NeedleTask(haystack=folder, haystacks="distinct").load(None, 1024)
    windows = {haystack_part(t, n.fact)[0] for t, n in zip(data.corpus.values(), needle_mod.load_needles(),
                                                            strict=False)}
    assert len(windows) == 100 and all(w in haystack.text for w in windows)
    # 200 words fill the budget of 256 (192 words), so the shared set builds, but not 100 windows of
    # 192 - 26 words that start at distinct words: 265 words
    short = tmp_path / "short"
    short.mkdir()
    (short / "a.txt").write_text(" ".join(f"Clause {i} binds the tenant to the lease." for i in range(25)),
                                 encoding="utf-8")
    assert len(needle_mod.NeedleTask(haystack=short).load(None, 256).corpus) == 100
    with pytest.raises(ValueError, match=r"needle with distinct haystacks at length 256: the haystack has 200 words, "
                                         r"but 100 documents need a window of 166 words each, starting at distinct "
                                         r"words: at least 265 words"):
        needle_mod.NeedleTask(haystack=short, haystacks="distinct").load(None, 256)
    with pytest.raises(ValueError, match="fewer than the 768 words of length 1024"):  # the budget first
        needle_mod.NeedleTask(haystack=short, haystacks="distinct").load(None, 1024)
    with pytest.raises(ValueError, match=r"at least 841 words"):  # the essays' text is not repeated either
        needle_mod.generate(1024, "Few words here. " * 100, needle_mod.load_needles(), haystacks="distinct")


def test_haystacks_must_be_shared_or_distinct() -> None:
    for bad in ("mixed", "", None):
        with pytest.raises(ValueError, match="needle haystacks must be one of shared, distinct"):
            get_task("needle", haystacks=bad)
    with pytest.raises(ValueError, match="does not take the options"):
        get_task("passkey", haystacks="distinct")


# ---------------------------------------------------------------- the benchmark's documents


@pytest.mark.parametrize("length", [1024, 2048])
def test_the_benchmark_reproduces_its_documents(toy: tuple[Path, str], needle_script: ModuleType, length: int) -> None:
    _, text = toy
    facts = [n.fact for n in needle_mod.load_needles()[:100]]
    documents = needle_mod.distinct_documents(length, text, facts, random.Random(f"distinct-haystack:0:{length}"))
    assert documents_sha256(documents) == BENCHMARK_SHA256[("toy", length)]
    assert needle_script.benchmark_documents(length, text, facts) == documents
    assert needle_script.distinct_documents is needle_mod.distinct_documents  # no copy of its own


@pytest.mark.parametrize("length", [1024, 2048])
def test_the_benchmark_reproduces_its_published_documents_on_the_essays(needle_script: ModuleType, length: int) -> None:
    text = needle_mod.build_haystack(require_data(needle_mod.ESSAY_SUBDIR))
    facts = [n.fact for n in needle_mod.load_needles()[:100]]
    assert documents_sha256(needle_script.benchmark_documents(length, text, facts)) == BENCHMARK_SHA256[("essays", length)]
