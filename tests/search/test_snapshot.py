"""Opening an index costs what the query needs (issue 53): BM25 is indexed once, at build time, and loaded
as saved; the vectors are a read-only memory map; an index built before snapshots were saved still opens;
a build killed before it tags its version leaves searches on the last complete one; a dense build saves
its documents' passage pieces and their vectors, embedding only new and changed documents' (issue 54).
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny, words

import longembed.search.build as build_module
from longembed.cli.main import main
from longembed.encoder import LongContextEncoder
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.passages import document_pieces
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search import open_index, table_snapshot
from longembed.search.build import BuildReport, build_index
from longembed.search.query_program import PROBES
from longembed.search.snapshot import (
    PIECE_VECTORS,
    PIECES,
    PIECES_FORMAT,
    VECTORS,
    snapshot_of_rows,
    write_snapshot,
)
from longembed.search.sources import Document
from longembed.search.store import IndexStore, table_metadata
from longembed.search.table_snapshot import version_snapshot
from longembed.search.version_files import POINTER, VERSIONS_DIR, saved_version

FOXES = {"d0.txt", "d3.txt", "d6.txt", "d9.txt"}
DOCS = [Document(f"d{i}.txt", f"d{i}.txt", words(40 + 7 * i, i) + (" foxes and dogs" if i % 3 == 0 else ""))
        for i in range(12)]
MORE = [*DOCS, Document("new.txt", "new.txt", "a new document about cats and their whiskers")]
QUERIES = ["foxes", "dogs and cats", words(6, 3), "whiskers"]


BM25_ONLY = Strategy(BM25)


def build(index: Path, docs: list[Document] = DOCS, strategy: Strategy = BM25_ONLY) -> None:
    build_index(index, docs, strategy, show_progress=False, log=None)


def refuse_bm25_indexing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, corpus):  # a result's passage windows are scored by BM25 (retrieval/passages.py); the corpus never again
        if not any(Path(frame.filename).name == "passages.py" for frame in inspect.stack()):
            raise AssertionError("BM25 indexed the corpus again")
        return original(self, corpus)

    original = BM25Model.index

    monkeypatch.setattr(BM25Model, "index", refuse)


def test_opening_loads_the_saved_bm25_and_scores_as_eval_bit_for_bit(tmp_path: Path, monkeypatch) -> None:
    build(tmp_path / "index")
    expected = BM25Model().score(QUERIES, [d.text for d in DOCS])  # eval's scores
    refuse_bm25_indexing(monkeypatch)
    index = open_index(tmp_path / "index")
    for q, query in enumerate(QUERIES):
        found = {r.id: r.systems["bm25"]["score"] for r in index.search(query, k=len(DOCS)).results}
        for d, document in enumerate(DOCS):
            if found.get(document.id) is not None:  # a document BM25 scores 0 is not ranked by it
                assert found[document.id] == float(expected[q, d])  # the same float32, not merely close
        assert {DOCS[d].id for d in np.flatnonzero(expected[q] > 0)} <= set(found)


def test_the_vectors_are_a_read_only_memory_map_and_search_equals_the_in_memory_scan(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    strategy = Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True, fuse="bm25")
    build(tmp_path / "index", DOCS, strategy)
    index = open_index(tmp_path / "index")
    vectors = index._data.vectors
    assert isinstance(vectors, np.memmap) and not vectors.flags.writeable
    saved = [[(r.id, r.score, r.passage.start) for r in index.search(q, k=5).results] for q in QUERIES]
    for path in [tmp_path / "index" / POINTER, *(tmp_path / "index" / VERSIONS_DIR).iterdir()]:
        path.unlink() if path.is_file() else shutil.rmtree(path)
    with pytest.warns(UserWarning):
        in_memory = open_index(tmp_path / "index")
    assert not isinstance(in_memory._data.vectors, np.memmap)
    assert [[(r.id, r.score, r.passage.start) for r in in_memory.search(q, k=5).results] for q in QUERIES] == saved


def test_an_index_without_saved_files_opens_says_how_to_save_them_and_a_rerun_saves_them(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    index = tmp_path / "index"
    build(index)
    (index / POINTER).unlink()  # what an index built before this change looks like
    with pytest.warns(UserWarning, match=r"run longembed index .* once to save them"):
        opened = open_index(index)
    assert opened.search("foxes", k=1).results[0].id in FOXES
    build(index)  # nothing changed: nothing embedded, the files saved
    assert saved_version(index) is not None
    refuse_bm25_indexing(monkeypatch)
    assert open_index(index).search("foxes", k=1).results[0].id in FOXES


def test_a_build_that_dies_before_tagging_leaves_searches_on_the_last_complete_version(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    index = tmp_path / "index"
    build(index)
    before = saved_version(index)

    def die(table):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "mark_complete", die)
    with pytest.raises(KeyboardInterrupt):
        build(index, MORE)
    monkeypatch.undo()
    assert saved_version(index) == before
    refuse_bm25_indexing(monkeypatch)
    opened = open_index(index)
    assert str(opened.version) == before[0].split("-")[0] and "new.txt" not in [r.id for r in opened.search("whiskers").results]
    monkeypatch.undo()
    build(index, MORE)
    assert saved_version(index)[0] != before[0]
    assert [p.name for p in (index / VERSIONS_DIR).iterdir()] == [saved_version(index)[0]]  # the old removed
    assert open_index(index).search("whiskers", k=1).results[0].id == "new.txt"


def test_saved_files_that_cannot_be_read_are_one_line_naming_rebuild(tmp_path: Path) -> None:
    index = tmp_path / "index"
    build(index)
    _, folder = saved_version(index)
    (folder / "documents.arrow").write_bytes(b"not arrow")
    with pytest.raises(Exception) as error:
        open_index(index)
    assert "--rebuild" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.slow  # a process
def test_a_bm25_only_search_from_the_command_line_imports_no_torch_transformers_or_lancedb(tmp_path: Path) -> None:
    build(tmp_path / "index")
    script = ("import sys; from longembed.cli.main import main; "
              f"status = main(['search', '--index', {str(tmp_path / 'index')!r}, 'foxes', '--json']); "
              "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'lancedb'}); "
              "print(repr(heavy)); sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    answer, heavy = done.stdout.strip().splitlines()
    assert json.loads(answer)["results"][0]["id"] in FOXES
    assert heavy == "[]"


DENSE_STRATEGY = dict(method="pi", max_length=128, granularity="chunks", chunking="tokens:16", late=True)


def dense_build(index: Path, model: Path, docs: list[Document], **options) -> BuildReport:
    return build_index(index, docs, Strategy(str(model), **DENSE_STRATEGY), show_progress=False, log=None, **options)


def counting_encodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text LongContextEncoder.encode is given (a build's chunks go through encode_chunk_inputs:
    what encode sees in a build is the passage pieces, and the query program's check of its probes,
    which are left out here)."""
    seen: list[str] = []
    real = LongContextEncoder.encode

    def encode(self, texts, *args, **kwargs):
        seen.extend(t for t in texts if t not in PROBES)
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(LongContextEncoder, "encode", encode)
    return seen


