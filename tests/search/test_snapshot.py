"""Opening an index costs what the query needs (issue 53): BM25 is indexed once, at build time, and loaded
as saved; the vectors are a read-only memory map; an index built before snapshots were saved still opens;
a build killed before it tags its version leaves searches on the last complete one.
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
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.sources import Document
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
