"""A served index follows its builds (``serve --index --follow-seconds``, SIGHUP): it moves to each new
complete version between searches, never to a half-built one, and keeps serving when a check fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import lancedb
from conftest import words

from longembed.retrieval.strategy import BM25, Strategy
from longembed.search.build import build_index
from longembed.search.following import FollowingIndex
from longembed.search.sources import Document


def documents(n: int) -> list[Document]:
    return [Document(f"doc{i:03d}", f"doc{i:03d}.txt", words(30, i)) for i in range(n)]


def build(index: Path, n: int) -> None:
    build_index(index, documents(n), Strategy(BM25), show_progress=False, log=None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_it_moves_to_a_complete_build_when_a_check_is_due_or_requested(tmp_path: Path) -> None:
    index, clock, said = tmp_path / "index", Clock(), []
    build(index, 3)
    following = FollowingIndex(index, check_every=10, log=said.append, clock=clock)
    build(index, 5)
    assert following.search(words(3, 1), k=10).index["documents"] == 3  # no check due yet
    clock.now = 10
    assert following.search(words(3, 1), k=10).index["documents"] == 5
    assert len(said) == 1 and said[0].startswith(f"{index}: now searching version")
    build(index, 6)
    only_on_request = FollowingIndex(index, check_every=None, log=said.append, clock=clock)
    build(index, 7)
    clock.now = 10_000
    assert only_on_request.search(words(3, 1), k=10).index["documents"] == 6
    only_on_request.request_check()  # what SIGHUP does
    assert only_on_request.search(words(3, 1), k=10).index["documents"] == 7


def test_a_half_built_version_is_never_searched(tmp_path: Path) -> None:
    index = tmp_path / "index"
    build(index, 4)
    following = FollowingIndex(index, check_every=0, log=None)
    lancedb.connect(str(index)).open_table("chunks").delete("id = 'doc000'")  # a build in progress
    assert not following.refresh()
    assert following.search(words(3, 1), k=10).index["documents"] == 4


def test_a_failed_check_keeps_the_served_version_and_says_why(tmp_path: Path) -> None:
    index, said = tmp_path / "index", []
    build(index, 4)
    following = FollowingIndex(index, check_every=0, log=said.append)
    shutil.rmtree(index / "chunks.lance" / "_versions")  # the store no longer reads as an index
    assert following.search(words(3, 1), k=10).index["documents"] == 4
    assert len(said) == 1 and "could not check for a new version" in said[0] and "version" in said[0]


def test_it_moves_to_a_rebuild_whose_table_restarted_at_the_served_version_number(tmp_path: Path) -> None:
    """``--rebuild`` starts the table's version numbers again: the pointer's name tells the new build apart."""
    index, said = tmp_path / "index", []
    build(index, 5)
    following = FollowingIndex(index, check_every=0, log=said.append)
    served = following.version
    build_index(index, documents(3), Strategy(BM25), rebuild=True, show_progress=False, log=None)
    response = following.search(words(3, 1), k=10)
    assert following.version == served and response.index["documents"] == 3  # the same number, the new build
    assert len(said) == 1 and "now searching version" in said[0]
