"""An index on disk: one LanceDB table of chunk rows, its metadata, and the version searches read.

The table ``chunks`` holds one row per vector (a chunk, or the whole document; for BM25-only indexes
one row per document): the document's ``id``, its ``source`` file, the ``chunk`` number, the chunk's
character span ``start``..``end`` in the document, the document's ``sha256``, the chunk's ``text``,
the whole ``document`` text (on a document's chunk 0 only: BM25 and the passage's context read it), the
chunk's ``location`` ("page 12", "Install > Models": :mod:`longembed.documents`) and first ``page`` (a
PDF's), on chunk 0 the document's location map ``marks`` (JSON, :mod:`longembed.locations`: it places the
passage a search shows), and the ``vector``.  An index built before locations existed has neither column: its rows are
appended without them, and its passages have no location.  The table's schema metadata records what built it (:data:`METADATA_KEY`: the strategy,
the model's files, the prompts, longembed's version), so a search encodes queries as the documents were
encoded, or refuses.

An index is a folder, or a URI LanceDB opens (``s3://bucket/prefix``, ``gs://``, ``az://``), its
credentials and endpoint from the store's usual environment variables (``AWS_ENDPOINT_URL``...).

One build at a time: a build holds :meth:`IndexStore.build_lock` (a file lock beside the table,
released by the operating system if the process dies; on S3 a lock object,
:mod:`longembed.search.object_lock`), and a second build of the same index refuses with a message
saying so, instead of interleaving its writes with the first's.  (On gs:// and az:// there is no lock
yet: the build says so, and one writer per index is the user's to ensure.)

Every change is a new Lance version (an append, a delete).  A build ends by moving the tag
:data:`COMPLETE_TAG` to its last version; a search opens the tagged version, so it always sees the last
complete build, never one half done, and a build killed midway leaves the tag where it was.

A damaged index (a file cut short, zeroed or missing) and a disk that fills up while a build writes
are one line each (:func:`index_errors`), naming the index and what to do (``--rebuild``; free space),
never the database's traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from longembed.diskspace import DiskFullError, is_disk_full
from longembed.errors import MissingExtraError, MissingFileError, UserError
from longembed.search.object_lock import LOCK_EXPIRY_SECONDS, IndexBusyError, ObjectLock

try:  # the ``search`` extra
    import lancedb
    import pyarrow as pa

    LANCEDB_IMPORT_ERROR: ImportError | None = None
    LANCEDB_DIR: Path | None = Path(lancedb.__file__).parent
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    LANCEDB_IMPORT_ERROR = exc
    LANCEDB_DIR = None
    lancedb = pa = None  # type: ignore[assignment]

TABLE = "chunks"
COMPLETE_TAG = "complete"
METADATA_KEY = b"longembed"
INDEX_FORMAT = "longembed-index/1"
INSTALL_HINT = "longembed index/search need LanceDB: pip install 'longembed[search]'"
#: the file a build locks, in the index folder
LOCK_FILE = "build.lock"
#: ids deleted per Lance delete (one predicate each)
DELETE_BATCH = 500
#: the URI schemes of object stores LanceDB reads and writes (``memory://`` is not an index: it dies with the process)
REMOTE_SCHEMES = ("s3", "gs", "az")
#: the schemes whose builds hold a lock object (:mod:`longembed.search.object_lock`)
LOCKED_SCHEMES = ("s3",)


def remote_scheme(path: str | Path) -> str | None:
    """The object store's scheme of an index URI (``s3``, ``gs``, ``az``), None for a local folder; a
    UserError naming the schemes for any other ``scheme://``."""
    text = str(path)
    if "://" not in text:
        return None
    scheme = text.split("://", 1)[0].lower()
    if scheme not in REMOTE_SCHEMES or not text.split("://", 1)[1].strip("/"):
        raise UserError(f"--index {text}: give a folder or an object-storage URI "
                        f"({', '.join(s + '://bucket/prefix' for s in REMOTE_SCHEMES)})")
    return scheme