def test_a_dense_build_saves_every_documents_pieces_and_a_rebuild_embeds_only_new_and_changed_ones(
        tmp_path: Path, monkeypatch) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    index = tmp_path / "index"
    seen = counting_encodes(monkeypatch)
    first = dense_build(index, model, DOCS)
    pieces = open_index(index)._data.pieces
    assert pieces is not None and isinstance(pieces.vectors, np.memmap)
    every = {d.id: document_pieces(d.text) for d in DOCS}
    assert first.pieces.embedded == len(seen) == pieces.count == sum(len(p) for p in every.values())
    assert first.pieces.reused == 0 and first.times.seconds["passages"] > 0
    assert f"passage pieces: {pieces.count:,} embedded, 0 kept" in first.summary()
    changed = Document("d4.txt", "d4.txt", "a changed text. It says something else about harvests.")
    docs = [*MORE[:4], changed, *MORE[5:]]
    seen.clear()
    second = dense_build(index, model, docs)
    new_pieces = {t for d in (changed, MORE[-1]) for s, e in document_pieces(d.text) for t in [d.text[s:e]]}
    assert set(seen) == new_pieces and len(seen) == second.pieces.embedded  # only the new and changed documents'
    assert second.pieces.reused == sum(len(every[d.id]) for d in docs if d.id in every and d is not changed)
    opened = open_index(index)
    for d in range(len(opened._data.doc_ids)):
        spans, vectors = opened._data.pieces.of(d)
        text = opened._data.text(d)
        assert [tuple(map(int, s)) for s in spans] == document_pieces(text)
        fresh = opened.encoder.encode([text[s:e] for s, e in spans], prompt=opened.prompts["document"],
                                      normalize_embeddings=True)
        np.testing.assert_allclose(vectors, fresh, atol=1e-5)  # the kept rows are the document's own
    assert not list(index.glob(".piece-vectors-*"))  # the scratch file went into the snapshot


def test_an_index_built_without_passage_vectors_saves_none_and_its_search_embeds_them(tmp_path: Path,
                                                                                      monkeypatch, capsys) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    report = dense_build(tmp_path / "index", model, DOCS, passage_vectors=False)
    assert report.pieces is None and "no passage vectors saved (--no-passage-vectors)" in report.summary()
    _, folder = saved_version(tmp_path / "index")
    assert not (folder / PIECES).exists() and not (folder / PIECE_VECTORS).exists()
    index = open_index(tmp_path / "index")
    seen = counting_encodes(monkeypatch)
    assert index._data.pieces is None and index.search("foxes", k=3).results and len(seen) > 1  # query + pieces
    source = tmp_path / "docs"
    source.mkdir()
    for d in DOCS[:3]:
        (source / d.id).write_text(d.text)
    flags = ["--model", str(model), "--method", "pi", "--max-length", "128", "--granularity", "chunks",
             "--chunking", "tokens:16", "--late", "--no-estimate"]
    assert main(["index", str(source), "--index", str(tmp_path / "cli"), *flags, "--no-passage-vectors"]) == 0
    assert "no passage vectors saved" in capsys.readouterr().out and open_index(tmp_path / "cli")._data.pieces is None
    assert main(["index", str(source), "--index", str(tmp_path / "cli2"), *flags]) == 0
    assert "passage pieces: " in capsys.readouterr().out and open_index(tmp_path / "cli2")._data.pieces is not None


