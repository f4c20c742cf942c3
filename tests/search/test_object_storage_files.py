"""An index on S3 opens as cheaply as on disk (issue 53): a build uploads each version's files (BM25,
vectors, spans, passage pieces, query program) and puts the pointer last; a search downloads them once
into its cache (a killed download never used, a damaged copy downloaded again) and opens them as a local
index's, never reading the table's rows; a rebuild moves the pointer, the old version's objects go, and a
following index fetches the new one before it switches.  Against a real ``moto_server`` on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import boto3
import numpy as np
import pytest
from conftest import build_tiny, words

import longembed.search
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.following import FollowingIndex
from longembed.search.object_files import S3Objects
from longembed.search.snapshot import BM25_DIR, MANIFEST, PIECE_VECTORS, VECTORS
from longembed.search.sources import Document
from longembed.search.version_files import CACHE_ENV, POINTER, cache_folder, pointed_name

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def hybrid(model: Path) -> Strategy:
    """Chunks of a tiny model fused with BM25: every kind of saved file exists."""
    return Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=True, fuse="bm25")


def documents(n: int, seed: int = 0) -> list[Document]:
    return [Document(f"doc{i:04d}", f"doc{i:04d}.txt", words(40 + i % 7, seed + i) + (" foxes" if i % 3 == 0 else ""))
            for i in range(n)]


def keys(uri: str) -> list[str]:
    """Every object key under the index's prefix, relative to it."""
    parsed = urlparse(uri)
    prefix = parsed.path.strip("/") + "/"
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=parsed.netloc, Prefix=prefix)
    return sorted(o["Key"][len(prefix):] for page in pages for o in page.get("Contents", []))


