"""longembed search: the answer's JSON (SEARCH_CONTRACT.md), filters, concurrency, a changed model refused."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny, words

from longembed.cli.main import main
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.passages import windows
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.sources import Document


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, list[Document]]:
    root = tmp_path_factory.mktemp("search")
    model = build_tiny("bert", root / "bert")
    docs = [Document(f"{'essays' if i % 2 else 'notes'}/d{i}.txt", f"{'essays' if i % 2 else 'notes'}/d{i}.txt",
                     words(70 + 10 * i, i) + (" harvest apple" if i == 3 else "")) for i in range(8)]
    strategy = Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True,
                             )
    hybrid = Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True,
                           fuse="bm25")
    build_index(root / "dense", docs, strategy, show_progress=False, log=None)
    build_index(root / "hybrid", docs, hybrid, show_progress=False, log=None)
    return root, model, docs


def test_the_json_answer_has_the_contracts_keys_in_order(built, capsys) -> None:
    root, _, docs = built
    assert main(["search", "--index", str(root / "hybrid"), "the apple harvest", "-k", "5", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert list(answer) == ["query", "k", "index", "results"]
    assert list(answer["index"]) == ["documents", "chunks", "model", "method", "max_length", "dtype", "strategy",
                                     "systems", "fusion", "built_at", "longembed_version", "truncated"]
    assert answer["index"]["strategy"] == "late-chunks+bm25" and answer["index"]["fusion"] == {"method": "rrf", "k": 60}
    assert answer["index"]["systems"] == ["dense", "bm25"] and answer["index"]["documents"] == 8
    results = answer["results"]
    assert len(results) == 5 and [r["rank"] for r in results] == [1, 2, 3, 4, 5]
    assert all(a["score"] > b["score"] for a, b in zip(results, results[1:], strict=False))
    first = results[0]
    assert list(first) == ["rank", "id", "score", "source", "passage", "systems"]
    assert list(first["passage"]) == ["text", "start", "end", "before", "after", "location", "page"]
    assert first["passage"]["location"] is None and first["passage"]["page"] is None  # a .txt file has no locations
    text = next(d.text for d in docs if d.id == first["id"])
    passage = first["passage"]
    assert text[passage["start"] : passage["end"]] == passage["text"]
    assert text[max(0, passage["start"] - 300) : passage["start"]] == passage["before"]
    assert first["id"] == "essays/d3.txt" and first["systems"]["bm25"]["rank"] == 1  # the only one with the words
    bm25 = BM25Model()
    expected = bm25.query_scores(bm25.index([d.text for d in docs]), "the apple harvest")
    assert first["systems"]["bm25"]["score"] == pytest.approx(float(expected[3]))


def test_the_passage_is_the_best_sentence_window_around_the_best_chunks(built) -> None:
    root, _, docs = built
    index = open_index(root / "dense")
    response = index.search("one of the", k=8)
    assert all(list(r.systems) == ["dense"] for r in response.results)
    vector = index._query_vectors(["one of the"])[0]  # noqa: SLF001 - the index's own query vector
    table = index._data  # noqa: SLF001
    for result in response.results:
        d = table.doc_ids.index(result.id)
        text = table.text(d)
        start = int(table.rows[:d].sum())
        chunk_scores = table.vectors[start : start + table.rows[d]] @ vector
        assert result.systems["dense"]["score"] == pytest.approx(float(chunk_scores.max()))
        best = start + np.argsort(-chunk_scores, kind="stable")[:3]
        spans = windows(text, [(int(table.starts[r]), int(table.ends[r])) for r in best])
        cosines = [float(index.encoder.encode([text[a:b]], prompt=index.prompts["document"],
                                              normalize_embeddings=True)[0] @ vector) for a, b in spans]
        assert (result.passage.start, result.passage.end) == spans[int(np.argmax(cosines))]
        assert result.passage.text == text[result.passage.start : result.passage.end]


def test_a_lexical_index_shows_the_sentence_with_the_query_terms(tmp_path: Path) -> None:
    answer = "The harvest valve opens when the apple press stops."
    filler = [f"{words(12, i)}." for i in range(40)]
    text = " ".join(filler[:25] + [answer] + filler[25:])
    build_index(tmp_path / "bm25", [Document("a.txt", "a.txt", text), Document("b.txt", "b.txt", " ".join(filler))],
                Strategy(BM25), show_progress=False, log=None)
    (result,) = open_index(tmp_path / "bm25").search("when does the harvest valve open", k=1).results
    assert result.id == "a.txt" and answer in result.passage.text
    assert len(result.passage.text.split()) <= 100 and result.passage.start == text.index(result.passage.text)


def test_filters_restrict_the_documents(built) -> None:
    index = open_index(built[0] / "hybrid")
    essays = index.search("the apple harvest", k=10, path_prefix="essays/")
    assert {r.source for r in essays.results} == {f"essays/d{i}.txt" for i in (1, 3, 5, 7)}
    chosen = index.search("the apple harvest", k=10, ids=["notes/d0.txt", "notes/d2.txt"])
    assert sorted(r.id for r in chosen.results) == ["notes/d0.txt", "notes/d2.txt"]


@pytest.mark.slow
def test_concurrent_searches_answer_as_one_at_a_time(built) -> None:
    index = open_index(built[0] / "hybrid")
    questions = [words(5, 100 + i) for i in range(12)]
    alone = [index.search(q, k=4).to_dict() for q in questions]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda q: index.search(q, k=4).to_dict(), questions))
    assert together == alone


def test_an_index_whose_model_files_changed_is_refused(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    build_index(tmp_path / "index", [Document("a", "a", words(40))], Strategy(str(model), "truncate"),
                show_progress=False, log=None)
    build_tiny("bert", tmp_path / "bert", hidden_dropout_prob=0.3)  # the same folder, other files
    with pytest.raises(ValueError, match="is not the one that built this index"):
        open_index(tmp_path / "index")
