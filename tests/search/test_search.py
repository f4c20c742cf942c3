"""longembed search: the answer's JSON (SEARCH_CONTRACT.md), the passage each result shows against a naive
reference and what it costs, filters, concurrency, a changed model refused."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny, words

from longembed.cli.main import main
from longembed.errors import UserError
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.passages import PASSAGE_RULE, document_pieces
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
    build_index(root / "sentences", sentence_documents(), strategy, show_progress=False, log=None)
    build_index(root / "sentences-unsaved", sentence_documents(), strategy, show_progress=False, log=None,
                passage_vectors=False)
    return root, model, docs


def sentence_documents() -> list[Document]:
    """Documents of sentences of 3 to 14 words, each ending with ". " (what the naive reference splits on)."""
    rng = np.random.default_rng(7)
    return [Document(f"s{i}.txt", f"s{i}.txt", " ".join(f"{words(int(rng.integers(3, 15)), 20 * i + j)}."
                                                        for j in range(18))) for i in range(5)]


def naive_passage(text: str, chunks: list[tuple[int, int]], embed, vector: np.ndarray, query: str) -> tuple[int, int]:
    """The passage by its definition, written out: the sentences touching the best chunks, each embedded
    alone; a window of up to 3 consecutive sentences (within 100 words) starting at each; a window's
    vector the word-weighted sum of its sentences' unit vectors; its score the rule's mix of its cosine and
    its BM25 among the windows (bm25s over their texts), each min-max scaled; the best, the earliest of equals."""
    sentences = [(m.start(), m.end()) for m in re.finditer(r"[^ ][^.]*\.", text)]
    touched = [i for i, (s, e) in enumerate(sentences) if any(s < ce and e > cs for cs, ce in chunks)]
    unit = dict(zip(touched, embed([text[slice(*sentences[i])] for i in touched]), strict=True))
    size = {i: len(text[slice(*sentences[i])].split()) for i in touched}
    spans, cosines = [], []
    for i in touched:
        window = [i]
        while len(window) < 3 and window[-1] + 1 in unit and sum(size[j] for j in window) + size[window[-1] + 1] <= 100:
            window.append(window[-1] + 1)
        total = sum(size[j] * unit[j] / np.linalg.norm(unit[j]) for j in window)
        cosines.append(float(total @ vector / np.linalg.norm(total)))
        spans.append((sentences[window[0]][0], sentences[window[-1]][1]))
    bm25 = BM25Model().score([query], [text[s:e] for s, e in spans])[0].astype(np.float64)
    scaled = [(x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros(len(x))
              for x in (np.round(np.asarray(cosines), 9), bm25)]
    scores = (1 - PASSAGE_RULE.lexical_weight) * scaled[0] + PASSAGE_RULE.lexical_weight * scaled[1]
    return spans[next(i for i, x in enumerate(scores) if x > scores.max() - 1e-9)]


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
    root, _, _ = built
    index = open_index(root / "sentences")
    response = index.search("one of the", k=5)
    vector = index._query_vectors(["one of the"])[0]  # noqa: SLF001 - the index's own query vector
    table = index._data  # noqa: SLF001

    def embed(texts: list[str]) -> np.ndarray:
        return index.encoder.encode(texts, prompt=index.prompts["document"], normalize_embeddings=True)

    for result in response.results:
        d = table.doc_ids.index(result.id)
        text, start = table.text(d), int(table.rows[:d].sum())
        chunk_scores = table.vectors[start : start + table.rows[d]] @ vector
        assert result.systems["dense"]["score"] == pytest.approx(float(chunk_scores.max()))
        best = start + np.argsort(-chunk_scores, kind="stable")[: PASSAGE_RULE.chunks]
        expected = naive_passage(text, [(int(table.starts[r]), int(table.ends[r])) for r in best], embed, vector,
                                 "one of the")
        assert (result.passage.start, result.passage.end) == expected
        assert result.passage.text == text[result.passage.start : result.passage.end]


def test_a_search_embeds_no_more_than_its_results_best_chunks_in_one_batch(built, monkeypatch) -> None:
    """What a search of an index without saved piece vectors costs beyond its query: the sentences of
    each result's best chunks (PASSAGE_RULE.chunks), once, in one batch: their tokens are the chunks' plus at most the
    sentences cut by the chunks' edges."""
    root = built[0]
    index = open_index(root / "sentences-unsaved")
    assert index._data.pieces is None  # noqa: SLF001 - built with passage_vectors=False
    batches: list[list[str]] = []
    real = index._embed_sentences  # noqa: SLF001
    monkeypatch.setattr(index, "_embed_sentences", lambda texts: batches.append(texts) or real(texts))
    response = index.search("one of the", k=5)
    assert len(batches) == 1
    tokens = lambda texts: sum(len(ids) for ids in index.encoder.tokenizer(texts, add_special_tokens=False)["input_ids"])  # noqa: E731
    vector, table = index._query_vectors(["one of the"])[0], index._data  # noqa: SLF001
    bound = 0
    for result in response.results:
        d = table.doc_ids.index(result.id)
        start = int(table.rows[:d].sum())
        best = start + np.argsort(-(table.vectors[start : start + table.rows[d]] @ vector),
                                  kind="stable")[: PASSAGE_RULE.chunks]
        longest = max(tokens([s]) for s in re.findall(r"[^ ][^.]*\.", table.text(d)))
        bound += tokens([table.text(d)[table.starts[r] : table.ends[r]] for r in best]) + 2 * len(best) * longest
    assert tokens(batches[0]) <= bound
    assert index.search("one of the", k=5, passages="chunk") and len(batches) == 1  # "chunk" embeds nothing more


