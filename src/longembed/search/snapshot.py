"""What a search reads of one complete index version, saved beside the table so that opening it costs
what the query needs: small arrays in memory, the vectors and texts memory-mapped, BM25 loaded as built.

A :class:`Snapshot` holds the version's documents in the table's order (of their chunk 0 rows), their
chunks in order, and per document its id, source, chunk count and text; per chunk its span, location
and page; the chunks' vectors as one (chunks, dimensions) float32 matrix; and the BM25 index of the
documents' texts.  :func:`snapshot_of_rows` makes one from the table's rows (a build, at its end; a
search of an index built before snapshots were saved, in memory), :func:`write_snapshot` saves it in
a folder and :func:`read_snapshot` opens that folder again: ``vectors.npy`` read-only memory-mapped
(``np.load(mmap_mode="r")``: an exact scan reads it through the page cache, nothing is copied into the
process), ``documents.arrow`` and ``chunks.arrow`` (Arrow IPC files, memory-mapped: a result's text is
read when it is shown), and bm25s's files (memory-mapped) for BM25.  A dense index's build also saves
every document's sentence pieces (:class:`SavedPieces`: ``pieces.arrow``, their spans, and
``piece_vectors.npy``, their vectors, memory-mapped), so that a search chooses a result's passage
without the model.  Reading a snapshot imports neither LanceDB nor torch: a BM25-only search never loads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from longembed.errors import UserError
from longembed.locations import Location, marks_from_json
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.passages import WINDOW_WORDS
from longembed.retrieval.strategy import BM25, Strategy

#: the layout of a saved snapshot (a search builds one in memory from the table for any other)
SNAPSHOT_FORMAT = "longembed-snapshot/1"
MANIFEST = "manifest.json"
DOCUMENTS = "documents.arrow"
CHUNKS = "chunks.arrow"
VECTORS = "vectors.npy"
BM25_DIR = "bm25"
PIECES = "pieces.arrow"
PIECE_VECTORS = "piece_vectors.npy"
#: the rule a build's pieces follow (:func:`~longembed.retrieval.passages.document_pieces`): /2 joins the lines of
#: a hard-wrapped paragraph, /1 ended a piece at every line break.  Pieces saved under /1 are still read and
#: shown (a piece is a saved span with its own vector: any rule's windows are real spans of the document), and
#: a rebuild embeds the documents' pieces anew under /2 rather than keeping them; pieces saved under another
#: rule, or another :data:`~longembed.retrieval.passages.WINDOW_WORDS`, are read as absent (embedded at search)
PIECES_FORMAT = "longembed-pieces/2"
#: the piece rules a search reads
READ_PIECES_FORMATS = ("longembed-pieces/1", PIECES_FORMAT)


@dataclass
class SavedPieces:
    """Every document's sentence pieces (:func:`~longembed.retrieval.passages.document_pieces`) and their
    unit vectors (the document prompt), the documents' pieces consecutive in the snapshot's order.

    ``vectors_file``: an ``.npy`` file holding ``vectors`` (a memory map a build filled), moved into the
    snapshot's folder when it is written instead of copied."""

    offsets: np.ndarray  # (documents + 1,): where each document's pieces start, then their count
    starts: np.ndarray  # per piece
    ends: np.ndarray
    vectors: np.ndarray  # (pieces, dimensions) float32
    vectors_file: Path | None = None
    rule: str = PIECES_FORMAT  # the piece rule the spans follow (:data:`PIECES_FORMAT`)

    def of(self, document: int) -> tuple[np.ndarray, np.ndarray]:
        """The document's pieces as a (pieces, 2) array of spans, and their vectors (a view)."""
        first, stop = int(self.offsets[document]), int(self.offsets[document + 1])
        return np.stack([self.starts[first:stop], self.ends[first:stop]], axis=1), self.vectors[first:stop]

    @property
    def count(self) -> int:
        return int(self.offsets[-1])


