"""Damage to the files an index saves per version (``versions/...``, ``complete.json``) is one line or a
search of the table that says which file is missing, never a traceback; a rerun of the build saves them anew.

Found by issue 51's probe rerun after issue 53: a dense index whose ``vectors.npy`` was deleted failed every
search with an AssertionError, a missing file was reported as "built before longembed saved" its files,
and unreadable files pointed only at ``--rebuild`` (everything embedded again) where a rerun suffices.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from conftest import build_tiny, words
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longembed.errors import UserError
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.sources import Document
from longembed.search.store import IndexStore, table_metadata
from longembed.search.version_files import POINTER, VERSIONS_DIR, saved_version

DOCS = [Document(f"d{i}.txt", f"d{i}.txt", words(30 + 5 * i, i) + (" foxes and dogs" if i % 3 == 0 else ""))
        for i in range(8)]
FOXES = {"d0.txt", "d3.txt", "d6.txt"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A hybrid index (a tiny model's chunk vectors and BM25), so that every kind of saved file exists."""
    folder = tmp_path_factory.mktemp("hybrid")
    model = build_tiny("bert", folder / "bert")
    index = folder / "index"
    build(index, Strategy(str(model), granularity="chunks", chunking="tokens:16", late=False, fuse="bm25"))
    return index


def build(index: Path, strategy: Strategy | None = None) -> None:
    """Build ``index`` of DOCS; without a strategy, rerun with the one its table records."""
    if strategy is None:
        strategy = Strategy.from_dict(table_metadata(IndexStore(index).complete_table(), index)["config"])
    build_index(index, DOCS, strategy, show_progress=False, log=None)


def copy(pristine: Path, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    return index


def saved_file(index: Path, name: str) -> Path:
    return saved_version(index)[1] / name


def one_line(error: BaseException, index: Path) -> str:
    message = str(error)
    assert "\n" not in message and str(index) in message, message
    return message


def test_a_missing_vectors_file_searches_the_table_and_names_the_file(pristine: Path, tmp_path: Path) -> None:
    index = copy(pristine, tmp_path)
    expected = [r.id for r in open_index(index).search("foxes", k=3).results]
    saved_file(index, "vectors.npy").unlink()
    with pytest.warns(UserWarning, match=r"incomplete \(vectors\.npy of version .* is missing\).*nothing is embedded"):
        opened = open_index(index)
    assert [r.id for r in opened.search("foxes", k=3).results] == expected


def test_a_missing_version_folder_is_not_called_an_old_index(pristine: Path, tmp_path: Path) -> None:
    index = copy(pristine, tmp_path)
    shutil.rmtree(index / VERSIONS_DIR)
    with pytest.warns(UserWarning, match=r"incomplete \(the folder of the version complete\.json names is missing\)"):
        assert open_index(index).search("foxes", k=1).results[0].id in FOXES


def test_an_unreadable_saved_file_names_a_rerun_and_a_rerun_saves_it_anew(pristine: Path, tmp_path: Path) -> None:
    index = copy(pristine, tmp_path)
    target = saved_file(index, "documents.arrow")
    target.write_bytes(bytes(target.stat().st_size))
    with pytest.raises(UserError) as error:
        open_index(index)
    assert "with the same sources and --index" in one_line(error.value, index)
    assert "--rebuild" in str(error.value)
    build(index)  # nothing changed: nothing embedded, the version's files saved again from the table
    assert open_index(index).search("foxes", k=1).results[0].id in FOXES



def test_a_zeroed_array_header_is_one_line(pristine: Path, tmp_path: Path) -> None:
    index = copy(pristine, tmp_path)
    target = saved_file(index, "bm25/indices.csc.index.npy")
    raw = target.read_bytes()
    target.write_bytes(raw[:57] + bytes(len(raw) - 57))  # numpy's header parser raises TokenError
    with pytest.raises(UserError) as error:
        open_index(index)
    assert "with the same sources" in one_line(error.value, index)


def test_a_document_text_that_is_not_utf8_is_one_line_when_shown(pristine: Path, tmp_path: Path) -> None:
    index = copy(pristine, tmp_path)
    target = saved_file(index, "documents.arrow")
    raw = target.read_bytes()
    target.write_bytes(raw.replace(b"foxes", b"\xffoxes", 1))  # the texts are read when a result is shown
    with pytest.raises(UserError) as error:
        open_index(index).search("foxes", k=len(DOCS))
    assert "not UTF-8" in one_line(error.value, index)

@pytest.mark.slow  # about 15 s an example: a build and a rerun each
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_to_the_saved_files_is_one_line_or_harmless_and_a_rerun_repairs_it(
        pristine: Path, tmp_path_factory, data) -> None:
    index = tmp_path_factory.mktemp("damaged") / "index"
    shutil.copytree(pristine, index)
    targets = sorted(p for p in [index / POINTER, *(index / VERSIONS_DIR).rglob("*")] if p.is_file())
    target = data.draw(st.sampled_from(targets), label="file")
    raw = target.read_bytes()
    how = data.draw(st.sampled_from(["cut", "zero", "flip", "delete"]), label="damage")
    start = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
    if how == "cut":
        target.write_bytes(raw[:start])
    elif how == "zero":
        target.write_bytes(raw[:start] + bytes(len(raw) - start))
    elif how == "flip":
        target.write_bytes(raw[:start] + bytes([raw[start] ^ 0xFF]) + raw[start + 1:] if raw else b"\xff")
    else:
        target.unlink()
    try:
        with warnings.catch_warnings():  # a missing file: the table is searched, with a warning
            warnings.simplefilter("ignore")
            open_index(index).search("foxes", k=3)
    except UserError as exc:
        one_line(exc, index)
    build(index)  # a rerun with the same sources saves the version's files anew
    assert open_index(index).search("foxes", k=1).results[0].id in FOXES