@pytest.mark.parametrize("name", ["sentences", "hybrid"])
def test_a_search_with_saved_piece_vectors_runs_the_model_once_for_its_query_only(built, name) -> None:
    index = open_index(built[0] / name)
    assert index._data.pieces is not None  # noqa: SLF001
    calls: list[list[str]] = []  # every model call, through the saved query program or the encoder
    real = index._encode  # noqa: SLF001
    index._encode = lambda texts, prompt, batch_size: calls.append(list(texts)) or real(texts, prompt, batch_size)  # noqa: SLF001
    for query in ["one of the", "the apple harvest"]:
        calls.clear()
        response = index.search(query, k=5)
        assert calls == [[query]] and len(response.results) == 5  # the query's own encode, nothing for passages


@pytest.mark.parametrize("name", ["sentences", "hybrid"])
def test_saved_piece_vectors_choose_the_passages_the_model_would_choose_on_the_fly(built, name) -> None:
    """The same index, its saved pieces against embedding the results' sentences at search time: the
    pieces agree exactly, their vectors within float tolerance, and every query shows the same spans."""
    saved = open_index(built[0] / name)
    on_the_fly = open_index(built[0] / name)
    on_the_fly._data.pieces = None  # noqa: SLF001 - what an index without saved pieces searches with
    pieces = saved._data.pieces  # noqa: SLF001
    for d in range(len(saved._data.doc_ids)):  # noqa: SLF001
        text = saved._data.text(d)  # noqa: SLF001
        spans, vectors = pieces.of(d)
        assert [tuple(map(int, span)) for span in spans] == document_pieces(text)
        fresh = saved.encoder.encode([text[s:e] for s, e in spans], prompt=saved.prompts["document"],
                                     normalize_embeddings=True)
        np.testing.assert_allclose(vectors, fresh, atol=1e-5)
    queries = ["one of the", "the apple harvest", words(4, 3), words(6, 41), "harvest"]
    for query in queries:
        expected = [(r.id, r.passage.start, r.passage.end) for r in on_the_fly.search(query, k=8).results]
        assert [(r.id, r.passage.start, r.passage.end) for r in saved.search(query, k=8).results] == expected


def test_passages_chunk_shows_the_chunk_that_scored_the_document(built) -> None:
    index = open_index(built[0] / "hybrid")
    vector, table = index._query_vectors(["the apple harvest"])[0], index._data  # noqa: SLF001
    for result in index.search("the apple harvest", k=8, passages="chunk").results:
        d = table.doc_ids.index(result.id)
        start = int(table.rows[:d].sum())
        best = start + int(np.argmax(table.vectors[start : start + table.rows[d]] @ vector))
        assert (result.passage.start, result.passage.end) == (int(table.starts[best]), int(table.ends[best]))
    with pytest.raises(UserError, match="passages must be one of"):
        index.search("the apple harvest", passages="windows")


def test_the_search_command_takes_passages(built, capsys) -> None:
    root = built[0]
    assert main(["search", "--index", str(root / "hybrid"), "the apple harvest", "--passages", "chunk", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = open_index(root / "hybrid").search("the apple harvest", passages="chunk").to_dict()
    assert printed["results"] == json.loads(json.dumps(expected["results"]))


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
