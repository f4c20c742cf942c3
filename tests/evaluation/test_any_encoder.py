"""evaluate_model takes any encoder (issue 44): a plain sentence-transformers model, any object with
``encode``, a model that scores without vectors (BM25 or another), and a longembed encoder, whose cache
keys and provenance are what they were before the protocol shrank to ``encode`` plus one metadata."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from conftest import real_model_folder, require_package
from test_runner import TinyTask, run

from longembed import load_encoder
from longembed.config import EncoderConfig
from longembed.encoder_protocol import EncoderMetadata, ScorerMetadata, TextScorer
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.provenance import (
    cache_fingerprint,
    library_versions,
    model_identity,
    resolved_settings,
)
from longembed.retrieval.bm25 import BM25Model


def bag_of_words(texts: Sequence[str]) -> np.ndarray:
    """Unit bag-of-words vectors (crc32 buckets): a deterministic 'model' with no tokenizer."""
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().replace(".", " ").split():
            out[i, zlib.crc32(word.encode()) % 256] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class OnlyEncode:
    """An object with nothing but ``encode(texts)``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return bag_of_words(texts)


def expected_ndcg(queries: dict[str, str], corpus: dict[str, str], qrels: dict[str, dict[str, int]]) -> float:
    """nDCG@10 with one relevant document per query, computed here from the vectors: 1 / log2(rank + 1)."""
    doc_ids = list(corpus)
    doc_vectors = bag_of_words(list(corpus.values()))
    gains = []
    for qid, text in queries.items():
        scores = doc_vectors @ bag_of_words([text])[0]
        (relevant,) = qrels[qid]
        rank = 1 + int(np.sum(scores > scores[doc_ids.index(relevant)]))
        gains.append(1.0 / np.log2(rank + 1) if rank <= 10 else 0.0)
    return 100.0 * float(np.mean(gains))


def test_any_object_with_encode(tmp_path: Path) -> None:
    model = OnlyEncode()
    results = run(model, tmp_path, tasks=[TinyTask()])
    data = TinyTask().load(None)
    tiny = results.tasks["tiny"]
    # ties are possible in principle, not on this set: the score is the reference's
    assert tiny.score == pytest.approx(expected_ndcg(data.queries, data.corpus, data.qrels), abs=1e-3)
    assert results.config.encoder["model"].endswith("OnlyEncode")
    assert results.versions["model"] == {"name": "OnlyEncode", "files": None}  # no folder: run uncached
    assert set(model.seen) == set(data.queries.values()) | set(data.corpus.values())  # no prompt, none added


def test_a_prompt_its_encode_cannot_take_is_put_before_each_text(tmp_path: Path) -> None:
    class WithMetadata(OnlyEncode):
        metadata = EncoderMetadata(config=EncoderConfig(model="bag-of-words"), prompts={"query": "find: "})

    model = WithMetadata()
    results = run(model, tmp_path, tasks=[TinyTask()])
    queries = TinyTask().load(None).queries.values()
    assert {f"find: {q}" for q in queries} <= set(model.seen)
    assert results.config.prompts == {"query": "find: ", "document": ""}
    assert results.config.encoder["model"] == "bag-of-words"


@pytest.mark.slow
def test_a_plain_sentence_transformer(tmp_path: Path) -> None:
    st = require_package("sentence_transformers")
    folder = real_model_folder("all-MiniLM-L6-v2")
    plain = st.SentenceTransformer(str(folder), device="cpu")
    got = run(plain, tmp_path, "plain", tasks=[TinyTask()])
    reference = run(load_encoder(folder, method="truncate"), tmp_path, "longembed", tasks=[TinyTask()])
    # the same model on short texts: the same ranking, the same per-query scores
    assert got.tasks["tiny"].per_query == pytest.approx(reference.tasks["tiny"].per_query, abs=1e-6)
    assert got.config.resolved == {"method": "truncate", "position_scheme": "own", "original_length": 256,
                                   "max_length": 256, "pooling": "mean", "normalize": True}
    assert got.versions["model"]["files"]  # identified by its folder's files, so it is cached ...
    assert got.tasks["tiny"].cache.encoded == 18
    again = run(plain, tmp_path, "again", tasks=[TinyTask()])
    assert again.tasks["tiny"].cache.encoded == 0 and again.tasks["tiny"].cache.documents_cached == 12
    # ... apart from longembed's own vectors of the same folder (another position scheme in the key)
    assert got.config.cache_namespaces["queries"] != reference.config.cache_namespaces["queries"]