def piece_offsets(counts: Sequence[int]) -> np.ndarray:
    """Each document's first piece (then the total) from its pieces' counts."""
    return np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))]).astype(np.int64)


@dataclass
class Snapshot:
    """One complete version of an index, as a search reads it (see the module docstring)."""

    version: int
    built_at: str | None
    metadata: dict[str, Any]  # what the table records of its build (strategy, prompts, model)
    doc_ids: list[str]
    sources: list[str]
    rows: np.ndarray  # chunks per document
    starts: np.ndarray  # per chunk, documents' chunks consecutive
    ends: np.ndarray
    vectors: np.ndarray | None  # (chunks, dimensions) float32; None for a BM25-only index
    documents: pa.Table  # per document: "text", and "marks" (its location map as JSON) when the index has maps
    chunks: pa.Table  # per chunk: "location", "page"
    bm25: Any | None  # the bm25s index of the documents' texts (None: the strategy has no BM25)
    ann: dict[str, Any] | None = None  # the ANN index's name, partitions and probes (None: exact scan)
    folder: Path | None = None  # where it was read from (None: built in memory)
    pieces: SavedPieces | None = None  # the pieces' vectors saved at build time (None: a search embeds them)

    def text(self, document: int) -> str:
        """The whole text of the document at this position (memory-mapped: read, and checked, here)."""
        try:
            return str(self.documents.column("text")[document].as_py())
        except UnicodeDecodeError:
            raise UserError(f"{self.folder}/{DOCUMENTS}: the text of document {self.doc_ids[document]!r} is damaged "
                            "(not UTF-8); run longembed index with the same sources and --index on this index to save "
                            "its files anew (nothing is embedded again)") from None

    def marks(self, document: int) -> tuple[Location, ...]:
        """The document's location map (empty: it has none, or the index was built before maps were stored)."""
        if "marks" not in self.documents.column_names:
            return ()
        try:
            return marks_from_json(self.documents.column("marks")[document].as_py())
        except (UnicodeDecodeError, ValueError, TypeError):  # JSON, UTF-8 or its shape
            raise UserError(f"{self.folder}/{DOCUMENTS}: the location map of document {self.doc_ids[document]!r} is "
                            "damaged; run longembed index with the same sources and --index on this index to save "
                            "its files anew (nothing is embedded again)") from None

    def location(self, chunk: int) -> tuple[str | None, int | None]:
        """Where the chunk at this position is ("page 12", "Install > Models") and its first page."""
        return self.chunks.column("location")[chunk].as_py(), self.chunks.column("page")[chunk].as_py()


def systems(metadata: dict[str, Any]) -> tuple[bool, bool]:
    """(dense, lexical): whether the index's strategy has vectors, and BM25."""
    strategy = Strategy.from_dict(metadata["config"], default_model=BM25)
    return not strategy.lexical_only, BM25 in strategy.systems


