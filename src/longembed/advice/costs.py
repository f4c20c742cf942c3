"""What each strategy costs a user, measured on this machine (noisy: a few timed calls each).

* **encode seconds per 1k tokens**: the median of :data:`ENCODE_RUNS` uncached encodes (the embedding
  cache would make it 0) of a fixed, seeded sample of the evaluated documents with the strategy's
  settings (BM25: building its index, timed once), divided by the sample's tokens (the documents' own tokens, counted with the model's tokenizer,
  so a truncating strategy is cheap per token because it reads only the first Lo of them);
* **vectors per document**: 1, or the mean number of chunks over every evaluated document (a passage
  task's passages are its chunks: 1 each);
* **index bytes**: the index of every evaluated document: float32 vectors (vectors x dimensions x 4);
  BM25: bm25s' sparse score matrix; a hybrid: both;
* **query latency**: the median over the sampled queries (20 by default) of encoding the query
  (uncached) and scoring it against that index (the best chunk per document for chunk strategies, the
  top 10 kept), through the pipeline a search runs (:func:`~longembed.retrieval.pipeline.rank_documents`);
  a hybrid's queries run the whole fused search.

Each encoder is warmed up once (its weights loaded, first-call costs paid) before anything is timed,
and each strategy's query timing starts after :data:`WARM_UP_QUERIES` untimed searches, right after
its sample documents were encoded: a median of five queries timed without them once reported 730 ms
for MiniLM at PI-4096, where the same query takes about 25 ms timed alone (issue 41; the slow first
calls were not reproduced here, and are now outside the timing whatever their cause).
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.scoring import Unit
from longembed.results.advice import StrategyCost
from longembed.retrieval.bm25 import BM25Model, index_bytes
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.pipeline import RankedDocuments, exact_dense_scores, rank_documents, unit_rows
from longembed.retrieval.strategy import Strategy

TOP_K = 10
#: Untimed searches before a strategy's queries are timed.
WARM_UP_QUERIES = 3
#: Timed encodes of the document sample per strategy, the median reported.
ENCODE_RUNS = 3
FLOAT32_BYTES = 4


@dataclass
class CostSample:
    """The texts costs are measured on: timed documents and queries (seeded samples), and every evaluated
    document by unit (the index)."""

    documents: list[str]
    queries: list[str]
    units: list[Unit]
    seed: int

    @property
    def index_documents(self) -> int:
        return sum(len(u.data.corpus) for u in self.units)

    def all_documents(self) -> list[str]:
        return [text for u in self.units for text in u.data.corpus.values()]


def cost_sample(units: Sequence[Unit], n_documents: int, n_queries: int, seed: int) -> CostSample:
    """``n_documents`` documents and ``n_queries`` queries drawn (seeded) from every unit's."""
    rng = np.random.default_rng(seed)
    documents = [t for u in units for t in u.data.corpus.values()]
    queries = [t for u in units for t in u.data.queries.values()]
    pick = rng.choice(len(documents), size=min(n_documents, len(documents)), replace=False)
    ask = rng.choice(len(queries), size=min(n_queries, len(queries)), replace=False)
    return CostSample([documents[i] for i in sorted(pick)], [queries[i] for i in sorted(ask)], list(units), seed)


@dataclass
class Measured:
    """One strategy's raw measurements: seconds to encode the sample, each query's milliseconds, the index."""

    encode_seconds: float
    latencies_ms: list[float]
    index_bytes: int
    vectors: int | None = None
    dimensions: int | None = None
    index: str = "float32 vectors"