def another_machine(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    """An empty download cache, as a server on another machine starts with."""
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@contextmanager
def no_table_reads() -> Iterator[None]:
    """Opening reads no table row and indexes no corpus with BM25 (a passage's windows are scored by it)."""
    def refuse(path):
        raise AssertionError(f"{path}: read every row of the table")

    def refuse_index(self, corpus):
        if len(corpus) > 50:  # passage windows: a few per result; the corpus: every document
            raise AssertionError("BM25 indexed the corpus again")
        return original(self, corpus)

    original = BM25Model.index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(longembed.search, "read_table_snapshot", refuse)
        patch.setattr(BM25Model, "index", refuse_index)
        yield


def answers(index) -> list[dict]:
    return [index.search(q, k=5).to_dict()["results"] for q in ("foxes", words(5, 3), words(3, 11))]


def rankings(index) -> list[list[tuple[str, int, int]]]:
    """Each query's results: their ids and passages' spans (the scores may differ in the last bits
    between the model and the saved query program)."""
    return [[(r["id"], r["passage"]["start"], r["passage"]["end"]) for r in results] for results in answers(index)]


def test_a_search_on_s3_opens_the_saved_files_from_its_cache_and_answers_as_on_disk(
        model: Path, s3_index: str, tmp_path: Path, monkeypatch) -> None:
    docs = documents(60)
    build_index(s3_index, docs, hybrid(model), show_progress=False, log=None)
    build_index(tmp_path / "disk", docs, hybrid(model), show_progress=False, log=None)
    name = pointed_name(s3_index)
    stored = keys(s3_index)
    assert POINTER in stored
    for file in (MANIFEST, VECTORS, PIECE_VECTORS, f"{BM25_DIR}/params.index.json", "query_program/program.pt"):
        assert f"versions/{name}/{file}" in stored, file
    cache = another_machine(monkeypatch, tmp_path / "elsewhere")
    with no_table_reads(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback, no warning
        on_s3 = open_index(s3_index)
    folder = cache_folder(s3_index) / name
    assert folder.is_relative_to(cache) and (folder / VECTORS).is_file() and (folder / PIECE_VECTORS).is_file()
    assert isinstance(on_s3._data.vectors, np.memmap) and on_s3._program is not None
    assert answers(on_s3) == answers(open_index(tmp_path / "disk"))


def test_a_second_open_reads_the_cache_and_downloads_nothing(model: Path, s3_index: str, monkeypatch) -> None:
    build_index(s3_index, documents(12), hybrid(model), show_progress=False, log=None)
    open_index(s3_index)

    def no_download(self, key, file):
        raise AssertionError(f"downloaded {key} again")

    monkeypatch.setattr(S3Objects, "download", no_download)
    assert open_index(s3_index).search("foxes", k=3).results[0].id in {"doc0000", "doc0003", "doc0006", "doc0009"}


KILLED_OPEN = """
import sys, time
from longembed.search import object_files
from longembed.search.index import open_index
original = object_files.S3Objects.download
def slow(self, key, file):
    original(self, key, file)
    print("downloaded", key, flush=True)
    time.sleep(120)
object_files.S3Objects.download = slow
open_index(sys.argv[1])
"""


def test_a_killed_download_is_never_used_and_the_next_open_downloads_it_whole(
        model: Path, s3_index: str, tmp_path: Path, monkeypatch) -> None:
    build_index(s3_index, documents(12), hybrid(model), show_progress=False, log=None)
    expected = answers(open_index(s3_index))
    cache = another_machine(monkeypatch, tmp_path / "elsewhere")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-c", KILLED_OPEN, s3_index], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().startswith("downloaded"), process.stderr.read()
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    root = cache_folder(s3_index)
    left = [p.name for p in root.iterdir()]
    assert len(left) == 1 and left[0].startswith(".downloading-")  # half a version, under a temporary name
    with no_table_reads():
        assert answers(open_index(s3_index)) == expected
    assert [p.name for p in root.iterdir()] == [pointed_name(s3_index)]  # the dead download removed
    assert root.is_relative_to(cache)


def test_a_download_cut_short_is_not_used_the_table_is_searched_with_a_warning(
        model: Path, s3_index: str, monkeypatch) -> None:
    build_index(s3_index, documents(12), hybrid(model), show_progress=False, log=None)
    expected = rankings(open_index(s3_index))
    shutil.rmtree(cache_folder(s3_index))
    original = S3Objects.download

    def cut(self, key, file):
        original(self, key, file)
        if key.endswith(f"/{VECTORS}"):
            file.write_bytes(file.read_bytes()[:-100])

    monkeypatch.setattr(S3Objects, "download", cut)
    with pytest.warns(UserWarning, match=r"incomplete \(vectors\.npy of version .* is missing\)"):
        opened = open_index(s3_index)
    assert list(cache_folder(s3_index).iterdir()) == []  # nothing cached
    assert rankings(opened) == expected


@pytest.mark.parametrize("damage", ["cut", "zeroed header"])
def test_a_damaged_cached_file_is_downloaded_again_with_a_warning(model: Path, s3_index: str, damage: str) -> None:
    build_index(s3_index, documents(12), hybrid(model), show_progress=False, log=None)
    expected = answers(open_index(s3_index))
    target = cache_folder(s3_index) / pointed_name(s3_index) / BM25_DIR / "indices.csc.index.npy"
    raw = target.read_bytes()
    if damage == "cut":
        target.write_bytes(raw[: len(raw) // 2])
        match = "cached copy of version .* is damaged .*downloaded again"
    else:
        target.write_bytes(raw[:57] + bytes(len(raw) - 57))  # the same size: found when it is read
        match = "cached copy of version .* cannot be read .*downloaded again"
    with pytest.warns(UserWarning, match=match):
        opened = open_index(s3_index)
    assert target.read_bytes() == raw
    assert answers(opened) == expected


def test_a_rebuild_moves_the_pointer_removes_the_old_version_and_a_following_index_fetches_it(
        model: Path, s3_index: str, tmp_path: Path, monkeypatch) -> None:
    build_index(s3_index, documents(5), hybrid(model), show_progress=False, log=None)
    another_machine(monkeypatch, tmp_path / "server")
    said: list[str] = []
    following = FollowingIndex(s3_index, check_every=0, log=said.append)
    first = following.current.saved_name
    assert first == pointed_name(s3_index)
    # --rebuild starts the table's version numbers again: the same number as the served one, other files
    build_index(s3_index, documents(5, seed=100), hybrid(model), rebuild=True, show_progress=False, log=None)
    second = pointed_name(s3_index)
    assert second != first and second.split("-")[0] == first.split("-")[0]
    assert {k.split("/")[1] for k in keys(s3_index) if k.startswith("versions/")} == {second}
    with no_table_reads():
        response = following.search(words(4, 101), k=5)
    assert following.current.saved_name == second and len(said) == 1 and "now searching version" in said[0]
    assert [p.name for p in cache_folder(s3_index).iterdir()] == [second]
    fresh = open_index(s3_index).search(words(4, 101), k=5)  # the saved query program, not the model
    assert [r.id for r in response.results] == [r.id for r in fresh.results]
    assert [r.passage for r in response.results] == [r.passage for r in fresh.results]


def test_an_index_built_before_its_files_were_saved_on_s3_says_so_and_a_rerun_saves_them(
        model: Path, s3_index: str, monkeypatch) -> None:
    docs = documents(8)
    build_index(s3_index, docs, hybrid(model), show_progress=False, log=None)
    S3Objects(s3_index).delete([k for k in keys(s3_index) if k == POINTER or k.startswith("versions/")])
    shutil.rmtree(cache_folder(s3_index))
    with pytest.warns(UserWarning, match="built before longembed saved what a search opens"):
        expected = rankings(open_index(s3_index))  # queries embedded by the model, not the saved program
    report = build_index(s3_index, docs, hybrid(model), show_progress=False, log=None)
    assert report.plan.counts()["unchanged"] == 8 and report.encoded == 0
    with no_table_reads():
        assert rankings(open_index(s3_index)) == expected