class BuildLock:
    """What :meth:`IndexStore.build_lock` yields: :meth:`check` before a build publishes its version."""

    def __init__(self, lock: ObjectLock | None = None) -> None:
        self.lock = lock

    def check(self) -> None:
        """A LockLostError when the build no longer holds its lock (an object lock taken over)."""
        if self.lock is not None:
            self.lock.check()


class DamagedIndexError(UserError):
    """The index's files cannot be read (cut short, zeroed, missing): it has to be built again."""


#: how much of the database's message an error quotes
DETAIL_CHARS = 160


@contextmanager
def index_errors(path: str | Path, writing: bool = False) -> Iterator[None]:
    """Turn what the database raises on a damaged index (and a full disk, whoever raises it) into one
    line naming the index and what to do: :class:`DamagedIndexError`, :class:`DiskFullError`.  Errors
    raised outside the database (the model's, a bug's) pass unchanged."""
    try:
        yield
    except UserError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # a Rust panic is a BaseException (pyo3's PanicException)
        if is_disk_full(exc):
            raise DiskFullError(
                f"--index {path}: the disk is full ({_detail(exc)}); free space on it and run the command again"
                + (": the build resumes from what it wrote, and searches read the last complete build meanwhile"
                   if writing else "")) from None
        if raised_by_database(exc) and remote_scheme(path) is not None and unreachable_store(exc):
            raise UserError(
                f"--index {path}: the object store did not answer as an index there ({_detail(exc)}); check that "
                "the bucket exists and the credentials and endpoint (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                "AWS_REGION, AWS_ENDPOINT_URL) are this store's") from None
        if raised_by_database(exc):
            raise DamagedIndexError(
                f"--index {path}: the index is damaged and cannot be read ({_detail(exc)}); build it again: "
                f"longembed index SOURCE... --index {path} --rebuild") from None
        raise


#: what the database's message says when the object store itself failed (no bucket, no access, no answer)
STORE_FAILURES = ("Failed to connect", "RetryError", "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId",
                  "SignatureDoesNotMatch", "ListRequest", "error sending request", "Failed to resolve region",
                  "Generic S3 error", "Generic GCS error", "Generic MicrosoftAzure error", 'store: "')


def unreachable_store(exc: BaseException) -> bool:
    """Whether a database error says the object store failed (rather than the index's files)."""
    text = str(exc)
    return any(marker in text for marker in STORE_FAILURES)


def raised_by_database(exc: BaseException) -> bool:
    """Whether ``exc`` came out of LanceDB (its innermost frame is in the lancedb package), or is a
    Rust panic (pyo3's PanicException, pyo3_async_runtimes' RustPanic)."""
    if type(exc).__name__ in ("PanicException", "RustPanic"):
        return True
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and LANCEDB_DIR is not None and Path(frame.tb_frame.f_code.co_filename).is_relative_to(LANCEDB_DIR)


