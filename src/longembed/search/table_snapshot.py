"""An index's :class:`~longembed.search.snapshot.Snapshot` from its LanceDB table: saved by a build at
its end (:func:`save_snapshot`), read into memory by a search of an index that has none saved
(:func:`read_table_snapshot`), and the table version an ANN search asks (:class:`AnnSearch`).

This is the search's only path to LanceDB (and its import, as costly as torch's): a search of an index
with saved files imports it only when the index has an ANN index.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from longembed.search import version_files
from longembed.search.ann import AnnState, ann_state, document_scores
from longembed.search.snapshot import VECTORS, Snapshot, snapshot_of_rows, systems, write_snapshot
from longembed.search.store import IndexStore, index_errors, table_metadata

#: the table's columns a snapshot reads (not the chunks' texts nor the documents' hashes; the vectors apart)
SNAPSHOT_COLUMNS = ("id", "source", "chunk", "start", "end", "document", "location", "page", "marks")
#: rows per block when a build streams the vectors into its snapshot
READ_ROWS = 65_536


def version_snapshot(table: Any, path: str | Path, built_at: str | None = None,
                     vectors_file: Path | None = None) -> Snapshot:
    """The snapshot of the table at its checked-out version (the columns it needs read into memory, not
    the chunks' texts; BM25 indexed); ``built_at``: when the version was written (default: the table's list
    of versions says); ``vectors_file``: where the vectors are written, streamed from the table
    :data:`READ_ROWS` rows at a time (a build's; else they are read into memory)."""
    metadata = table_metadata(table, path)
    version = int(table.version)
    dense, _ = systems(metadata)
    state = ann_state(table) if dense else None
    columns = [name for name in SNAPSHOT_COLUMNS if name in table.schema.names]
    if dense and vectors_file is None:
        columns.append("vector")
    rows = table.search().select(columns).limit(None).to_arrow()
    return snapshot_of_rows(rows, version, built_at or version_time(table, version), metadata,
                            None if state is None else asdict(state),
                            None if not dense or vectors_file is None else _vector_reader(table, vectors_file))


def _vector_reader(table: Any, file: Path) -> Callable[[np.ndarray], np.ndarray]:
    """``read_vectors(order)``: the table's vectors written into ``file`` (an ``.npy`` memory map) in
    that order of its rows, :data:`READ_ROWS` at a time: a build never holds them all in memory."""
    def read(order: np.ndarray) -> np.ndarray:
        width = table.schema.field("vector").type.list_size
        vectors = np.lib.format.open_memmap(file, mode="w+", dtype=np.float32, shape=(len(order), width))
        destination = np.empty_like(order)
        destination[order] = np.arange(len(order))  # where each row of the table goes
        first = 0
        for batch in table.search().select(["vector"]).limit(None).to_batches(READ_ROWS):
            flat = batch.column("vector").flatten()  # the batch's own rows (``values`` ignores a slice's offset)
            block = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, width)
            vectors[destination[first : first + len(block)]] = block
            first += len(block)
        if first != len(order):
            raise ValueError(f"{first} vectors read for {len(order)} rows")
        return vectors
    return read


def read_table_snapshot(path: str | Path) -> Snapshot:
    """The snapshot of the index's last complete version, from its table (see the module docstring)."""
    with index_errors(path):
        return version_snapshot(IndexStore(path).complete_table(), path)


def save_snapshot(path: str | Path, table: Any, complete: Callable[[Snapshot], None] | None = None,
                  extra: Callable[[Path, dict[str, Any]], None] | None = None) -> str:
    """Save the snapshot of the table's checked-out version beside it, unless saved already (a build,
    before it tags the version complete; :func:`~longembed.search.version_files.point_to` after); the
    name of its files.  ``complete(snapshot)``: adds to the snapshot before it is written (a build's
    piece vectors); ``extra(folder, metadata)`` adds files to the version's folder (the build's query
    program: :mod:`longembed.search.query_program`); both called only when the files are written (a
    local or S3 index)."""
    now = _dt.datetime.now(_dt.UTC)  # not the table's list of versions: it reads every old manifest
    name = version_files.version_name(int(table.version), now.isoformat(timespec="microseconds"))
    built_at = now.isoformat(timespec="seconds")

    def write(folder: Path) -> None:
        snapshot = version_snapshot(table, path, built_at, folder / VECTORS)
        if complete is not None:
            complete(snapshot)
        write_snapshot(snapshot, folder)
        if extra is not None:
            extra(folder, snapshot.metadata)

    version_files.save(path, name, write)
    return name


def check_readable(table: Any) -> None:
    """Read every row of the table's checked-out version (a DamagedIndexError under
    :func:`~longembed.search.store.index_errors` when a file is damaged): a build calls it before it
    writes, since its end reads them all to save the snapshot, and a refused build writes nothing."""
    if table.count_rows():
        table.to_arrow()


class AnnSearch:
    """The ANN index of one saved version: its table at that version and the probes to use."""

    def __init__(self, path: str | Path, snapshot: Snapshot) -> None:
        assert snapshot.ann is not None
        self.path = path
        self.state = AnnState(**snapshot.ann)
        with index_errors(path):
            self.table = IndexStore(path).table()
            self.table.checkout(snapshot.version)

    def document_scores(self, query: np.ndarray, k: int, vectors: np.ndarray, rows: np.ndarray,
                        position: dict[str, int], extra: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~longembed.search.ann.document_scores` on this version."""
        with index_errors(self.path):  # an ANN search reads the index's files
            return document_scores(self.table, self.state, query, k, vectors, rows, position, extra)


def open_ann(path: str | Path, snapshot: Snapshot) -> AnnSearch:
    return AnnSearch(path, snapshot)


def version_time(table: Any, version: int) -> str | None:
    """When the table's ``version`` was written (ISO 8601), None when the table lists no such version."""
    for entry in table.list_versions():
        if int(entry["version"]) == version:
            stamp = entry["timestamp"]
            return stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp.tzinfo is None else stamp.isoformat()
    return None