def test_pieces_saved_under_another_rule_are_read_as_absent(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    dense_build(tmp_path / "index", model, DOCS)
    _, folder = saved_version(tmp_path / "index")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["pieces"]["max_words"] = 60  # a longembed whose windows are shorter
    (folder / "manifest.json").write_text(json.dumps(manifest))
    index = open_index(tmp_path / "index")
    assert index._data.pieces is None and index.search("foxes", k=2).results  # embedded at search time


def test_a_rebuild_over_damaged_saved_pieces_embeds_them_all_again(tmp_path: Path) -> None:
    model = build_tiny("bert", tmp_path / "bert")
    first = dense_build(tmp_path / "index", model, DOCS)
    _, folder = saved_version(tmp_path / "index")
    (folder / PIECE_VECTORS).write_bytes(b"\x93NUMPY cut")
    second = dense_build(tmp_path / "index", model, MORE)
    assert second.pieces.reused == 0 and second.pieces.embedded > first.pieces.embedded
    assert open_index(tmp_path / "index")._data.pieces.count == second.pieces.embedded


def test_pieces_saved_under_the_line_rule_are_still_shown_and_a_rebuild_splits_the_documents_anew(
        tmp_path: Path, monkeypatch) -> None:
    """An index built when every line break ended a piece (``longembed-pieces/1``): its saved pieces are real
    spans with their own vectors, so a search still chooses from them without the model; a rebuild does not
    keep them (they would mix two rules in one index) but splits every document by today's rule."""
    model = build_tiny("bert", tmp_path / "bert")
    dense_build(tmp_path / "index", model, DOCS)
    _, folder = saved_version(tmp_path / "index")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["pieces"]["format"] == PIECES_FORMAT == "longembed-pieces/2"
    manifest["pieces"]["format"] = "longembed-pieces/1"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    index = open_index(tmp_path / "index")
    assert index._data.pieces is not None and index._data.pieces.rule == "longembed-pieces/1"
    seen = counting_encodes(monkeypatch)
    result = index.search("foxes", k=2, passages="query").results[0]
    spans, _ = index._data.pieces.of(index._data.doc_ids.index(result.id))
    assert seen == [] or seen == ["foxes"]  # the query at most (the saved query program may serve it): no piece
    assert result.passage.start in spans[:, 0] and result.passage.end in spans[:, 1]  # a window of saved pieces
    rebuilt = dense_build(tmp_path / "index", model, DOCS)
    assert rebuilt.pieces.reused == 0 and rebuilt.pieces.embedded == sum(len(document_pieces(d.text)) for d in DOCS)
    _, folder = saved_version(tmp_path / "index")
    assert json.loads((folder / "manifest.json").read_text())["pieces"]["format"] == PIECES_FORMAT
    assert open_index(tmp_path / "index")._data.pieces.rule == PIECES_FORMAT


def test_the_build_streams_the_vectors_in_blocks_into_the_same_files_the_whole_table_gives(
        tmp_path: Path, monkeypatch) -> None:
    """The end of a build reads the table's vectors :data:`READ_ROWS` rows at a time into the saved file;
    every saved file is byte for byte what the whole table read into memory gives (after a delete and an
    append), and the blocks land where any order of the rows puts them."""
    model = build_tiny("bert", tmp_path / "bert")
    index = tmp_path / "index"
    changed = [DOCS[5], *DOCS[:5], Document(DOCS[7].id, DOCS[7].source, "other words now"), *DOCS[8:]]
    dense_build(index, model, DOCS)
    dense_build(index, model, changed)  # d7 deleted and appended again: its rows after d11's
    table = IndexStore(index).complete_table()
    monkeypatch.setattr(table_snapshot, "READ_ROWS", 7)  # blocks that cut documents
    streamed, whole = tmp_path / "streamed", tmp_path / "whole"
    streamed.mkdir()
    whole.mkdir()
    write_snapshot(version_snapshot(table, index, "then", streamed / VECTORS), streamed)
    write_snapshot(snapshot_of_rows(table.to_arrow(), int(table.version), "then", table_metadata(table, index),
                                    version_snapshot(table, index, "then").ann), whole)
    files = sorted(p.relative_to(streamed) for p in streamed.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(whole) for p in whole.rglob("*") if p.is_file()) and Path(VECTORS) in files
    for name in files:
        assert (streamed / name).read_bytes() == (whole / name).read_bytes(), name
    vectors = np.asarray(table.to_arrow()["vector"].to_pylist(), dtype=np.float32)
    assert len(vectors) > 2 * 7
    order = np.random.default_rng(0).permutation(len(vectors))
    np.testing.assert_array_equal(table_snapshot._vector_reader(table, tmp_path / "any.npy")(order), vectors[order])