def snapshot_of_rows(table: pa.Table, version: int, built_at: str | None, metadata: dict[str, Any],
                     ann: dict[str, Any] | None = None,
                     read_vectors: Callable[[np.ndarray], np.ndarray] | None = None) -> Snapshot:
    """A snapshot of the table version's rows (``table``: its columns as Arrow), its documents in the
    order of their chunk 0 rows and their chunks in order; BM25 indexed here when the strategy has it.
    ``read_vectors(order)``: the chunks' vectors in that order of the table's rows (a build streams them
    into the file it saves), instead of the table's ``vector`` column."""
    dense, lexical = systems(metadata)
    ids = table["id"].to_pylist()
    chunk_numbers = np.asarray(table["chunk"].to_numpy(zero_copy_only=False), dtype=np.int64)
    firsts = np.flatnonzero(chunk_numbers == 0)
    doc_ids = [ids[i] for i in firsts]
    position = {d: p for p, d in enumerate(doc_ids)}
    owner = np.asarray([position[i] for i in ids], dtype=np.int64)
    order = np.lexsort((chunk_numbers, owner))
    absent = pa.nulls(len(ids))  # an index built before locations existed
    locations = table["location"] if "location" in table.column_names else absent.cast(pa.string())
    pages = table["page"] if "page" in table.column_names else absent.cast(pa.int32())
    texts = table["document"].take(pa.array(firsts)).cast(pa.large_string())
    marks = table["marks"].take(pa.array(firsts)) if "marks" in table.column_names \
        else pa.nulls(len(firsts)).cast(pa.string())
    vectors = None
    if dense and read_vectors is not None:
        vectors = read_vectors(order)
    elif dense:
        column = table["vector"].combine_chunks()
        width = column.type.list_size
        vectors = np.asarray(column.values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, width)[order]
    taken = pa.array(order)
    return Snapshot(
        version=version, built_at=built_at, metadata=metadata, doc_ids=doc_ids,
        sources=table["source"].take(pa.array(firsts)).to_pylist(),
        rows=np.bincount(owner, minlength=len(doc_ids)),
        starts=np.asarray(table["start"].to_numpy(zero_copy_only=False), dtype=np.int64)[order],
        ends=np.asarray(table["end"].to_numpy(zero_copy_only=False), dtype=np.int64)[order],
        vectors=vectors,
        documents=pa.table({"text": texts, "marks": marks}),
        chunks=pa.table({"location": locations.take(taken), "page": pages.take(taken)}),
        bm25=BM25Model().index(texts.to_pylist()) if lexical and doc_ids else None,
        ann=ann,
    )