@dataclass
class CostMeter:
    """Measures strategies' costs on one :class:`CostSample`, remembering what strategies share (an
    encoder's warm-up, chunk counts, BM25's measurements)."""

    sample: CostSample
    batch_size: int
    sample_tokens: int
    _warm: set[int] = field(default_factory=set)
    _chunks: dict[str, np.ndarray] = field(default_factory=dict)
    _bm25: Measured | None = None
    _lexical: tuple[BM25Model, Any] | None = None
    #: (encoder, chunking) -> the dense index (random unit vectors, chunks per document) its queries search
    _dense: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)

    def dense(self, strategy: Strategy, cached: CachedEncoder, prompts: dict[str, str]) -> Measured:
        """An embedding strategy: uncached encode of the sample, its index and query latency."""
        encoder = cached.encoder
        self._warm_up(encoder, prompts)
        rows = self._rows(strategy, encoder)
        widths: list[int] = []
        seconds = median_seconds(lambda: widths.append(_encode_sample(
            encoder, strategy, self.sample.documents, prompts["document"], self.batch_size)), ENCODE_RUNS)
        dimensions = widths[0]
        vectors = self.sample.index_documents if rows is None else int(rows.sum())
        self._dense[id(encoder), strategy.chunking if strategy.chunked else None] = (
            _unit_vectors(vectors, dimensions, self.sample.seed), rows)
        search = _Search(self.doc_ids, encoder, prompts["query"], *self._dense[id(encoder), strategy.chunking
                                                                               if strategy.chunked else None])
        latencies = timed_queries(search.timed_ms, self.sample.queries)
        return Measured(seconds, latencies, vectors * dimensions * FLOAT32_BYTES, vectors, dimensions)

    def bm25(self) -> Measured:
        """BM25: indexing the sample, the index of every document, and query latency (measured once)."""
        if self._bm25 is None:
            model = BM25Model()
            model.index(["warm up the tokenizer"])
            began = time.perf_counter()
            model.index(self.sample.documents)
            seconds = time.perf_counter() - began
            self._lexical = (model, model.index(self.sample.all_documents()))
            latencies = timed_queries(_Search(self.doc_ids, lexical=self._lexical).timed_ms, self.sample.queries)
            self._bm25 = Measured(seconds, latencies, index_bytes(self._lexical[1]), index="bm25s sparse matrix")
        return self._bm25

    def hybrid(self, strategy: Strategy, dense: Measured, cached: CachedEncoder, prompts: dict[str, str]) -> Measured:
        """A dense strategy fused with BM25: both encodes and both indexes; each query timed through the
        whole fused search (encode, both scorings, the fusion and the ranking)."""
        lexical = self.bm25()
        key = id(cached.encoder), strategy.chunking if strategy.chunked else None
        search = _Search(self.doc_ids, cached.encoder, prompts["query"], *self._dense[key], self._lexical,
                         strategy.fusion)
        latencies = timed_queries(search.timed_ms, self.sample.queries)
        return Measured(dense.encode_seconds + lexical.encode_seconds, latencies, dense.index_bytes + lexical.index_bytes,
                        dense.vectors, dense.dimensions, f"{dense.index} + {lexical.index}")

    @property
    def doc_ids(self) -> list[str]:
        """Ids of the index's documents (their positions: the index is random vectors)."""
        return [str(i) for i in range(self.sample.index_documents)]

    def cost(self, measured: Measured) -> StrategyCost:
        """The measurements as a user's costs (per 1k tokens, per document, median latency)."""
        per_document = None if measured.vectors is None else measured.vectors / self.sample.index_documents
        return StrategyCost(
            encode_seconds_per_1k_tokens=round(1000 * measured.encode_seconds / max(self.sample_tokens, 1), 6),
            vectors_per_document=None if per_document is None else round(per_document, 3),
            dimensions=measured.dimensions, index_bytes=measured.index_bytes,
            query_latency_ms=round(statistics.median(measured.latencies_ms), 3), index=measured.index,
        )

    def _warm_up(self, encoder: Any, prompts: dict[str, str]) -> None:
        """Load the weights and pay first-call costs, for documents and for one query, before timing."""
        if id(encoder) not in self._warm:
            encoder.encode(["warm up the encoder", "and its batching"], batch_size=2, prompt=prompts["document"])
            encoder.encode(["warm up one query"], batch_size=1, prompt=prompts["query"])
            self._warm.add(id(encoder))

    def _rows(self, strategy: Strategy, encoder: Any) -> np.ndarray | None:
        """Chunks per evaluated document (None: one vector each); counted once per chunking."""
        if not strategy.chunked:
            return None
        if strategy.chunking not in self._chunks:
            counts = [np.ones(len(u.data.corpus), dtype=np.int64) if u.data.passages is not None
                      else np.asarray([len(s) for s in encoder.chunk_spans(list(u.data.corpus.values()),
                                                                            strategy.chunking)], dtype=np.int64)
                      for u in self.sample.units]
            self._chunks[strategy.chunking] = np.concatenate(counts)
        return self._chunks[strategy.chunking]


def _encode_sample(encoder: Any, strategy: Strategy, texts: list[str], prompt: str, batch_size: int) -> int:
    """Encode the sample as the strategy does (uncached); returns the vectors' dimensions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # truncation warnings: truncating is the strategy
        if strategy.chunked:
            out = encoder.encode_chunks(texts, strategy.chunking, late=strategy.late, batch_size=batch_size,
                                        prompt=prompt, normalize_embeddings=True)
            return int(out[0][0].shape[1])
        return int(encoder.encode(texts, batch_size=batch_size, prompt=prompt, normalize_embeddings=True).shape[1])


def median_seconds(call: Callable[[], Any], runs: int) -> float:
    """The median of ``runs`` timed calls of ``call``, in seconds: one encode of the sample moved 3x between
    two identical advise runs (issue 54), a median of three holds within 20%."""
    return statistics.median(_timed_ms(call) / 1000 for _ in range(max(runs, 1)))


def timed_queries(search_ms: Callable[[str], float], queries: Sequence[str]) -> list[float]:
    """Each query's milliseconds (``search_ms(query)``), after :data:`WARM_UP_QUERIES` untimed searches
    of the first queries (whose times are dropped)."""
    for i in range(min(WARM_UP_QUERIES, len(queries)) if queries else 0):
        search_ms(queries[i % len(queries)])
    return [search_ms(query) for query in queries]


def _unit_vectors(n: int, dimensions: int, seed: int) -> np.ndarray:
    """An index of ``n`` random unit vectors: scoring costs the same whatever the vectors hold."""
    vectors = np.random.default_rng(seed).standard_normal((n, dimensions)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@dataclass
class _Search:
    """One search as ``longembed search`` runs it, on the meter's index: the query encoded, each system's
    scores, then :func:`~longembed.retrieval.pipeline.rank_documents` (the top :data:`TOP_K`)."""

    doc_ids: list[str]
    encoder: Any = None
    prompt: str = ""
    vectors: np.ndarray | None = None
    rows: np.ndarray | None = None
    lexical: tuple[BM25Model, Any] | None = None
    fusion: Fusion | None = None

    def __call__(self, query: str) -> RankedDocuments:
        dense = lexical = None
        if self.encoder is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                vector = unit_rows(self.encoder.encode([query], batch_size=1, prompt=self.prompt,
                                                       normalize_embeddings=True))
            dense = exact_dense_scores(vector, self.vectors, self.rows)  # type: ignore[arg-type]
        if self.lexical is not None:
            model, index = self.lexical
            lexical = model.query_scores(index, query)[None, :]
        return rank_documents(self.doc_ids, TOP_K, dense=dense, lexical=lexical, fusion=self.fusion)

    def timed_ms(self, query: str) -> float:
        return _timed_ms(lambda: self(query))


def _timed_ms(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return 1000 * (time.perf_counter() - began)


def machine() -> dict[str, Any]:
    """Where the costs were measured: the platform, its CPUs and torch's threads."""
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
