"""Searching an index: :func:`open_index` -> :class:`SearchIndex` -> :meth:`SearchIndex.search`.

A search ranks documents exactly as ``longembed eval`` ranks them, through the same code
(:mod:`longembed.retrieval`): a document's dense score is its best chunk's cosine similarity (MaxSim),
BM25 is eval's (bm25s, Lucene's variant, the same tokenizer, stemmer and stopwords, over whole
documents), fusion is eval's RRF or linear mix, and ties are broken by eval's rule.  The dense side is
an exact scan of every vector (a matrix product), unless the index holds an ANN index (built by
``longembed index`` from :data:`~longembed.search.ann.ANN_MIN_CHUNKS` chunks, or with ``--ann on``):
then the ANN index picks candidate documents (with a hybrid, BM25's best documents join them) and each
candidate is scored exactly over all its chunks (:func:`~longembed.search.ann.document_scores`); a
document outside the candidates gets no dense score.  ``exact=True`` (``search --exact``) scans anyway,
and so does a search restricted to some documents (``ids``, ``path_prefix``), whose candidates the ANN
index could miss.  :func:`open_index` opens the version's saved snapshot (:mod:`longembed.search.snapshot`:
BM25 loaded as the build indexed it, the vectors and texts memory-mapped) and loads the model once, so
a process that searches many times pays for it once.  The modules that import torch or LanceDB (the
query encoder, the ANN index, reading an index that has no saved snapshot) are reached through the
package's lazy names (``heavy.X``: :mod:`longembed.search`), so a BM25-only search never imports them.
The passage a result shows is chosen afterwards, for the
query, among sentence windows around the document's best chunks (:mod:`longembed.retrieval.passages`);
it never changes the ranking.  Their sentences' vectors are read from the snapshot when the build saved
them (:mod:`longembed.search.piece_vectors`: no model call beyond the query's), else embedded once, one
batch per search (an index built with ``--no-passage-vectors``, before they were saved, or on gs:// or
az://).  ``passages="chunk"`` skips the choice and shows the chunk that scored the document.

A :class:`SearchIndex` is read-only after it opens, and :meth:`~SearchIndex.search` keeps no state
between calls, so one instance serves concurrent searches (a lock guards the encoder's forward pass).
The query vectors come from ``embed_queries`` (default: the index's encoder with its query prompt); a
server passes its own, so that query encodes wait in its queue (``longembed serve --index``).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import longembed.search as heavy
from longembed.errors import MissingFileError, UserError
from longembed.locations import location_of
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.passages import (
    PassageQuery,
    PassageRequest,
    best_chunk_rows,
    check_passages,
    choose_passages,
)
from longembed.retrieval.pipeline import (
    DenseScores,
    RankedDocuments,
    exact_dense_scores,
    lexical_candidates,
    rank_documents,
    unit_rows,
)
from longembed.retrieval.ranking import strictly_decreasing
from longembed.retrieval.strategy import BM25, TOKENS_NOT_SEARCHABLE, Strategy
from longembed.search.document_files import read_document_files, servable_file
from longembed.search.index_dtype import recorded_dtype
from longembed.search.snapshot import Snapshot, read_snapshot
from longembed.search.version_files import (
    POINTER,
    MissingVersionFile,
    discard_cached,
    has_pointer,
    is_local,
    keeps_files,
    saved_version,
)

if TYPE_CHECKING:
    from longembed.encoder import LongContextEncoder
    from longembed.search.cold_query import QueryProgram
from longembed.search.truncation import read_truncated, truncation_facts

#: characters of the document shown before and after a passage
CONTEXT_CHARS = 300
#: with an ANN index and a hybrid strategy, BM25's best documents scored densely too: this many times k
#: (at least :data:`LEXICAL_CANDIDATES_MIN`)
LEXICAL_CANDIDATES_PER_RESULT = 10
LEXICAL_CANDIDATES_MIN = 100
#: passage sentences per encode batch (every sentence a search embeds goes in one call)
WINDOW_BATCH = 32


@dataclass(frozen=True)
class Passage:
    text: str
    start: int
    end: int
    before: str
    after: str
    #: where the passage is: "page 12", "pages 12-13", "Install > Models"; None when the reader knew none
    location: str | None = None
    #: the PDF page the passage starts on (1-based), else None
    page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "start": self.start, "end": self.end, "before": self.before, "after": self.after,
                "location": self.location, "page": self.page}


@dataclass(frozen=True)
class SearchResult:
    rank: int
    id: str
    score: float
    source: str
    passage: Passage
    systems: dict[str, dict[str, float | int | None]]

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "id": self.id, "score": self.score, "source": self.source,
                "passage": self.passage.to_dict(), "systems": self.systems}


@dataclass(frozen=True)
class SearchResponse:
    query: str
    k: int
    index: dict[str, Any]
    results: list[SearchResult]

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "k": self.k, "index": self.index, "results": [r.to_dict() for r in self.results]}


def open_index(path: str | Path, device: str | None = None,
               embed_queries: Callable[[list[str]], np.ndarray] | None = None) -> SearchIndex:
    """The index at ``path``, with its model loaded (FileNotFoundError: no index there; ValueError: the
    model's files differ from those that built it); ``embed_queries``: as :class:`SearchIndex`'s."""
    if is_local(path) and saved_version(path) is None and not heavy.IndexStore.exists(path):
        raise MissingFileError(f"--index {path}: no index there (build one with: longembed index SOURCE... "
                                f"--index {path})")
    return SearchIndex(path, device, embed_queries)


class SearchIndex:
    """One index, opened at its last complete version (see the module docstring).

    ``embed_queries(queries)``: the queries' (len(queries), dim) float32 vectors (normalised again
    here); default: the index's encoder, with the index's query prompt, normalised.  ``encoder``: one
    already loaded (a newer version of an index a server follows), checked against the index's model."""

    def __init__(self, path: str | Path, device: str | None = None,
                 embed_queries: Callable[[list[str]], np.ndarray] | None = None,
                 encoder: LongContextEncoder | None = None) -> None:
        self.path = str(path)
        self._data, saved_folder = _open_snapshot(path)
        #: the name of the saved version it opened (:mod:`~longembed.search.version_files`; None: read from the table)
        self.saved_name = None if saved_folder is None else saved_folder.name
        self.version = self._data.version
        self.built_at = self._data.built_at
        self.metadata = self._data.metadata
        self.strategy = Strategy.from_dict(self.metadata["config"], default_model=BM25)
        if self.strategy.multivector:  # a hand-edited metadata: no build writes one
            raise UserError(f"{path}: {TOKENS_NOT_SEARCHABLE}")
        #: the ANN index searches use (None: an exact scan; see the module docstring)
        self.ann = None if self._data.ann is None or self._data.vectors is None else heavy.open_ann(path, self._data)
        #: the strategy's name when it was built (advise's, e.g. ``trained-late-chunks``, or its own)
        self.name = str(self.metadata.get("strategy") or self.strategy.name)
        self.prompts = self.metadata["prompts"]
        if not self._data.doc_ids:
            raise UserError(f"{self.path}: the index holds no documents")
        self._bm25 = BM25Model()
        self._bm25_index = self._data.bm25 if BM25 in self.strategy.systems else None
        self._position = {d: p for p, d in enumerate(self._data.doc_ids)}
        self._files = {d: f for d, f in read_document_files(path).items() if d in self._position}
        self._truncated = truncation_facts(read_truncated(path))  # the documents a truncating build cut
        self._lock = threading.Lock()
        self.embed_queries = embed_queries or self._encode_queries
        self._device = device
        self._dense = not self.strategy.lexical_only
        self._encoder: LongContextEncoder | None = None
        #: the version's saved query program (no transformers import), used for inputs it reads
        self._program: QueryProgram | None = None
        if self._dense and encoder is None and saved_folder is not None:
            self._program = heavy.load_query_program(saved_folder, self.metadata)
        if self._dense and self._program is None:
            self._encoder = heavy.load_query_encoder(self.strategy, self.metadata, device, self.path, encoder)

    @property
    def encoder(self) -> LongContextEncoder | None:
        """The index's encoder (None: lexical only), loaded on first use when a query program serves searches."""
        if self._dense and self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    self._encoder = heavy.load_query_encoder(self.strategy, self.metadata, self._device, self.path)
        return self._encoder

    # ------------------------------------------------------------------ facts
    def facts(self) -> dict[str, Any]:
        fusion = self.strategy.fusion
        model = self.metadata.get("model") or {}
        return {
            "documents": len(self._data.doc_ids),
            "chunks": int(self._data.rows.sum()),
            "model": model.get("name", "bm25"),
            "method": model.get("method"),
            "max_length": model.get("max_length"),
            "dtype": None if self.strategy.lexical_only else recorded_dtype(self.metadata),
            "strategy": self.name,
            "systems": self.strategy.systems,
            "fusion": None if fusion is None else {k: v for k, v in fusion.to_dict().items() if k != "source"},
            "built_at": self.built_at,
            "longembed_version": self.metadata.get("longembed_version"),
            "truncated": self._truncated,
        }

    def document_file(self, doc_id: str) -> Path | None:
        """The original file of the document ``doc_id`` when a server may hand it out (a PDF the index
        recorded, still there: :func:`~longembed.search.document_files.servable_file`), else None."""
        return servable_file(self._files, doc_id)

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int = 10, ids: Sequence[str] | None = None,
               path_prefix: str | None = None, exact: bool = False, passages: str = "query") -> SearchResponse:
        """The ``k`` best documents for ``query`` (optionally only those of ``ids`` or whose source starts
        with ``path_prefix``), ranked as eval ranks them; ``exact``: scan every vector even when the index
        has an ANN index; ``passages``: "query" shows each result's best window for the query, "chunk"
        the chunk that scored it (nothing embedded beyond the query: for throughput)."""
        (results,) = self.search_many([query], k, ids, path_prefix, exact, passages)
        return SearchResponse(query, k, self.facts(), results)

    def search_many(self, queries: Sequence[str], k: int = 10, ids: Sequence[str] | None = None,
                    path_prefix: str | None = None, exact: bool = False,
                    passages: str = "query") -> list[list[SearchResult]]:
        """:meth:`search`'s results for many queries at once (their vectors encoded in batches, as eval)."""
        check_passages(passages)
        if k < 1:
            raise UserError(f"k must be at least 1, got {k}")
        if any(not isinstance(q, str) or not q.strip() for q in queries):
            raise UserError("a query is empty")
        allowed = self._allowed(ids, path_prefix)
        use_ann = self.ann is not None and not exact and bool(allowed.all())
        ranked, vectors = self._rank(list(queries), allowed, k, use_ann)
        return [self._results(q, PassageQuery(text, None if vectors is None else vectors[q]), ranked, passages)
                for q, text in enumerate(queries)]

    def _allowed(self, ids: Sequence[str] | None, path_prefix: str | None) -> np.ndarray:
        allowed = np.ones(len(self._data.doc_ids), dtype=bool)
        if ids is not None:
            wanted = set(ids)
            allowed &= np.array([d in wanted for d in self._data.doc_ids])
        if path_prefix is not None:
            allowed &= np.array([s.startswith(path_prefix) for s in self._data.sources])
        return allowed

    def _rank(self, queries: list[str], allowed: np.ndarray, k: int,
              use_ann: bool) -> tuple[RankedDocuments, np.ndarray | None]:
        """The queries ranked by eval's pipeline (:func:`~longembed.retrieval.pipeline.rank_documents`);
        the dense side an exact scan, or through the ANN index (``use_ann``); and the query vectors
        (None: a lexical-only strategy)."""
        lexical = None
        vectors = None
        if self._bm25_index is not None:
            lexical = np.stack([self._bm25.query_scores(self._bm25_index, q) for q in queries])
        dense = None
        if self._dense:
            assert self._data.vectors is not None
            vectors = self._query_vectors(queries)
            dense = (self._ann_dense(vectors, lexical, k) if use_ann
                     else exact_dense_scores(vectors, self._data.vectors, self._data.rows))
        return rank_documents(self._data.doc_ids, k, dense=dense, lexical=lexical, fusion=self.strategy.fusion,
                              allowed=allowed), vectors

    def _ann_dense(self, vectors: np.ndarray, lexical: np.ndarray | None, k: int) -> DenseScores:
        """Dense scores and best chunks through the ANN index (see the module docstring)."""
        assert self.ann is not None and self._data.vectors is not None
        dense = np.empty((len(vectors), len(self._data.doc_ids)))
        best = np.empty(dense.shape, dtype=np.int64)
        wanted = min(len(self._data.doc_ids), max(LEXICAL_CANDIDATES_MIN, LEXICAL_CANDIDATES_PER_RESULT * k))
        for q, vector in enumerate(vectors):
            extra = None
            if lexical is not None:
                extra = lexical_candidates(lexical[q], wanted)
            dense[q], best[q] = self.ann.document_scores(vector, k, self._data.vectors, self._data.rows,
                                                         self._position, extra)
        return DenseScores(dense, best)

    def _encode_queries(self, queries: list[str]) -> np.ndarray:
        """The default ``embed_queries``: the index's encoder, with its query prompt, normalised."""
        return self._encode(queries, self.prompts["query"], 16)

    def _encode(self, texts: list[str], prompt: str | None, batch_size: int) -> np.ndarray:
        """Unit vectors of ``prompt + text``: the saved query program's when it reads every text, else the
        encoder's (loaded then, once)."""
        if self._program is not None:
            with self._lock:
                vectors = self._program.encode(texts, prompt or "")
            if vectors is not None:
                return vectors
        encoder = self.encoder
        assert encoder is not None
        with self._lock:
            return encoder.encode(texts, batch_size=batch_size, prompt=prompt, normalize_embeddings=True)

    def _query_vectors(self, queries: list[str]) -> np.ndarray:
        return unit_rows(self.embed_queries(queries))

    def _results(self, q: int, query: PassageQuery, ranked: RankedDocuments, choice: str) -> list[SearchResult]:
        data = self._data
        order = [int(d) for d in ranked.order[q]]
        shown = strictly_decreasing([ranked.scores[q, d] for d in order])
        shown_rows = np.asarray(order, dtype=np.int64)
        ranks = {name: dict(zip(order, ranked.ranks_of(name, q, shown_rows).tolist(), strict=True)) for name in ranked.systems}
        passages = self._passages(query, order) if choice == "query" else [self._scoring_chunk(q, d, ranked)
                                                                           for d in order]
        results = []
        for position, (d, score, passage) in enumerate(zip(order, shown, passages, strict=True), start=1):
            per_system = {}
            for name, system_ranks in ranks.items():
                found = np.isfinite(system_ranks[d])
                per_system[name] = {"rank": int(system_ranks[d]) if found else None,
                                    "score": float(ranked.systems[name][q, d]) if found else None}
            results.append(SearchResult(position, data.doc_ids[d], score, data.sources[d], passage, per_system))
        return results

    def _first_chunk(self, d: int) -> int:
        return int(self._data.rows[:d].sum())

    def _best_chunks(self, d: int, vector: np.ndarray | None) -> list[int]:
        """The rows of document ``d``'s best chunks for the query (by cosine; every chunk of a
        lexical-only index, whose chunks have no vectors)."""
        first, count = self._first_chunk(d), int(self._data.rows[d])
        if vector is None or self._data.vectors is None:
            return list(range(first, first + count))
        return best_chunk_rows(self._data.vectors[first : first + count] @ vector, first)

    def _passages(self, query: PassageQuery, order: list[int]) -> list[Passage]:
        """The passage each result shows: its best window for the query (:mod:`longembed.retrieval.passages`),
        from the pieces' saved vectors when the index has them (else embedded: :meth:`_embed_sentences`)."""
        if not order:
            return []
        data = self._data
        chunks = [self._best_chunks(d, query.vector) for d in order]
        saved = data.pieces if self._dense else None  # the pieces' vectors the build saved
        requests = [PassageRequest(data.text(d), [(int(data.starts[r]), int(data.ends[r])) for r in rows],
                                   *(saved.of(d) if saved is not None else (None, None)))
                    for d, rows in zip(order, chunks, strict=True)]
        spans = choose_passages(query, requests, self._embed_sentences if self._dense else None,
                                lexical=BM25 in self.strategy.systems, fusion=self.strategy.fusion)
        return [self._passage(request.text, d, rows, span)
                for request, d, rows, span in zip(requests, order, chunks, spans, strict=True)]

    def _scoring_chunk(self, q: int, d: int, ranked: RankedDocuments) -> Passage:
        """``passages="chunk"``: the chunk that gave document ``d`` its dense score (its first chunk
        without a dense side)."""
        chunk = int(ranked.best_chunk[q, d]) if ranked.best_chunk is not None else -1
        chunk = chunk if chunk >= 0 else self._first_chunk(d)
        return self._passage(self._data.text(d), d, [chunk], (int(self._data.starts[chunk]), int(self._data.ends[chunk])))

    def _embed_sentences(self, texts: list[str]) -> np.ndarray:
        """Passage sentences' vectors: the index's encoder with its document prompt, one batch per search
        (only for an index without saved piece vectors)."""
        return self._encode(texts, self.prompts["document"], WINDOW_BATCH)

    def _passage(self, text: str, d: int, rows: list[int], span: tuple[int, int]) -> Passage:
        """Document ``d``'s passage ``span`` of ``text`` (its text, read once per result by the caller)."""
        start, end = span
        marks = self._data.marks(d)
        if marks:  # where the passage itself is, in the document's own map
            location, page = location_of(marks, start, end)
        else:  # an index without maps: the location of the chunk the passage starts in (else the best chunk's)
            chunk = next((r for r in rows if self._data.starts[r] <= start < self._data.ends[r]), rows[0])
            location, page = self._data.location(chunk)
        return Passage(text[start:end], start, end, text[max(0, start - CONTEXT_CHARS) : start],
                       text[end : end + CONTEXT_CHARS], location, page)


