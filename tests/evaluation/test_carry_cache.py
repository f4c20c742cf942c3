"""benchmarks/carry_cache.py: cached vectors carried to the namespace of new code, and merged into one
that a run under the new code had started."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_benchmark_script

from longembed.evaluation.cache.storage import EmbeddingCache, text_key

OLD, NEW = "old-code", "new-code"


@pytest.fixture(scope="module")
def carry_cache():
    return load_benchmark_script("carry_cache")


def fingerprint(code: str) -> dict:
    return {"code": code, "model": "m", "method": "pi", "max_length": 4096}


def vectors(texts: list[str]) -> np.ndarray:
    return np.stack([np.full(4, float(len(t)), dtype=np.float32) for t in texts])


def add(cache: EmbeddingCache, code: str, shard: str, texts: list[str]) -> None:
    cache.namespace(fingerprint(code)).add(shard, [text_key(t) for t in texts], vectors(texts), [len(t) for t in texts])


def cached(cache: EmbeddingCache, code: str, shard: str) -> dict[str, np.ndarray]:
    return EmbeddingCache(cache.root).namespace(fingerprint(code)).load(shard).vectors


def test_carry_links_a_new_namespace_and_leaves_an_existing_one_unless_merge(carry_cache, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    add(cache, OLD, "passkey/4096/documents", ["a", "bb"])
    add(cache, OLD, "passkey/4096/documents", ["ccc"])
    add(cache, OLD, "passkey/4096/queries", ["q"])
    add(cache, NEW, "passkey/4096/documents", ["bb", "dddd"])  # a run under the new code had started

    assert carry_cache.carry(tmp_path, OLD, NEW, dry_run=False) == []  # without merge: left alone
    assert set(cached(cache, NEW, "passkey/4096/documents")) == {text_key("bb"), text_key("dddd")}

    key = cache.namespace(fingerprint(NEW)).key
    assert carry_cache.carry(tmp_path, OLD, NEW, dry_run=True, merge=True) == [(cache.namespace(fingerprint(OLD)).key, key)]
    assert set(cached(cache, NEW, "passkey/4096/documents")) == {text_key("bb"), text_key("dddd")}  # dry run

    carry_cache.carry(tmp_path, OLD, NEW, dry_run=False, merge=True)
    documents = cached(cache, NEW, "passkey/4096/documents")
    assert set(documents) == {text_key(t) for t in ("a", "bb", "ccc", "dddd")}
    for text in ("a", "bb", "ccc", "dddd"):
        np.testing.assert_array_equal(documents[text_key(text)], vectors([text])[0])
    assert set(cached(cache, NEW, "passkey/4096/queries")) == {text_key("q")}
    assert carry_cache.carry(tmp_path, OLD, NEW, dry_run=False, merge=True) == []  # nothing left to link


def test_carry_into_no_namespace_copies_every_part_and_the_new_fingerprint(carry_cache, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    add(cache, OLD, "needle/1024/documents", ["x", "yy"])
    add(cache, "other-code", "needle/1024/documents", ["z"])
    [(old, new)] = carry_cache.carry(tmp_path, OLD, NEW, dry_run=False)
    assert new == cache.namespace(fingerprint(NEW)).key and (tmp_path / old).is_dir()
    assert set(cached(cache, NEW, "needle/1024/documents")) == {text_key("x"), text_key("yy")}
    assert '"code": "new-code"' in (tmp_path / new / "fingerprint.json").read_text()