def write_snapshot(snapshot: Snapshot, folder: Path) -> None:
    """Save ``snapshot`` in ``folder`` (empty; see the module docstring for its files)."""
    columns = {"id": pa.array(snapshot.doc_ids, pa.string()), "source": pa.array(snapshot.sources, pa.string()),
               "rows": pa.array(snapshot.rows, pa.int64()), "text": snapshot.documents["text"],
               **_marks_column(snapshot.documents)}
    if snapshot.pieces is not None:
        columns["pieces"] = pa.array(np.diff(snapshot.pieces.offsets), pa.int64())
        _write_pieces(snapshot.pieces, folder)
    documents = pa.table(columns)
    chunks = pa.table({"start": pa.array(snapshot.starts, pa.int64()), "end": pa.array(snapshot.ends, pa.int64()),
                       "location": snapshot.chunks["location"], "page": snapshot.chunks["page"]})
    _write_arrow(documents, folder / DOCUMENTS)
    _write_arrow(chunks, folder / CHUNKS)
    if _written_to(snapshot.vectors, folder / VECTORS):
        snapshot.vectors.flush()  # streamed into the file by the build
    elif snapshot.vectors is not None:
        np.save(folder / VECTORS, np.ascontiguousarray(snapshot.vectors, dtype=np.float32), allow_pickle=False)
    if snapshot.bm25 is not None:
        (folder / BM25_DIR).mkdir()
        BM25Model().save_index(snapshot.bm25, folder / BM25_DIR)
    manifest = {"format": SNAPSHOT_FORMAT, "version": snapshot.version, "built_at": snapshot.built_at,
                "metadata": snapshot.metadata, "ann": snapshot.ann, "documents": len(snapshot.doc_ids),
                "chunks": int(len(snapshot.starts)), "bm25": snapshot.bm25 is not None,
                "pieces": None if snapshot.pieces is None else {"format": snapshot.pieces.rule, "max_words": WINDOW_WORDS,
                                                                "count": snapshot.pieces.count}}
    (folder / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")


def read_snapshot(folder: Path) -> Snapshot:
    """The snapshot saved in ``folder``, its vectors and texts memory-mapped (see the module docstring);
    BM25 loaded as saved when the strategy has it (indexed again, here, when it was saved with other settings
    than this installation's: another bm25s or PyStemmer would score otherwise).  A file the version needs
    that is missing is a FileNotFoundError, never a snapshot without it."""
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    if manifest.get("format") != SNAPSHOT_FORMAT:
        raise UserError(f"{folder}: saved by another longembed ({manifest.get('format')!r}, not {SNAPSHOT_FORMAT!r}); "
                        "run longembed index again to save it anew")
    dense, lexical = systems(manifest["metadata"])
    documents = _read_arrow(folder / DOCUMENTS)
    chunks = _read_arrow(folder / CHUNKS)
    vectors = np.load(folder / VECTORS, mmap_mode="r") if dense else None  # FileNotFoundError when missing
    bm25 = None
    if lexical:
        model = BM25Model()
        bm25 = model.load_index(folder / BM25_DIR) if manifest.get("bm25") else None
        if bm25 is None:
            bm25 = model.index(documents["text"].to_pylist())
    return Snapshot(
        version=int(manifest["version"]), built_at=manifest["built_at"], metadata=manifest["metadata"],
        doc_ids=documents["id"].to_pylist(), sources=documents["source"].to_pylist(),
        rows=_int64s(documents["rows"]), starts=_int64s(chunks["start"]), ends=_int64s(chunks["end"]),
        vectors=vectors,
        documents=documents.select([name for name in ("text", "marks") if name in documents.column_names]),
        chunks=chunks.select(["location", "page"]), bm25=bm25, ann=manifest.get("ann"), folder=folder,
        pieces=_read_pieces(folder, manifest, documents),
    )


def _written_to(vectors: np.ndarray | None, file: Path) -> bool:
    """Whether ``vectors`` is a memory map of ``file`` already (nothing to copy)."""
    return isinstance(vectors, np.memmap) and vectors.filename is not None and Path(vectors.filename) == file.resolve()


def _marks_column(documents: pa.Table) -> dict[str, pa.ChunkedArray]:
    """The documents' "marks" column to save, when the snapshot has one."""
    return {"marks": documents["marks"]} if "marks" in documents.column_names else {}


def _write_pieces(pieces: SavedPieces, folder: Path) -> None:
    _write_arrow(pa.table({"start": pa.array(pieces.starts, pa.int64()), "end": pa.array(pieces.ends, pa.int64())}),
                 folder / PIECES)
    if pieces.vectors_file is not None:
        if isinstance(pieces.vectors, np.memmap):
            pieces.vectors.flush()
        os.replace(pieces.vectors_file, folder / PIECE_VECTORS)  # the same disk: the index's folder
        pieces.vectors_file = None
    else:
        np.save(folder / PIECE_VECTORS, np.ascontiguousarray(pieces.vectors, dtype=np.float32), allow_pickle=False)


def _read_pieces(folder: Path, manifest: dict[str, Any], documents: pa.Table) -> SavedPieces | None:
    """The saved pieces, their vectors memory-mapped; None when none were saved, or under a rule this
    installation does not read (:data:`READ_PIECES_FORMATS`)."""
    saved = manifest.get("pieces") or {}
    if saved.get("format") not in READ_PIECES_FORMATS or saved.get("max_words") != WINDOW_WORDS:
        return None
    pieces = _read_arrow(folder / PIECES)
    vectors = np.load(folder / PIECE_VECTORS, mmap_mode="r")
    offsets = piece_offsets(_int64s(documents["pieces"]))
    if len(vectors) != offsets[-1] or pieces.num_rows != offsets[-1]:
        raise ValueError(f"{len(vectors)} piece vectors and {pieces.num_rows} pieces for {offsets[-1]} counted")
    return SavedPieces(offsets, _int64s(pieces["start"]), _int64s(pieces["end"]), vectors, rule=saved["format"])


def _int64s(column: pa.ChunkedArray) -> np.ndarray:
    """An int64 column without nulls as numpy, a view of its buffers (pyarrow's ``to_numpy`` imports
    pandas, a second of a cold search)."""
    parts = [np.frombuffer(chunk.buffers()[1], dtype=np.int64, count=len(chunk), offset=8 * chunk.offset)
             for chunk in column.chunks]
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _write_arrow(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _read_arrow(path: Path) -> pa.Table:
    """An Arrow IPC file memory-mapped: its columns are views of the file, read when touched."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