def _open_snapshot(path: str | Path) -> tuple[Snapshot, Path | None]:
    """The index's last complete version: its saved files (memory-mapped; an S3 index's downloaded once
    into the local cache) and their folder, else its table's rows read into memory and BM25 indexed, once
    per open (an index built before files were saved, or whose saved files are missing: a rerun of
    ``longembed index`` saves them), and None.  A cached copy that cannot be read is downloaded again."""
    missing = None
    for attempt in range(2):  # a build may replace the saved version between the pointer and its files
        try:
            saved = saved_version(path)
        except MissingVersionFile as exc:  # an S3 version's object is missing (or its download cut short)
            missing = f"{exc.filename} of version {exc.version}"
            continue
        if saved is None:
            missing = f"the folder of the version {POINTER} names" if has_pointer(path) else None
            break
        try:
            return read_snapshot(saved[1]), saved[1]
        except FileNotFoundError as exc:
            missing = f"{Path(exc.filename or '?').name} of version {saved[0]}"
            discard_cached(path, saved[0])
        except Exception as exc:  # any reader's error on a damaged file (numpy's header parser raises TokenError)
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]  # one line
            if attempt == 0 and discard_cached(path, saved[0]):
                warnings.warn(f"{path}: the cached copy of version {saved[0]} cannot be read ({detail}); it is "
                              "downloaded again", stacklevel=3)
                continue
            raise UserError(f"--index {path}: the files saved for version {saved[0]} cannot be read ({detail}); "
                            f"{RESAVE_HINT.format(path=path)}") from exc
    snapshot = heavy.read_table_snapshot(path)
    if keeps_files(path):
        why = (f"its saved files are incomplete ({missing} is missing)" if missing is not None else
               "this index was built before longembed saved what a search opens")
        warnings.warn(f"{path}: {why}, so every open reads all its rows and indexes BM25 again; run longembed index "
                      f"with the same sources and --index {path} once to save them (nothing is embedded again)",
                      stacklevel=3)
    return snapshot, None


#: what to do about saved files that cannot be read: a rerun saves them anew from the table
RESAVE_HINT = ("run longembed index with the same sources and --index {path} to save them anew (nothing is embedded "
               "again), or build it again with --rebuild")