def _detail(exc: BaseException) -> str:
    """The first line of the database's message, without the Rust source locations it appends."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = text.split(", /rustc/")[0].split(", /root/.cargo/")[0].split(", /home/")[0]
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 3] + "..."


def require_lancedb() -> None:
    if LANCEDB_IMPORT_ERROR is not None:
        raise MissingExtraError(f"{INSTALL_HINT} ({LANCEDB_IMPORT_ERROR})")


def schema(dimensions: int | None, metadata: dict[str, Any]) -> pa.Schema:
    """The chunk table's columns (no ``vector`` for a BM25-only index), the metadata attached."""
    fields = [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("chunk", pa.int32(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("end", pa.int64(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("document", pa.string()),
        pa.field("location", pa.string()),
        pa.field("page", pa.int32()),
        pa.field("marks", pa.string()),  # on a document's chunk 0: its location map (longembed.locations)
    ]
    if dimensions is not None:
        fields.append(pa.field("vector", pa.list_(pa.float32(), dimensions)))
    return pa.schema(fields, metadata={METADATA_KEY: json.dumps(metadata, sort_keys=True).encode()})


@dataclass
class ChunkRows:
    """Rows to append: parallel lists (one entry per chunk) and the vectors, (chunks, dimensions)."""

    ids: list[str]
    sources: list[str]
    chunks: list[int]
    starts: list[int]
    ends: list[int]
    sha256s: list[str]
    texts: list[str]
    documents: list[str | None]
    vectors: np.ndarray | None
    locations: list[str | None] = field(default_factory=list)
    pages: list[int | None] = field(default_factory=list)
    marks: list[str | None] = field(default_factory=list)  # chunk 0: the document's map as JSON; else None

    def table(self, target: pa.Schema) -> pa.Table:
        columns: dict[str, Any] = {
            "id": self.ids, "source": self.sources, "chunk": self.chunks, "start": self.starts, "end": self.ends,
            "sha256": self.sha256s, "text": self.texts, "document": self.documents,
        }
        if "location" in target.names:  # not in an index built before locations existed
            columns["location"] = self.locations or [None] * len(self.ids)
            columns["page"] = self.pages or [None] * len(self.ids)
        if "marks" in target.names:  # not in an index built before maps were stored
            columns["marks"] = self.marks or [None] * len(self.ids)
        if "vector" in target.names:
            assert self.vectors is not None
            dimensions = target.field("vector").type.list_size
            flat = pa.array(np.ascontiguousarray(self.vectors, dtype=np.float32).reshape(-1))
            columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, dimensions)
        return pa.table(columns, schema=target)


class IndexStore:
    """The LanceDB database of one index folder (or object-storage URI: ``s3://bucket/index``)."""

    def __init__(self, path: str | Path, lock_expiry: float = LOCK_EXPIRY_SECONDS) -> None:
        require_lancedb()
        self.path = str(path)
        self.scheme = remote_scheme(self.path)
        self.lock_expiry = lock_expiry
        # the folders connect creates (the index's and missing parents): a build that fails removes them
        self.new_folders = [] if self.scheme else _missing_folders(Path(self.path))
        self.db = lancedb.connect(self.path)

    @staticmethod
    def exists(path: str | Path) -> bool:
        """Whether ``path`` holds an index table (a local check; a URI is taken to exist, and opening it
        says when it holds none)."""
        local = Path(str(path))
        return remote_scheme(path) is not None or (local / f"{TABLE}.lance").is_dir()

    @contextmanager
    def build_lock(self) -> Iterator[BuildLock]:
        """Held while a build writes (an IndexBusyError, a BlockingIOError, naming the index when another
        build holds it): a file lock in a folder, a lock object on S3, none on gs:// and az://."""
        if self.scheme in LOCKED_SCHEMES:
            lock = ObjectLock(self.path, self.lock_expiry)
            lock.acquire()
            try:
                yield BuildLock(lock)
            finally:
                lock.release()
            return
        if self.scheme is not None:
            yield BuildLock()
            return
        folder = Path(self.path)
        new_lock = not (folder / LOCK_FILE).exists()
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(folder / LOCK_FILE), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise IndexBusyError(f"--index {self.path}: another longembed index is building this index now (it "
                               f"holds {folder / LOCK_FILE}); wait until it finishes, then run again") from None
        try:
            yield BuildLock()
        except BaseException:
            _remove_what_a_failed_build_left(folder, self.new_folders, new_lock)
            raise
        finally:
            lock.release()

    def has_table(self) -> bool:
        return TABLE in self.db.list_tables().tables

    def create(self, dimensions: int | None, metadata: dict[str, Any]) -> Any:
        """A new, empty chunk table (replacing any: ``--rebuild``, a damaged one too)."""
        local = Path(self.path) / f"{TABLE}.lance"
        if self.scheme is None and local.exists():
            shutil.rmtree(local)  # what drop_table does, and it works when the table cannot be opened
        elif self.has_table():
            self.db.drop_table(TABLE)
        return self.db.create_table(TABLE, schema=schema(dimensions, metadata))

    def table(self) -> Any:
        """The chunk table at its latest version (what a build writes to)."""
        return self.db.open_table(TABLE)

    def complete_table(self) -> Any:
        """The chunk table at the last complete build's version (what a search reads)."""
        if not self.has_table():
            raise MissingFileError(f"{self.path}: not an index (no '{TABLE}' table; build one with longembed index)")
        table = self.db.open_table(TABLE)
        version = complete_version(table)
        if version is None:
            raise MissingFileError(f"{self.path}: no build of this index has finished yet (run longembed index "
                                    "again to finish it)")
        table.checkout(version)
        return table


def complete_version(table: Any) -> int | None:
    """The version the :data:`COMPLETE_TAG` names (None before the first build finished)."""
    tags = table.tags.list()
    return int(tags[COMPLETE_TAG]["version"]) if COMPLETE_TAG in tags else None


def mark_complete(table: Any) -> int:
    """Move the complete tag to the table's latest version; the version."""
    table.checkout_latest()
    version = int(table.version)
    if complete_version(table) is None:
        table.tags.create(COMPLETE_TAG, version)
    else:
        table.tags.update(COMPLETE_TAG, version)
    return version


def table_metadata(table: Any, path: str | Path | None = None) -> dict[str, Any]:
    """What the table's schema records of its build (see :data:`METADATA_KEY`); an error naming the
    index (``path``) when it records none, or not as JSON (not a longembed index, or a damaged one)."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    where = table.name if path is None else f"--index {path}"
    try:
        recorded = None if raw is None else json.loads(raw)
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict) or "config" not in recorded:
        raise DamagedIndexError(f"{where}: the table records no longembed build (not a longembed index, or a "
                                f"damaged one); build it again with --rebuild, or give another --index")
    return recorded


def documents_in(table: Any) -> dict[str, tuple[str, str]]:
    """id -> (sha256, source) of every document the table version holds (its chunk 0 rows)."""
    rows = table.search().where("chunk = 0").select(["id", "sha256", "source"]).limit(None).to_arrow() \
        if table.count_rows() else None
    if rows is None:
        return {}
    return {i: (s, src) for i, s, src in zip(rows["id"].to_pylist(), rows["sha256"].to_pylist(),
                                            rows["source"].to_pylist(), strict=True)}


def indexed_text(table: Any, document_id: str) -> str | None:
    """The text the index holds for ``document_id`` (what the model read), or None when it holds no such
    document."""
    quoted = document_id.replace("'", "''")
    rows = table.search().where(f"id = '{quoted}' AND chunk = 0").select(["document"]).limit(1).to_arrow()
    return rows["document"][0].as_py() if rows.num_rows else None


def delete_documents(table: Any, ids: Iterable[str]) -> None:
    """Delete every row of these documents (a Lance version per :data:`DELETE_BATCH` ids)."""
    ids = list(ids)
    for start in range(0, len(ids), DELETE_BATCH):
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids[start : start + DELETE_BATCH])
        table.delete(f"id IN ({quoted})")


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_what_a_failed_build_left(folder: Path, new_folders: list[Path], new_lock: bool) -> None:
    """A build that failed before writing a table (a refused model, a bad option) leaves nothing behind:
    the lock file it made, and the folders made for the index, are removed while the lock is still held."""
    if any(entry.name != LOCK_FILE for entry in folder.iterdir()):
        return  # a table (an interrupted build's rows, kept for the next build to resume from)
    if new_lock:
        (folder / LOCK_FILE).unlink(missing_ok=True)
    for made in new_folders:
        if made.is_dir() and not any(made.iterdir()):
            made.rmdir()
