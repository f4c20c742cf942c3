"""Tests of the embedding cache (longembed.evaluation.cache)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import longembed.evaluation.cache as cache_package
from longembed.evaluation.cache.storage import (
    EmbeddingCache,
    canonical_json,
    default_cache_dir,
    fingerprint_key,
    text_key,
)
from longembed.evaluation.cache.wrapper import CachedEncoder, encode_cached, plan_chunks
from longembed.results.files import atomic_write_bytes, atomic_write_text


def test_the_cache_is_one_package_with_one_public_class() -> None:
    """One cache, one name: CachedEncoder (the wrapper, as mteb's cache is); the storage and the encode loop
    are its modules, and the three old sibling modules are gone."""
    assert cache_package.__all__ == ["CachedEncoder"] and cache_package.CachedEncoder is CachedEncoder
    for old in ("cached_encoder", "cached_encoding"):
        assert importlib.util.find_spec(f"longembed.evaluation.{old}") is None
    assert importlib.util.find_spec("longembed.evaluation.cache").submodule_search_locations  # a package


def fake_vectors(texts: list[str], dim: int = 8) -> np.ndarray:
    """Deterministic vectors from the texts' hashes (what a model would give, without one)."""
    rows = [np.frombuffer(bytes.fromhex(text_key(t))[:dim], dtype=np.uint8).astype(np.float32) for t in texts]
    return np.stack(rows)


class Recorder:
    """encode() stand-in that records every call and can fail after a number of texts."""

    def __init__(self, fail_after: int | None = None):
        self.calls: list[list[str]] = []
        self.fail_after = fail_after

    @property
    def n_texts(self) -> int:
        return sum(len(c) for c in self.calls)

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.n_texts + len(texts) > self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.calls.append(list(texts))
        return fake_vectors(texts)


def word_count(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def test_default_cache_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LONGEMBED_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("LONGEMBED_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "longembed" / "embeddings"


def test_fingerprint_key_is_order_independent_and_sensitive() -> None:
    a = {"prompt": "q: ", "temperature": 1.0, "config": {"method": "pi", "max_length": 4096}}
    b = {"config": {"max_length": 4096, "method": "pi"}, "temperature": 1.0, "prompt": "q: "}
    assert canonical_json(a) == canonical_json(b)
    assert fingerprint_key(a) == fingerprint_key(b)
    assert fingerprint_key(a) != fingerprint_key({**a, "temperature": 0.9})
    assert fingerprint_key(a) != fingerprint_key({**a, "prompt": ""})


@pytest.mark.parametrize("chunk_size,chunk_chars", [(3, 10**9), (64, 25), (4, 12)])
def test_plan_chunks_covers_everything_and_resumes_on_the_same_boundaries(
    chunk_size: int, chunk_chars: int
) -> None:
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(1, 20, size=40)]
    chunks = plan_chunks(lengths, chunk_size, chunk_chars)
    assert chunks[0][0] == 0 and chunks[-1][1] == len(lengths)
    assert all(prev[1] == nxt[0] for prev, nxt in zip(chunks, chunks[1:], strict=False))
    for start, end in chunks:
        assert 1 <= end - start <= chunk_size
        assert end - start == 1 or sum(lengths[start:end]) <= chunk_chars
    # A run killed after k chunks re-plans the rest: the same chunks, shifted.
    for k in range(len(chunks)):
        start = chunks[k][0]
        rest = plan_chunks(lengths[start:], chunk_size, chunk_chars)
        assert [(s + start, e + start) for s, e in rest] == chunks[k:]


def test_add_load_roundtrip_and_compaction(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    ns = cache.namespace({"model": "x"})
    texts = [f"text {i}" for i in range(10)]
    keys = [text_key(t) for t in texts]
    ns.add("task/256/documents", keys[:6], fake_vectors(texts[:6]), list(range(6)))
    ns.add("task/256/documents", keys[6:], fake_vectors(texts[6:]), list(range(6, 10)))
    shard_dir = ns.path / "task" / "256" / "documents"
    assert len(list(shard_dir.glob("part-*.npz"))) == 2
    assert json.loads((ns.path / "fingerprint.json").read_text()) == {"model": "x"}

    fresh = EmbeddingCache(tmp_path).namespace({"model": "x"})  # a new process: reads from disk
    entries = fresh.load("task/256/documents")
    assert len(entries) == 10
    np.testing.assert_array_equal(entries.vectors[keys[7]], fake_vectors([texts[7]])[0])
    assert entries.tokens[keys[7]] == 7

    fresh.compact("task/256/documents")
    assert len(list(shard_dir.glob("part-*.npz"))) == 1
    again = EmbeddingCache(tmp_path).namespace({"model": "x"}).load("task/256/documents")
    assert sorted(again.vectors) == sorted(keys)
    assert list(fresh.shards()) == ["task/256/documents"]
    assert not list(shard_dir.glob(".tmp-*"))  # no temporary files left behind


def test_other_fingerprint_sees_nothing(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.namespace({"t": 1.0}).add("s", [text_key("a")], fake_vectors(["a"]), [1])
    assert len(cache.namespace({"t": 0.5}).load("s")) == 0
    assert len(cache.namespace({"t": 1.0}).load("s")) == 1


def test_invalid_shard_names_are_rejected(tmp_path: Path) -> None:
    ns = EmbeddingCache(tmp_path).namespace({})
    for bad in ("", "../escape", "a/../../b"):
        with pytest.raises(ValueError):
            ns.load(bad)


def test_unreadable_part_is_skipped_not_fatal(tmp_path: Path) -> None:
    ns = EmbeddingCache(tmp_path).namespace({"m": 1})
    ns.add("s", [text_key("a")], fake_vectors(["a"]), [1])
    (ns.path / "s" / "part-garbage.npz").write_bytes(b"not a zip file")
    entries = EmbeddingCache(tmp_path).namespace({"m": 1}).load("s")
    assert list(entries.vectors) == [text_key("a")]


def test_a_part_whose_content_does_not_match_its_name_is_not_used(tmp_path: Path) -> None:
    """Valid but altered vectors in a part are refused (its name is a hash of its content)."""
    ns = EmbeddingCache(tmp_path).namespace({"m": 1})
    part = ns.add("s", [text_key("a"), text_key("b")], fake_vectors(["a", "b"]), [1, 2])
    with np.load(part) as data:
        keys, vectors, tokens = data["keys"], data["vectors"].copy(), data["tokens"]
    vectors[1, 0] += 1.0  # a plausible vector, but not the one that was stored
    with part.open("wb") as handle:
        np.savez(handle, keys=keys, vectors=vectors, tokens=tokens)
    assert len(EmbeddingCache(tmp_path).namespace({"m": 1}).load("s")) == 0
    recorder = Recorder()
    result = encode_cached(["a", "b"], recorder, word_count, EmbeddingCache(tmp_path).namespace({"m": 1}), "s")
    assert result.n_encoded == 2 and recorder.n_texts == 2  # re-encoded, not served from the altered part
    np.testing.assert_array_equal(result.vectors, fake_vectors(["a", "b"]))


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    atomic_write_text(target, "old")

    def boom(handle) -> None:
        handle.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write_bytes(target, boom)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_encode_cached_dedupes_and_keeps_order(tmp_path: Path) -> None:
    ns = EmbeddingCache(tmp_path).namespace({"m": 1})
    texts = ["b b", "a", "b b", "c c c", "a"]
    encode = Recorder()
    out = encode_cached(texts, encode, word_count, ns, "s", chunk_size=2)
    assert encode.n_texts == 3  # three distinct texts
    assert out.n_unique == 3 and out.n_encoded == 3 and out.n_cached == 0
    np.testing.assert_array_equal(out.vectors, fake_vectors(texts))
    assert out.tokens.tolist() == [2, 1, 2, 3, 1]
    # Longest first, so that a chunk holds texts of similar length.
    assert encode.calls[0] == ["c c c", "b b"]


def test_encode_cached_resumes_after_kill_and_warm_run_encodes_nothing(tmp_path: Path) -> None:
    texts = [f"document number {i} " + "word " * (i % 7) for i in range(50)]
    reference = encode_cached(texts, Recorder(), word_count, None, "s", chunk_size=8)  # no cache at all

    killed = Recorder(fail_after=20)
    with pytest.raises(KeyboardInterrupt):
        encode_cached(
            texts, killed, word_count, EmbeddingCache(tmp_path).namespace({"m": 1}), "s", chunk_size=8
        )
    assert killed.n_texts == 16  # two whole chunks were done, and written

    resumed = Recorder()
    out = encode_cached(
        texts, resumed, word_count, EmbeddingCache(tmp_path).namespace({"m": 1}), "s", chunk_size=8
    )
    assert resumed.n_texts == 50 - 16
    assert out.n_cached == 16 and out.n_encoded == 34
    np.testing.assert_array_equal(out.vectors, reference.vectors)
    np.testing.assert_array_equal(out.tokens, reference.tokens)

    warm = Recorder()
    out = encode_cached(
        texts, warm, word_count, EmbeddingCache(tmp_path).namespace({"m": 1}), "s", chunk_size=8
    )
    assert warm.n_texts == 0 and out.n_cached == 50
    np.testing.assert_array_equal(out.vectors, reference.vectors)


def test_encode_cached_reports_progress_per_text(tmp_path: Path) -> None:
    seen: list[int] = []
    encode_cached(["x", "y", "x", "z"], Recorder(), word_count, None, "s", chunk_size=2, progress=seen.append)
    assert sum(seen) == 4


def test_encode_cached_checks_the_number_of_vectors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="returned 1 vectors for 2 texts"):
        encode_cached(["a", "b"], lambda texts: fake_vectors(texts[:1]), word_count, None, "s")
