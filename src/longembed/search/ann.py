"""The approximate (ANN) side of dense search: when an index gets one, how it is built, how a search
uses it.

Below :data:`ANN_MIN_CHUNKS` chunks a search scans every vector exactly (a matrix product: 17 ms at
100k chunks, 190 ms at 1M on 2 cores, ``benchmarks/RESULTS.md``); at and above it, ``longembed index``
builds a LanceDB IVF index (:data:`INDEX_TYPE`, cosine) on the ``vector`` column and a search asks it
for candidate chunks.  The candidates only choose *which documents* are scored: every chunk of a
candidate document is then scored exactly (MaxSim over all its chunks, as eval), so a document found
has its exact score and its exact best passage; what ANN can lose is a document none of whose chunks
came back.  ``benchmarks/ann_recall.py`` measures that loss (recall@10 of documents against the exact
scan): on MiniLM-like clustered vectors the settings here (:data:`PROBE_FRACTION`,
:func:`candidate_chunks`) keep it at or above 0.98.  Vectors without clusters need far more probes, so a
build does not trust the fraction: it measures recall@10 on sample queries made from its own chunks and
doubles the probes until it reaches :data:`TARGET_RECALL` (:func:`calibrated_probes`; recorded in the
vector field's metadata with the index it belongs to).

The index's presence is the switch: a table version with a vector index is searched through it (unless
the search asks for ``exact``), one without is scanned.  ``longembed index --ann auto|on|off`` decides
(auto: :data:`ANN_MIN_CHUNKS`), and every build brings the index up to date before the build is marked
complete (new rows added to it: ``optimize``; trained anew when the table grew past
:data:`RETRAIN_GROWTH` times the rows it was trained on), so a search never sees a half-built one.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from longembed.errors import UserError
from longembed.retrieval.ranking import max_over_rows

try:  # the ``search`` extra
    from lancedb.index import IvfFlat
except ImportError:  # pragma: no cover - exercised only without the extra
    IvfFlat = None  # type: ignore[assignment,misc]

#: chunks from which ``--ann auto`` builds an ANN index: the exact scan's p50, measured alone on 2 cores
#: at 17 ms for 100k chunks and 190 ms for 1M (linear), passes 50 ms near 300k (benchmarks/RESULTS.md)
ANN_MIN_CHUNKS = 300_000
#: LanceDB's index type: IVF with full vectors in the partitions (no quantisation error; it builds in
#: seconds where IVF-PQ takes minutes, and reached the same recall in benchmarks/ann_recall.py)
INDEX_TYPE = "IVF_FLAT"
#: the fraction of the IVF partitions a search probes, before calibration (0.9955 recall@10 at 100k
#: MiniLM-like chunks in benchmarks/ann_recall.py)
PROBE_FRACTION = 0.1
#: the fewest partitions probed
MIN_PROBES = 8
#: the index is trained anew when the table holds this many times the rows it was trained on
RETRAIN_GROWTH = 2.0
#: recall@10 of documents against the exact scan a build calibrates its probes to
TARGET_RECALL = 0.98
#: sample queries of that calibration
CALIBRATION_QUERIES = 50
#: the vector field's metadata key that records the calibrated probes (with the index they belong to)
PROBES_KEY = "longembed.ann"
#: the fewest candidate chunks asked for
MIN_CANDIDATES = 100
VECTOR = "vector"
ANN_MODES = ("auto", "on", "off")


def partitions_for(rows: int) -> int:
    """IVF partitions for ``rows`` vectors: about sqrt(rows) (LanceDB's guidance), at least 1."""
    return max(1, round(math.sqrt(rows)))


def probes_for(partitions: int) -> int:
    """Partitions a search probes: :data:`PROBE_FRACTION` of them, at least :data:`MIN_PROBES`."""
    return min(partitions, max(MIN_PROBES, math.ceil(PROBE_FRACTION * partitions)))


def candidate_chunks(k: int, chunks: int, documents: int) -> int:
    """Chunks asked of the ANN index for the top ``k`` documents: twice ``k`` documents' worth of chunks
    (a document's chunks crowd the top of the list), at least :data:`MIN_CANDIDATES`."""
    per_document = math.ceil(chunks / max(1, documents))
    return min(chunks, max(MIN_CANDIDATES, 2 * k * per_document))


def ann_wanted(mode: str, chunks: int) -> bool:
    """Whether a table of ``chunks`` vectors gets an ANN index under ``--ann mode``."""
    if mode not in ANN_MODES:
        raise UserError(f"--ann must be one of {', '.join(ANN_MODES)}, not {mode!r}")
    return mode == "on" or (mode == "auto" and chunks >= ANN_MIN_CHUNKS)


def vector_index(table: Any) -> Any | None:
    """The table version's index on the ``vector`` column (its LanceDB IndexConfig), or None."""
    return next((i for i in table.list_indices() if list(i.columns) == [VECTOR]), None)


@dataclass(frozen=True)
class AnnState:
    """What a search needs of the ANN index: its name and the partitions to probe."""

    name: str
    partitions: int
    probes: int
    refine_factor: int | None = None  # PQ: re-rank this many times the candidates with full vectors
    ef: int | None = None  # HNSW: the search's candidate list (at least the results asked)


def ann_state(table: Any) -> AnnState | None:
    """The ANN index of this table version, or None (then a search scans)."""
    index = vector_index(table)
    if index is None:
        return None
    partitions = partitions_for(trained_rows(index))
    calibration = json.loads((table.schema.field(VECTOR).metadata or {}).get(PROBES_KEY.encode(), b"{}"))
    probes = calibration.get("probes") if calibration.get("index") == index.name else None
    return AnnState(index.name, partitions, probes or probes_for(partitions))


def index_name(rows: int) -> str:
    """The ANN index's name, which records the rows it was trained on (its partitions follow from them)."""
    return f"{VECTOR}_ivf_{rows}"


def trained_rows(index: Any) -> int:
    """The rows an index was trained on (from its name; its indexed rows for one named otherwise)."""
    match = re.fullmatch(rf"{VECTOR}_ivf_(\d+)", index.name)
    return int(match[1]) if match else int(index.num_indexed_rows)


def update_ann_index(table: Any, mode: str) -> str:
    """Bring the table's ANN index in line with ``mode`` and its rows: build it (and calibrate its
    probes), add new rows to it (``optimize``), train it anew (past :data:`RETRAIN_GROWTH` times its
    training rows), or drop it.  What was done, for the build's log ('' when nothing)."""
    if VECTOR not in table.schema.names:
        return ""
    rows = table.count_rows()
    index = vector_index(table)
    if not ann_wanted(mode, rows) or rows == 0:
        if index is None:
            return ""
        table.drop_index(index.name)
        return "ANN index dropped (exact search)"
    if index is not None and rows <= RETRAIN_GROWTH * trained_rows(index):
        stats = table.index_stats(index.name)
        if stats is None or not stats.num_unindexed_rows:
            return ""
        table.optimize()
        return f"ANN index updated ({stats.num_unindexed_rows} new rows)"
    if index is not None:
        table.drop_index(index.name)
    partitions = partitions_for(rows)
    name = index_name(rows)
    table.create_index(VECTOR, config=IvfFlat(distance_type="cosine", num_partitions=partitions), name=name)
    probes, recall = calibrated_probes(table, AnnState(name, partitions, probes_for(partitions)))
    with warnings.catch_warnings():  # its successor, update_field_metadata, is not documented in 0.40
        warnings.simplefilter("ignore", DeprecationWarning)
        table.replace_field_metadata(VECTOR, {PROBES_KEY: json.dumps({"index": name, "probes": probes,
                                                                      "recall@10": recall})})
    return (f"ANN index built ({INDEX_TYPE}, {partitions} partitions over {rows} chunks; {probes} probed per "
            f"search: recall@10 {recall:.3f} against the exact scan on {CALIBRATION_QUERIES} sample queries)")


def calibrated_probes(table: Any, state: AnnState, seed: int = 0) -> tuple[int, float]:
    """The fewest probes, doubling from ``state.probes``, at which the index's top 10 documents have
    recall@10 >= :data:`TARGET_RECALL` against the exact scan, for queries made from the table's own
    chunks (a sampled chunk plus noise, cosine about 0.7 to it); (probes, that recall)."""
    vectors, rows, position = _grouped_vectors(table)
    rng = np.random.default_rng(seed)
    picked = vectors[rng.choice(len(vectors), size=min(CALIBRATION_QUERIES, len(vectors)), replace=False)]
    noisy = picked + rng.standard_normal(picked.shape).astype(np.float32) / np.sqrt(vectors.shape[1])
    queries = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    exact = max_over_rows(queries @ vectors.T, rows)
    truth = [set(np.argsort(-row, kind="stable")[:10].tolist()) for row in exact]
    probes = state.probes
    while True:
        trial = AnnState(state.name, state.partitions, probes)
        found = [document_scores(table, trial, q, 10, vectors, rows, position)[0] for q in queries]
        recall = float(np.mean([len(t & set(np.argsort(-f, kind="stable")[:10].tolist())) / 10
                                for t, f in zip(truth, found, strict=True)]))
        if recall >= TARGET_RECALL or probes >= state.partitions:
            return probes, recall
        probes = min(state.partitions, 2 * probes)


def _grouped_vectors(table: Any) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """The table's vectors with each document's chunks together, chunks per document, id -> position."""
    data = table.to_arrow().select(["id", "chunk", VECTOR])
    ids = data["id"].to_pylist()
    position: dict[str, int] = {}
    owner = np.asarray([position.setdefault(i, len(position)) for i in ids], dtype=np.int64)
    order = np.lexsort((np.asarray(data["chunk"].to_numpy(zero_copy_only=False)), owner))
    column = data[VECTOR].combine_chunks()
    vectors = np.asarray(column.values.to_numpy(zero_copy_only=False), dtype=np.float32)
    vectors = vectors.reshape(-1, column.type.list_size)[order]
    return vectors, np.bincount(owner, minlength=len(position)), position


def nearest_chunks(table: Any, vector: np.ndarray, limit: int, state: AnnState) -> tuple[list[str], list[int]]:
    """The ANN index's ``limit`` nearest chunks to ``vector`` (cosine): their document ids and chunk
    numbers, nearest first."""
    query = (table.search(np.asarray(vector, dtype=np.float32), vector_column_name=VECTOR).distance_type("cosine")
             .nprobes(state.probes).limit(limit).select(["id", "chunk", "_distance"]))
    if state.refine_factor is not None:
        query = query.refine_factor(state.refine_factor)
    if state.ef is not None:
        query = query.ef(max(state.ef, limit))  # HNSW needs ef >= the results asked
    hits = query.to_arrow()
    return hits["id"].to_pylist(), hits["chunk"].to_pylist()


def document_scores(table: Any, state: AnnState, query: np.ndarray, k: int, vectors: np.ndarray,
                    rows: np.ndarray, position: dict[str, int], extra: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """One query's dense document scores through the ANN index: the documents of the candidate chunks
    (and ``extra`` document positions, e.g. BM25's best, for fusion) scored exactly, MaxSim over all
    their chunks (``vectors``: every chunk, documents' chunks consecutive, ``rows`` per document);
    every other document ``-inf``.  Also each document's best chunk (its global row; -1 unscored)."""
    starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    ids, _ = nearest_chunks(table, query, candidate_chunks(k, int(rows.sum()), len(rows)), state)
    found = np.fromiter((position[i] for i in ids), dtype=np.int64, count=len(ids))
    documents = np.unique(found if extra is None else np.concatenate([found, extra]))
    counts = rows[documents]
    members = np.repeat(starts[documents] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) \
        + np.arange(int(counts.sum()))
    chunk_scores = vectors[members] @ np.asarray(query, dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    dense = np.full(len(rows), -np.inf)
    best = np.full(len(rows), -1, dtype=np.int64)
    if len(documents):
        dense[documents] = np.maximum.reduceat(chunk_scores, offsets)
        best[documents] = [int(members[o + np.argmax(chunk_scores[o : o + c])])
                           for o, c in zip(offsets.tolist(), counts.tolist(), strict=True)]
    return dense, best