class WordOverlap:
    """A lexical model that is not BM25: the number of query words in the document."""

    metadata = ScorerMetadata(config={"model": "overlap"}, provenance={"name": "overlap"})

    def score(self, queries: Sequence[str], corpus: Sequence[str]) -> np.ndarray:
        docs = [set(d.lower().replace(".", " ").split()) for d in corpus]
        return np.array([[len(set(q.lower().split()) & d) for d in docs] for q in queries], dtype=np.float64)


def test_bm25_and_any_text_scorer_are_models_like_the_others(tmp_path: Path) -> None:
    assert isinstance(BM25Model(), TextScorer) and isinstance(WordOverlap(), TextScorer)
    bm25 = run(BM25Model(), tmp_path, "bm25", tasks=[TinyTask()])
    assert bm25.config.encoder == {"model": "bm25", "k1": 1.5, "b": 0.75, "variant": "lucene", "stopwords": "en",
                                   "stemmer": "snowball-english"}
    assert bm25.config.similarity == "bm25" and bm25.versions["model"]["name"] == "bm25"
    overlap = run(WordOverlap(), tmp_path, "overlap", tasks=[TinyTask()])
    assert overlap.config.encoder == {"model": "overlap"} and overlap.versions["model"] == {"name": "overlap"}
    assert overlap.config.similarity == "overlap" and overlap.tasks["tiny"].cache is None
    assert overlap.tasks["tiny"].score > 50  # each query names its document's topic word
    with pytest.raises(ValueError, match="overlap scores whole documents"):
        run(WordOverlap(), tmp_path, "chunks", tasks=[TinyTask()], granularity="chunks")


@pytest.fixture(scope="module")
def tiny_bert(tiny_models: dict[str, Path]):
    return load_encoder(tiny_models["bert"], method="pi", max_length=64, prompts={"query": "q: "})


def test_a_longembed_encoders_cache_key_and_provenance_are_unchanged(tiny_bert, tmp_path: Path) -> None:
    """The metadata is what the encoder declared member by member before: the fingerprint computed
    from it equals the one computed from the encoder itself (the old way), so the cache still hits."""
    cached = CachedEncoder(tiny_bert, tmp_path / "cache", show_progress=False, log=None)
    assert model_identity(cached.metadata) == model_identity(tiny_bert)
    assert resolved_settings(cached.metadata) == resolved_settings(tiny_bert)
    versions = library_versions()
    for prompt, tau, normalize in (("q: ", 1.0, True), ("", 0.8, False)):
        old = cache_fingerprint(tiny_bert, model_identity(tiny_bert), prompt, tau, versions, normalize=normalize)
        new = cache_fingerprint(cached.metadata, cached.identity, prompt, tau, versions, normalize=normalize)
        assert new == old
        assert cached.namespace(prompt, tau, normalize).fingerprint == old
    first = cached.encode(["one text", "another"], shard="s")
    again = CachedEncoder(tiny_bert, tmp_path / "cache", show_progress=False, log=None).encode(
        ["one text", "another"], shard="s")
    assert (first.n_encoded, again.n_cached, again.n_encoded) == (2, 2, 0)
    np.testing.assert_array_equal(again.vectors, first.vectors)


def test_chunks_need_an_encoder_with_encode_chunks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="OnlyEncode embeds whole texts only"):
        run(OnlyEncode(), tmp_path, tasks=[TinyTask()], granularity="chunks")
