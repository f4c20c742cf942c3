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
from longembed.search.snapshot import Snapshot, snapshot_of_rows, systems, write_snapshot
from longembed.search.store import IndexStore, index_errors, table_metadata


def version_snapshot(table: Any, path: str | Path, built_at: str | None = None) -> Snapshot:
    """The snapshot of the table at its checked-out version (every row read into memory, BM25 indexed);
    ``built_at``: when the version was written (default: the table's list of versions says)."""
    metadata = table_metadata(table, path)
    version = int(table.version)
    dense, _ = systems(metadata)
    state = ann_state(table) if dense else None
    return snapshot_of_rows(table.to_arrow(), version, built_at or version_time(table, version), metadata,
                            None if state is None else asdict(state))


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
        snapshot = version_snapshot(table, path, built_at)
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
