"""The indexes a judging session pools: one ordinary ``longembed index`` folder per candidate strategy
``advise`` would measure for the model, built once and brought up to date when the session starts again.

The candidates are :func:`~longembed.advice.strategies.plan_candidates`' without extension (the model's
own window); an index that exists re-embeds only the documents that changed, and one whose documents and
strategy are those of its last build here (:data:`BUILT_FILE`) is not opened for a build at all.

Cost: each dense strategy embeds every document once more (its own chunks or truncation); a hybrid
(``+bm25``) embeds nothing when its dense twin was built here first (advise's order): its chunk vectors
and passage pieces are read from the twin's saved version (:func:`dense_twin`), so pooling all nine
candidates of a mean-pooling model costs about four embeddings of the corpus.  ``strategies`` chooses a subset (e.g. ``bm25,chunks,late-chunks``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from longembed.advice.strategies import Candidate, ModelFacts, plan_candidates
from longembed.config import DTYPE_AUTO
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import UserError
from longembed.judging.pool import Searcher
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search.build import build_index
from longembed.search.build_precision import with_dtype
from longembed.search.embedding import VectorLookup
from longembed.search.index import SearchIndex, open_index
from longembed.search.snapshot import read_snapshot
from longembed.search.sources import Document
from longembed.search.version_files import saved_version
from longembed.tasks.judgment_log import write_durably

#: what the last build here indexed (:func:`build_fingerprint`), written after it completed
BUILT_FILE = "judge-build.sha256"


def pool_candidates(model: str, strategies: Sequence[str] | None = None, chunking: str | None = None) -> list[Candidate]:
    """The candidates to pool, in advise's order: all of advise's for ``model`` (``bm25``: BM25 alone),
    or those named in ``strategies`` (an unknown name is a UserError listing the known ones)."""
    if model == BM25:
        planned = [Candidate(BM25, Strategy(BM25), "BM25 (lexical; no model)")]
    else:
        encoder = load_encoder(model, lazy=True)
        facts = ModelFacts(encoder.position_scheme, encoder.pooling, encoder.original_length)
        base = Strategy(model=model) if chunking is None else Strategy(model=model, chunking=chunking)
        planned, _left_out = plan_candidates(facts, None, None, base)
        # a tuned fusion is fitted on judged queries: before them it is its hybrid (the same index twice)
        planned = [candidate for candidate in planned if candidate.tuned_from is None]
    if not strategies:
        return planned
    known = {candidate.name: candidate for candidate in planned}
    unknown = [name for name in strategies if name not in known]
    if unknown:
        raise UserError(f"--strategies names {unknown}, not candidates for this model: choose among "
                        f"{', '.join(known)}")
    return [known[name] for name in dict.fromkeys(strategies)]


def build_pool_indexes(
    documents: Sequence[Document], candidates: Sequence[Candidate], folder: Path, device: str | None = None,
    batch_size: int = 16, say: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Build (or bring up to date) one index per candidate under ``folder/<name>``; name -> its folder."""
    built: dict[str, Path] = {}
    for i, candidate in enumerate(candidates, 1):
        path = folder / candidate.name
        strategy = candidate.strategy
        if not strategy.lexical_only and "dtype" not in strategy.encoder_options:
            strategy = replace(strategy, encoder_options={**strategy.encoder_options, "dtype": DTYPE_AUTO})
        built[candidate.name] = path
        fingerprint = build_fingerprint(documents, strategy)
        if _recorded(path) == fingerprint:
            say(f"[{i}/{len(candidates)}] index {candidate.name}: up to date ({path})")
            continue
        say(f"[{i}/{len(candidates)}] index {candidate.name}: {candidate.description}")
        began = time.perf_counter()
        twin = dense_twin(documents, strategy, folder)
        build_index(path, documents, strategy if twin is None else twin_dtype(strategy, twin), name=candidate.name,
                    device=device, batch_size=batch_size, show_progress=False, log=None,
                    cached=None if twin is None else twin_vectors(twin), pieces_from=twin)
        write_durably(path / BUILT_FILE, fingerprint + "\n")
        say(f"    ready in {time.perf_counter() - began:.1f} s ({path})")
    return built


