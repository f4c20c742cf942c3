"""Files longembed writes follow the umask, as ordinary file creation does (issue 23: results.json, cache
parts and parquet shards came out -rw------- whatever the umask, unreadable on a shared filesystem).

Parquet shards are checked in test_corpus.py (they need pyarrow)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from longembed.evaluation.cache.storage import EmbeddingCache, text_key
from longembed.permissions import current_umask
from longembed.results.files import atomic_write_bytes, write_json

UMASKS = [0o022, 0o002, 0o027, 0o077]


@pytest.fixture(params=UMASKS, ids=[f"umask{m:03o}" for m in UMASKS])
def umask(request) -> int:
    """The process umask set to the parameter for the test, then restored."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def plain_file_mode(folder: Path) -> int:
    """The mode ``open(path, "w")`` gives a new file under the current umask: the reference."""
    reference = folder / "made-by-open"
    reference.write_text("x")
    return mode(reference)


def test_current_umask_reads_without_changing_it(umask) -> None:
    assert current_umask() == umask
    assert os.umask(umask) == umask  # still what was set


def test_atomic_writes_get_the_mode_open_gives(umask, tmp_path) -> None:
    expected = plain_file_mode(tmp_path)
    assert expected == 0o666 & ~umask
    target = tmp_path / "vectors.npy"
    atomic_write_bytes(target, lambda handle: np.save(handle, np.zeros(3)))
    assert mode(target) == expected
    results = write_json(tmp_path / "run" / "results.json", {"format": "x"})
    assert mode(results) == expected


def test_cache_parts_get_the_mode_open_gives(umask, tmp_path) -> None:
    expected = plain_file_mode(tmp_path)
    namespace = EmbeddingCache(tmp_path / "cache").namespace({"model": "x"})
    namespace.add("task/256/documents", [text_key("a text")], np.ones((1, 4), dtype=np.float32), [2])
    written = [p for p in namespace.path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"fingerprint.json"} and any(p.suffix == ".npz" for p in written)
    assert {p.name: mode(p) for p in written} == {p.name: expected for p in written}
