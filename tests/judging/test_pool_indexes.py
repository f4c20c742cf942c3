"""The pool's indexes (longembed.judging.indexes): a hybrid built after its dense twin embeds nothing, neither
its chunks nor its passage pieces (the document encoders are counted), and holds the very vectors the
twin's build computed, which are those a build of its own computes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import words

from longembed.judging.indexes import build_pool_indexes, pool_candidates
from longembed.search import embedding, piece_vectors
from longembed.search.snapshot import read_snapshot
from longembed.search.sources import Document
from longembed.search.version_files import saved_version

pytestmark = pytest.mark.slow  # three small index builds: a few seconds

DENSE, HYBRID = "naive-chunks", "naive-chunks+bm25"


def count_calls(monkeypatch: pytest.MonkeyPatch, calls: Counter, module, name: str) -> None:
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)


def saved(index: Path):
    return read_snapshot(saved_version(index)[1])


def test_a_hybrid_takes_its_dense_twins_vectors_and_pieces(tiny_models, tmp_path: Path, monkeypatch) -> None:
    documents = [Document(f"d{i}.txt", f"d{i}.txt", f"{words(40, i)}. {words(30, i + 9)}. {words(12, i + 20)}.")
                 for i in range(4)]
    model = str(tiny_models["bert"])
    dense, hybrid = pool_candidates(model, [DENSE, HYBRID], "tokens:16")
    calls: Counter = Counter()
    for module, name in ((embedding, "encode_chunk_inputs"), (embedding, "encode_inputs"),
                         (piece_vectors, "encode_pieces")):
        count_calls(monkeypatch, calls, module, name)
    pooled = tmp_path / "pool"
    build_pool_indexes(documents, [dense], pooled, say=lambda _: None)
    twin_calls = dict(calls)
    assert twin_calls["encode_chunk_inputs"] > 0 and twin_calls["encode_pieces"] > 0
    build_pool_indexes(documents, [dense, hybrid], pooled, say=lambda _: None)
    assert dict(calls) == twin_calls  # the hybrid encoded no document, no piece

    alone = tmp_path / "alone"
    build_pool_indexes(documents, [hybrid], alone, say=lambda _: None)  # no twin there: embedded
    assert calls["encode_chunk_inputs"] > twin_calls["encode_chunk_inputs"]
    took, twin, own = saved(pooled / HYBRID), saved(pooled / DENSE), saved(alone / HYBRID)
    assert took.bm25 is not None and twin.bm25 is None
    np.testing.assert_array_equal(took.vectors, twin.vectors)
    np.testing.assert_allclose(took.vectors, own.vectors, atol=1e-5)
    np.testing.assert_array_equal(took.pieces.vectors, twin.pieces.vectors)
    np.testing.assert_allclose(took.pieces.vectors, own.pieces.vectors, atol=1e-5)
    np.testing.assert_array_equal(took.pieces.offsets, own.pieces.offsets)