@dataclass(frozen=True)
class PoolIndexes:
    """What a running session needs to pool more strategies (the Advise button's pool-back): the model,
    the documents and the folder of the indexes, built as :func:`build_pool_indexes` builds them."""

    model: str
    documents: Sequence[Document]
    folder: Path
    chunking: str | None = None
    device: str | None = None
    batch_size: int = 16

    def searchers(self, names: Sequence[str], say: Callable[[str], None] = print) -> dict[str, Searcher]:
        """The searchers of the candidates among ``names`` (others, a tuned fusion, are left out), their
        indexes built or brought up to date first."""
        known = {candidate.name for candidate in pool_candidates(self.model, None, self.chunking)}
        wanted = [name for name in names if name in known]
        if not wanted:
            return {}
        candidates = pool_candidates(self.model, wanted, self.chunking)
        indexes = build_pool_indexes(self.documents, candidates, self.folder, self.device, self.batch_size, say)
        return open_searchers(indexes, self.device)


def dense_twin(documents: Sequence[Document], strategy: Strategy, folder: Path) -> Path | None:
    """The index under ``folder`` of a hybrid's dense strategy (itself without BM25) built here from these
    documents, whose vectors the hybrid's are (None: not a hybrid, or no such index)."""
    if strategy.fusion is None or not folder.is_dir():
        return None
    dense = replace(strategy, fuse=None, fuse_method=None, fuse_weight=None, fuse_k=None)
    fingerprint = build_fingerprint(documents, dense)
    return next((path for path in sorted(folder.iterdir()) if path.is_dir() and _recorded(path) == fingerprint), None)


def twin_dtype(strategy: Strategy, twin: Path) -> Strategy:
    """The hybrid in the dtype its twin's ``--dtype auto`` chose, which need not be chosen again (that
    embeds a sample of the documents twice)."""
    saved = saved_version(twin)
    dtype = None if saved is None else read_snapshot(saved[1]).metadata.get("dtype")
    if strategy.encoder_options.get("dtype") != DTYPE_AUTO or not isinstance(dtype, str):
        return strategy
    return with_dtype(strategy, dtype)


def twin_vectors(twin: Path) -> Callable[[LongContextEncoder, str], VectorLookup | None]:
    """:func:`build_index`'s ``cached`` from the twin's saved version: each document's chunk vectors, found
    by its text, when the twin embedded with this document prompt (None: it has no saved version)."""
    def lookup(_encoder: LongContextEncoder, prompt: str) -> VectorLookup | None:
        saved = saved_version(twin)
        if saved is None:
            return None
        snapshot = read_snapshot(saved[1])
        if snapshot.vectors is None or snapshot.metadata["prompts"]["document"] != prompt:
            return None
        firsts = np.concatenate([[0], np.cumsum(snapshot.rows)])
        position = {snapshot.text(d): d for d in range(len(snapshot.doc_ids))}
        vectors = snapshot.vectors

        def found(texts: Sequence[str]) -> list[np.ndarray | None]:
            rows = [position.get(text) for text in texts]
            return [None if d is None else np.array(vectors[firsts[d]:firsts[d + 1]]) for d in rows]
        return found
    return lookup


def build_fingerprint(documents: Sequence[Document], strategy: Strategy) -> str:
    """The sha256 of the strategy and of every document's id and text: what a build here indexed."""
    digest = hashlib.sha256(json.dumps(strategy.to_dict(), sort_keys=True, default=str).encode())
    for document in sorted(documents, key=lambda d: d.id):
        digest.update(f"\n{document.id}\t{document.sha256}".encode())
    return digest.hexdigest()


def _recorded(path: Path) -> str | None:
    try:
        return (path / BUILT_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def open_searchers(indexes: dict[str, Path], device: str | None = None) -> dict[str, Searcher]:
    """Each index opened once, as a :data:`~longembed.judging.pool.Searcher` (its results as ``search
    --json`` prints them)."""
    return {name: index_searcher(open_index(path, device)) for name, path in indexes.items()}


def index_searcher(index: SearchIndex) -> Searcher:
    def search(question: str, k: int) -> list[dict[str, Any]]:
        return [result.to_dict() for result in index.search(question, k=k).results]
    return search
