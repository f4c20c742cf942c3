"""Every document's sentence pieces embedded when an index is built, so that a search chooses a result's
passage from saved vectors instead of running the model on its sentences (``index --no-passage-vectors``
opts out).

A build's last step, before its snapshot is saved (:mod:`longembed.search.snapshot`): each document of
the version gets its pieces (:func:`~longembed.retrieval.passages.pieces_until` the end of its last chunk)
and their unit vectors, with the document prompt, as a search would embed them.  Incremental: a document
whose id and text the last complete snapshot holds, saved with the same strategy, keeps that snapshot's
rows; only new and changed documents' pieces are embedded, :data:`PIECES_PER_CALL` per encode call (the
encoder sorts each call's inputs by length and fills each forward with :data:`PIECE_BATCH_TOKENS` tokens).  The vectors
are written to a memory-mapped ``.npy`` file in the index folder as they come, and that file is moved
into the snapshot's folder: memory holds one call's vectors, not the collection's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from tqdm.auto import tqdm

from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.retrieval.passages import document_pieces, pieces_until
from longembed.search.snapshot import PIECES_FORMAT, SavedPieces, Snapshot, piece_offsets, read_snapshot

#: pieces per encode call (each call is sorted by length and batched by the encoder)
PIECES_PER_CALL = 2048
#: padded tokens per forward pass of pieces (as many pieces as fit, sorted by length so that padding is
#: small; the last rule was 8 x the build's batch size in pieces, whatever their length).  Measured on a Xeon
#: with AMX, bfloat16 MiniLM, 2,544 pieces of 24 essays, 3 alternated rounds on a quiet machine: 4,096 tokens
#: 20.7k-24.5k tokens/s, 8,192 20.8k-24.6k, 16,384 17.5k-18.6k (larger forwards are slower), 256 pieces
#: (the last rule at batch 32) 19.8k-20.8k (benchmarks/RESULTS.md, "Index build ... on a CPU with AMX")
PIECE_BATCH_TOKENS = 4_096
#: the metadata a snapshot's piece vectors depend on: saved pieces are reused only when these are equal
#: (the strategy's config without its fusion with BM25, which changes no vector: a hybrid and its dense twin)
_SAME_VECTORS = ("config", "prompts", "model", "dtype")
#: the config keys of a strategy's fusion with BM25
FUSION_KEYS = ("fuse", "fuse_method", "fuse_weight", "fuse_k")


@dataclass
class PieceCounts:
    """How many pieces a build embedded, and how many it took from the last complete snapshot."""

    embedded: int = 0
    reused: int = 0


@dataclass(frozen=True)
class _Plan:
    spans: list[np.ndarray]  # per document, its pieces' (start, end)
    reused: list[tuple[int, int] | None]  # per document, its rows in the previous snapshot's pieces (None: embed)


def previous_snapshot(folder: Path | None, metadata: dict[str, Any]) -> Snapshot | None:
    """The last complete snapshot (``folder``) when it holds piece vectors made as this build would make
    them (same strategy, prompts, model and dtype, and the same piece rule), else None."""
    if folder is None:
        return None
    try:
        previous = read_snapshot(folder)
    except (OSError, EOFError, ValueError, KeyError, TypeError, pa.ArrowException, UserError):  # unreadable: embed all
        return None
    if previous.pieces is None or any(_vector_part(previous.metadata, k) != _vector_part(metadata, k)
                                      for k in _SAME_VECTORS):
        return None
    if previous.pieces.rule != PIECES_FORMAT:  # pieces of another rule: this build's documents are split anew
        return None
    return previous


def _vector_part(metadata: dict[str, Any], key: str) -> Any:
    """The metadata ``key`` as far as piece vectors depend on it (a config without its fusion keys)."""
    value = metadata.get(key)
    if key == "config" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in FUSION_KEYS}
    return value


def embed_pieces(snapshot: Snapshot, encoder: LongContextEncoder, prompt: str, scratch: Path,
                 previous: Snapshot | None = None, show_progress: bool = True,
                 max_tokens: int = PIECE_BATCH_TOKENS) -> tuple[SavedPieces, PieceCounts]:
    """The pieces of every document of ``snapshot`` and their vectors (see the module docstring), the
    vectors in the ``.npy`` file ``scratch`` (the caller moves it into the snapshot's folder, or removes it);
    ``max_tokens`` padded tokens per forward pass."""
    plan = _plan(snapshot, previous)
    offsets = piece_offsets([len(s) for s in plan.spans])
    vectors = np.lib.format.open_memmap(scratch, mode="w+", dtype=np.float32,
                                        shape=(int(offsets[-1]), encoder.embedding_dim))
    counts = PieceCounts()
    for d, rows in enumerate(plan.reused):
        if rows is not None:
            assert previous is not None and previous.pieces is not None
            vectors[offsets[d] : offsets[d + 1]] = previous.pieces.vectors[rows[0] : rows[1]]
            counts.reused += rows[1] - rows[0]
    wanted = [d for d, rows in enumerate(plan.reused) if rows is None]
    with tqdm(total=sum(len(plan.spans[d]) for d in wanted), desc="passages", unit="piece",
              disable=not show_progress) as bar:
        for rows, texts in _calls(snapshot, plan, offsets, wanted, PIECES_PER_CALL):
            vectors[rows] = encode_pieces(encoder, texts, prompt, max_tokens=max_tokens)
            counts.embedded += len(rows)
            bar.update(len(rows))
    vectors.flush()
    spans = np.concatenate(plan.spans) if plan.spans else np.zeros((0, 2), dtype=np.int64)
    return SavedPieces(offsets, np.ascontiguousarray(spans[:, 0]), np.ascontiguousarray(spans[:, 1]), vectors,
                       scratch), counts


def encode_pieces(encoder: LongContextEncoder, texts: list[str], prompt: str, batch_size: int | None = None,
                  max_tokens: int = PIECE_BATCH_TOKENS) -> np.ndarray:
    """The pieces' unit vectors with the document prompt, float32, in ``texts``' order, as a build saves them
    (one encode call: the encoder sorts ``texts`` by length and fills each forward with at most ``max_tokens``
    padded tokens and ``batch_size`` pieces, None: as many as fit).  A piece's vector does not depend on its
    batch (:meth:`~longembed.encoder.LongContextEncoder.encode`), so the budget changes the speed only."""
    most = len(texts) if batch_size is None else batch_size
    return np.asarray(encoder.encode(texts, batch_size=max(most, 1), max_tokens_per_batch=max_tokens, prompt=prompt,
                                     normalize_embeddings=True), dtype=np.float32)


def document_piece_vectors(encoder: LongContextEncoder, texts: list[str],
                           prompt: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each text's pieces ((pieces, 2) spans) and their vectors, as a build saves them, held in memory (a
    benchmark's documents; a build writes them to disk as they come)."""
    spans = [np.asarray(document_pieces(t), dtype=np.int64).reshape(-1, 2) for t in texts]
    pieces = [t[s:e] for t, ss in zip(texts, spans, strict=True) for s, e in ss]
    vectors = np.zeros((0, encoder.embedding_dim), dtype=np.float32)
    if pieces:
        vectors = np.concatenate([encode_pieces(encoder, pieces[i : i + PIECES_PER_CALL], prompt)
                                  for i in range(0, len(pieces), PIECES_PER_CALL)])
    offsets = piece_offsets([len(s) for s in spans])
    return [(s, vectors[offsets[d] : offsets[d + 1]]) for d, s in enumerate(spans)]


def scratch_file(index: Path) -> Path:
    """Where a build of ``index`` writes its piece vectors before they are moved into its snapshot."""
    return index / f".piece-vectors-{os.getpid()}.npy"


def _plan(snapshot: Snapshot, previous: Snapshot | None) -> _Plan:
    """Per document, its pieces, and where the previous snapshot holds their vectors (same id and text)."""
    before: dict[str, int] = {} if previous is None else {d: p for p, d in enumerate(previous.doc_ids)}
    firsts = np.concatenate([[0], np.cumsum(snapshot.rows)])
    spans, reused = [], []
    for d, doc_id in enumerate(snapshot.doc_ids):
        text = snapshot.text(d)
        p = before.get(doc_id)
        if previous is not None and previous.pieces is not None and p is not None and previous.text(p) == text:
            old, _ = previous.pieces.of(p)
            spans.append(np.asarray(old, dtype=np.int64).reshape(-1, 2))
            reused.append((int(previous.pieces.offsets[p]), int(previous.pieces.offsets[p + 1])))
        else:
            read_end = int(snapshot.ends[firsts[d] : firsts[d + 1]].max())  # past it no chunk reads the text
            spans.append(np.asarray(pieces_until(text, read_end), dtype=np.int64).reshape(-1, 2))
            reused.append(None)
    return _Plan(spans, reused)


def _calls(snapshot: Snapshot, plan: _Plan, offsets: np.ndarray, documents: list[int],
           size: int) -> Iterator[tuple[list[int], list[str]]]:
    """The pieces of ``documents`` to embed, ``size`` at a time: (their rows, their texts); each
    document's text read once."""
    rows: list[int] = []
    texts: list[str] = []
    for d in documents:
        text = snapshot.text(d)
        for i, (start, end) in enumerate(plan.spans[d]):
            rows.append(int(offsets[d]) + i)
            texts.append(text[int(start) : int(end)])
            if len(rows) == size:
                yield rows, texts
                rows, texts = [], []
    if rows:
        yield rows, texts
