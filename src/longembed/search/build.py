"""``longembed index``: documents -> a LanceDB index that searches exactly as ``eval`` scored.

    plan (read every source, compare with the index: added, changed, removed, unchanged)
    -> delete the rows of changed and removed documents -> embed the rest in batches (the next batches
    tokenized in a background thread while the model encodes this one: :mod:`longembed.search.prefetch`),
    appended in large groups of whole documents, each one Lance version -> bring the ANN index up to date (:mod:`longembed.search.ann`:
    built from :data:`~longembed.search.ann.ANN_MIN_CHUNKS` chunks, or as ``ann`` says) -> move the
    ``complete`` tag to the last version, its snapshot saved beside the table first
    (:mod:`longembed.search.snapshot`: what a search opens, BM25 indexed once, here; for a dense
    strategy every document's sentence pieces embedded with it, :mod:`longembed.search.piece_vectors`,
    unless ``passage_vectors`` is False).

One build per index at a time: a build holds the index's lock (:meth:`IndexStore.build_lock`: a file
in a folder, a lock object on S3); a second one refuses at once, naming the index.  On S3 the build
checks that it still holds the lock before it moves the ``complete`` tag.

Incremental: a document whose text (sha256) and source are unchanged is not embedded again (nor are
its sentence pieces: the last complete snapshot's vectors are kept).  A build
with another strategy, model or prompt than the index's is refused unless ``rebuild``.

Crash-safe: every append holds whole documents and is one atomic Lance commit, and a search reads
the version the ``complete`` tag names.  A build killed at any point leaves whole documents behind;
the next build keeps those whose text it wants (they are the rows an uninterrupted build would have
written, in the same order), deletes the rest and embeds what is missing, so its table equals an
uninterrupted build's row for row and vector for vector.

Timed: the report's :class:`~longembed.search.stages.StageTimes` says where the wall time went (reading,
loading, planning, tokenizing, encoding, writing, passages, finishing) and the tokens per second.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import longembed
from longembed.diskspace import check_free_space
from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.retrieval.model_files import model_identity, same_files
from longembed.retrieval.strategy import BM25, TOKENS_NOT_SEARCHABLE, Strategy
from longembed.search.ann import ann_wanted, update_ann_index
from longembed.search.build_precision import PrecisionCheck, build_encoder, with_dtype
from longembed.search.embedding import DocumentEmbedder, VectorLookup, resolved_prompts
from longembed.search.piece_vectors import PieceCounts, embed_pieces, previous_snapshot, scratch_file
from longembed.search.prefetch import prefetched
from longembed.search.query_program import save_query_program
from longembed.search.snapshot import Snapshot
from longembed.search.sources import Document
from longembed.search.stages import StageTimes
from longembed.search.store import (
    INDEX_FORMAT,
    LOCK_EXPIRY_SECONDS,
    LOCKED_SCHEMES,
    BuildLock,
    ChunkRows,
    IndexStore,
    complete_version,
    delete_documents,
    documents_in,
    index_errors,
    mark_complete,
    remote_scheme,
    table_metadata,
)
from longembed.search.strategy_encoder import recorded_dtype
from longembed.search.table_snapshot import check_readable, save_snapshot
from longembed.search.truncation import truncation_facts, truncation_text, update_truncated
from longembed.search.version_files import keeps_files, point_to, saved_version, work_folder

#: documents per encode call
BATCH_DOCUMENTS = 32
#: batches tokenized ahead of the model, in a background thread (0: tokenize each batch just before it
#: is encoded, on the build's thread)
PREFETCH_BATCHES = 2
#: rows per Lance append (whole documents: a group ends at the first batch that reaches it): each append is
#: a version and a fragment, costly per call and for every later read
WRITE_ROWS = 2048
#: the longest a finished batch waits for its append: what a crash can lose, in encoding time
WRITE_SECONDS = 30.0
#: the longest document (in characters) a chunked strategy takes: it tokenizes and embeds every token of a
#: document at once (late chunking holds every token's state: about 1 GB of memory per MiB of text with a
#: 384-dimension model), so a longer one is refused before anything is loaded.  A truncating strategy
#: reads only the first Lt tokens of any document and takes documents of any length.
MAX_CHUNKED_DOCUMENT_CHARS = 4 * 2**20
#: free space a build leaves beyond what its rows take (Lance's manifests, the ANN index, other writers)
INDEX_DISK_MARGIN = 64 * 2**20


@dataclass
class BuildPlan:
    """What a build will do, decided before anything is written."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    to_delete: list[str] = field(default_factory=list)  # ids whose rows go (changed, removed, stale)
    to_embed: list[Document] = field(default_factory=list)  # in source order
    resumed: int = 0  # documents an interrupted build already embedded and this one keeps

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "changed": len(self.changed), "removed": len(self.removed),
                "unchanged": self.unchanged}

    def summary(self) -> str:
        text = ", ".join(f"{n} {what}" for what, n in self.counts().items())
        return text + (f" ({self.resumed} kept from an interrupted build)" if self.resumed else "")


@dataclass
class BuildReport:
    """What a build did: the plan's counts, the index's size and the version searches now read."""

    plan: BuildPlan
    documents: int
    chunks: int
    version: int
    ann: str = ""  # what the build did to the ANN index ('' nothing)
    precision: str = ""  # the dtype it embedded in and why (build_precision.PrecisionCheck.reason; '' BM25)
    times: StageTimes = field(default_factory=StageTimes)
    encoded: int = 0  # vectors this build computed
    from_cache: int = 0  # vectors it read from the embedding cache (index --from-advice: advise's)
    truncated: dict[str, int] = field(default_factory=dict)  # the index's documents cut (truncation_facts)
    window: int | None = None  # the tokens a truncating strategy reads of a document
    #: sentence pieces embedded and reused for the saved passage vectors (None: none saved)
    pieces: PieceCounts | None = None
    pieces_note: str = ""  # why no passage vectors were saved ('' when they were, or for BM25)

    def summary(self) -> str:
        """Two lines: what the build did, and where its time went."""
        return (f"{self.plan.summary()}; the index holds {self.documents} documents, {self.chunks} "
                f"{'chunks' if self.chunks != self.documents else 'rows'} (version {self.version})"
                + (f"; {self.ann}" if self.ann else "") + (f"; dtype {self.precision}" if self.precision else "")
                + self.vectors_text() + self.pieces_text()
                + (f"; {truncation_text(self.truncated, self.window)}" if self.truncated.get("documents") else "")
                + "\n" + self.times.summary())

    def pieces_text(self) -> str:
        """"; passage pieces: 4,210 embedded, 51,800 kept" (or why none were saved; empty for BM25)."""
        if self.pieces is None:
            return f"; {self.pieces_note}" if self.pieces_note else ""
        return f"; passage pieces: {self.pieces.embedded:,} embedded, {self.pieces.reused:,} kept from the last build"

    def vectors_text(self) -> str:
        """"; 120 vectors computed, 3,400 read from the embedding cache" (empty when none came from it)."""
        if not self.from_cache:
            return ""
        return f"; {self.encoded:,} vectors computed, {self.from_cache:,} read from the embedding cache (not embedded again)"


class GroupedAppends:
    """Appends rows to a Lance table in groups of at least ``rows`` rows (whole batches, so whole
    documents), or sooner when the oldest waiting batch is ``seconds`` old; timed as writing."""

    def __init__(self, table: Any, times: StageTimes, rows: int = WRITE_ROWS, seconds: float = WRITE_SECONDS) -> None:
        self.table, self.times, self.rows, self.seconds = table, times, rows, seconds
        self.waiting: list[ChunkRows] = []
        self.oldest = 0.0

    def add(self, rows: ChunkRows) -> None:
        """Queue one batch's rows; append the group when it is large or old enough."""
        with self.times.stage("writing"):
            if not self.waiting:
                self.oldest = time.monotonic()
            self.waiting.append(rows)
            if sum(len(r.ids) for r in self.waiting) >= self.rows or time.monotonic() - self.oldest >= self.seconds:
                self._append()

    def flush(self) -> None:
        """Append what waits."""
        with self.times.stage("writing"):
            self._append()

    def _append(self) -> None:
        if self.waiting:
            self.table.add(joined_rows(self.waiting).table(self.table.schema))
            self.waiting = []


def joined_rows(batches: Sequence[ChunkRows]) -> ChunkRows:
    """The rows of ``batches`` as one :class:`ChunkRows`, in order."""
    columns: dict[str, Any] = {}
    for column in dataclasses.fields(ChunkRows):
        if column.name == "vectors":
            vectors = [b.vectors for b in batches if b.vectors is not None]
            columns["vectors"] = np.concatenate(vectors) if vectors else None
        else:
            columns[column.name] = [value for b in batches for value in getattr(b, column.name)]
    return ChunkRows(**columns)


def index_metadata(strategy: Strategy, encoder: LongContextEncoder | None, name: str | None = None,
                   precision: PrecisionCheck | None = None) -> dict[str, Any]:
    """What the table records of its build (and a later build or a search compares): ``dtype``, the
    precision of its vectors (None for BM25), and ``dtype_check``, how a build decided it."""
    return {
        "format": INDEX_FORMAT,
        "strategy": name or strategy.name,
        "config": strategy.to_dict(),
        "prompts": resolved_prompts(strategy, encoder),
        "model": None if encoder is None else {
            "name": model_name(strategy.model, encoder),
            "method": encoder.method, "max_length": encoder.max_length,
            "original_length": encoder.original_length, "dimensions": encoder.embedding_dim,
            "identity": model_identity(encoder),
        },
        "dtype": None if encoder is None else encoder.config.dtype,
        "dtype_check": None if precision is None else precision.to_dict(),
        "longembed_version": longembed.__version__,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def model_name(model: str, encoder: LongContextEncoder) -> str:
    """A model's short name: its folder's name (the packaged default's own name for ``default``)."""
    source = getattr(encoder, "source", None)
    if model == "default" and source is not None:
        return str(source.name).removesuffix(" (packaged)")
    return Path(str(model).rstrip("/")).name or str(model)


def check_same_build(recorded: dict[str, Any], wanted: dict[str, Any], path: str) -> None:
    """A ValueError naming what differs when an index was built otherwise than ``wanted`` (``--rebuild``
    replaces it)."""
    built = Strategy.from_dict(recorded["config"], default_model=BM25)
    if not built.lexical_only:  # the dtype once, float32 spelled as no option (the index's own, when unrecorded)
        built = with_dtype(built, recorded_dtype(recorded))
    differences = [f"{key}: {built.to_dict().get(key)!r} -> {value!r}"
                   for key, value in wanted["config"].items() if built.to_dict().get(key) != value]
    if recorded.get("prompts") != wanted["prompts"]:
        differences.append(f"prompts: {recorded.get('prompts')!r} -> {wanted['prompts']!r}")
    old, new = recorded.get("model") or {}, wanted.get("model") or {}
    if not differences and not same_files(old.get("identity"), new.get("identity")):
        differences.append("the model's files differ from those that built the index")
    if differences:
        raise UserError(f"{path} was built with another strategy ({recorded.get('strategy')}; "
                         f"{'; '.join(differences)}): give --rebuild to replace it, or another --index")


def check_document_sizes(documents: Sequence[Document], strategy: Strategy, limit: int | None = None) -> None:
    """A UserError naming the first document longer than ``limit`` characters (default
    :data:`MAX_CHUNKED_DOCUMENT_CHARS`), for a chunked strategy."""
    if not strategy.chunked:
        return
    limit = MAX_CHUNKED_DOCUMENT_CHARS if limit is None else limit
    for document in documents:
        if len(document.text) > limit:
            raise UserError(
                f"{document.source}: document {document.id!r} has {len(document.text):,} characters "
                f"({len(document.text) / 2**20:.1f} MiB), more than the {limit / 2**20:g} MiB a chunked strategy "
                "embeds in one piece; split it into smaller files, or index with a strategy that reads each "
                "document's first tokens only (--granularity document)")


def index_bytes(documents: Sequence[Document], strategy: Strategy, dimensions: int | None) -> int:
    """A lower bound on the bytes an index of ``documents`` adds: their text (twice for a chunked
    strategy: the chunks' texts and the document's) and a vector per document (at least)."""
    copies = 2 if strategy.chunked else 1
    text = sum(len(d.text.encode("utf-8")) for d in documents)
    return copies * text + len(documents) * 4 * (dimensions or 0)


def check_index_space(path: str | Path, documents: Sequence[Document], strategy: Strategy,
                      dimensions: int | None, margin: int = INDEX_DISK_MARGIN) -> None:
    """A :class:`~longembed.diskspace.DiskFullError` before anything is encoded when the disk that holds
    the index has not :func:`index_bytes` plus ``margin`` free (a local index; object storage is not asked)."""
    if remote_scheme(path) is not None or not documents:
        return
    check_free_space(path, index_bytes(documents, strategy, dimensions), margin,
                     f"the {len(documents)} documents to index",
                     "free space on that disk, or give --index a folder on a larger one")


def plan_build(documents: Sequence[Document], committed: dict[str, tuple[str, str]],
               present: dict[str, tuple[str, str]], keep: Sequence[str] = ()) -> BuildPlan:
    """The plan from the documents wanted, those of the last complete build (``committed``: counts) and
    those the table holds now (``present``: an interrupted build's rows included); the ids in ``keep``
    (files that could not be read this time) keep whatever rows they have, neither removed nor changed."""
    plan = BuildPlan()
    wanted = {d.id: (d.sha256, d.source) for d in documents}
    kept_as_is = set(keep) - set(wanted)
    committed = {i: held for i, held in committed.items() if i not in kept_as_is}
    present = {i: held for i, held in present.items() if i not in kept_as_is}
    for document in documents:
        before = committed.get(document.id)
        if before is None:
            plan.added.append(document.id)
        elif before != wanted[document.id]:
            plan.changed.append(document.id)
        else:
            plan.unchanged += 1
    plan.removed = [i for i in committed if i not in wanted]
    plan.to_delete = [i for i, held in present.items() if wanted.get(i) != held]
    kept = {i for i, held in present.items() if wanted.get(i) == held}
    plan.to_embed = [d for d in documents if d.id not in kept]
    plan.resumed = sum(1 for i in kept if committed.get(i) != wanted[i])
    return plan


def build_index(
    path: str | Path,
    documents: Sequence[Document],
    strategy: Strategy,
    *,
    name: str | None = None,
    rebuild: bool = False,
    ann: str = "auto",
    device: str | None = None,
    batch_size: int = 16,
    batch_documents: int = BATCH_DOCUMENTS,
    engine: Callable[..., Any] | None = None,
    on_plan: Callable[[BuildPlan, LongContextEncoder | None], None] | None = None,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
    keep: Sequence[str] = (),
    prefetch: int = PREFETCH_BATCHES,
    write_rows: int = WRITE_ROWS,
    times: StageTimes | None = None,
    cached: Callable[[LongContextEncoder, str], VectorLookup | None] | None = None,
    lock_expiry: float = LOCK_EXPIRY_SECONDS,
    passage_vectors: bool = True,
    pieces_from: str | Path | None = None,
) -> BuildReport:
    """Index ``documents`` at ``path`` with ``strategy`` (see the module docstring), recorded as ``name``
    (default: the strategy's own, e.g. ``late-chunks+bm25``).

    ``engine``: None embeds here; a callable ``engine(documents, embedder_args, append)`` embeds
    elsewhere (``longembed.search.ray_build``) and calls ``append(rows)`` per batch of whole documents.
    ``on_plan(plan, encoder)``: called before any vector is computed (the CLI prints the estimate).
    ``ann``: auto (an ANN index from :data:`~longembed.search.ann.ANN_MIN_CHUNKS` chunks), on, off.
    ``keep``: ids of documents whose files could not be read this time: the rows they have stay.
    ``prefetch``: batches tokenized ahead in a background thread (0: none); ``write_rows``: rows per append.
    ``times``: the stage times so far (the caller's reading of the sources); the report carries them.
    ``cached(encoder, document_prompt)``: where vectors computed before may be found (``index
    --from-advice``: advise's embedding cache), so they are not computed again; the local engine only.
    ``lock_expiry``: on S3, the seconds after which a build that stopped renewing its lock (killed)
    loses it to the next build.
    ``passage_vectors``: embed every document's sentence pieces and save them with the version (a dense
    strategy, an index on disk or S3), so that a search chooses passages without the model; False: a search
    embeds its results' pieces (``index --no-passage-vectors``: less disk and build time).
    ``pieces_from``: another index of these documents whose saved passage vectors a new index may take
    where they are the same vectors (same model, dtype, prompts and strategy but for its fusion with BM25:
    a hybrid's dense twin), when this index has no saved version of its own to reuse.
    A BlockingIOError when another build holds the index.
    """
    if prefetch < 0 or write_rows < 1 or batch_documents < 1:
        raise UserError(f"prefetch must be >= 0, write_rows and batch_documents >= 1 (got {prefetch}, "
                        f"{write_rows}, {batch_documents})")
    if strategy.multivector:
        raise UserError(TOKENS_NOT_SEARCHABLE)
    ann_wanted(ann, 0)  # a bad mode fails before anything is loaded
    check_document_sizes(documents, strategy)
    times = StageTimes() if times is None else times
    start = time.perf_counter()
    store = IndexStore(path, lock_expiry)
    say = log or (lambda _: None)
    if store.scheme is not None and store.scheme not in LOCKED_SCHEMES:
        say(f"note: --index {path}: {store.scheme}:// has no build lock in longembed yet (s3:// has): "
            "run one build of this index at a time")
    with store.build_lock() as lock, index_errors(path, writing=True):
        times.add("planning", time.perf_counter() - start)  # opening the database, taking its lock
        report = _build(store, path, documents, strategy, name, rebuild, ann, device, batch_size, batch_documents,
                        engine, on_plan, show_progress, say, keep, prefetch, write_rows, times, cached, lock,
                        passage_vectors, pieces_from)
    times.stop()
    return report


def _build(store: IndexStore, path: str | Path, documents: Sequence[Document], strategy: Strategy,
           name: str | None, rebuild: bool, ann: str, device: str | None, batch_size: int, batch_documents: int,
           engine: Callable[..., Any] | None, on_plan: Callable[[BuildPlan, LongContextEncoder | None], None] | None,
           show_progress: bool, say: Callable[[str], None], keep: Sequence[str], prefetch: int, write_rows: int,
           times: StageTimes,
           cached: Callable[[LongContextEncoder, str], VectorLookup | None] | None = None,
           lock: BuildLock | None = None, passage_vectors: bool = True,
           pieces_from: str | Path | None = None) -> BuildReport:
    with times.stage("planning"):
        table, committed, present = None, {}, {}
        if not rebuild and store.has_table():  # a damaged table is never opened to be replaced
            table = store.table()
        recorded = None if table is None else table_metadata(table, path)
    encoder, precision = None, None
    if not strategy.lexical_only:
        with times.stage("loading"):
            strategy, encoder, precision = build_encoder(strategy, documents, device, recorded, batch_size)
        say(f"{path}: dtype {precision.reason}")
    with times.stage("planning"):
        wanted = index_metadata(strategy, encoder, name, precision)
        dimensions = None if encoder is None else encoder.embedding_dim
        if table is not None:
            assert recorded is not None
            check_same_build(recorded, wanted, str(path))
            version = complete_version(table)
            committed = {} if version is None else _documents_at(store, version)
            present = documents_in(table)
        plan = plan_build(documents, committed, present, keep)
        say(f"{path}: {plan.summary()}; {len(plan.to_embed)} documents to embed")
        check_index_space(path, plan.to_embed, strategy, dimensions)  # before a --rebuild drops the old table
        fresh = table is None
        if table is None:
            table = store.create(dimensions, wanted)
        elif plan.to_embed or plan.to_delete:
            check_readable(table)  # the end reads every row (the snapshot): a damaged file refuses before a write
        if on_plan is not None:
            on_plan(plan, encoder)
        if plan.to_delete:
            delete_documents(table, plan.to_delete)
    lookup = None if cached is None or encoder is None or engine is not None else cached(encoder, wanted["prompts"]["document"])
    embedder = DocumentEmbedder(strategy, encoder, batch_size, lookup)
    appends = GroupedAppends(table, times, write_rows)
    with tqdm(total=len(plan.to_embed), desc="index", unit="doc", disable=not show_progress) as bar:
        if engine is None:
            batches = [plan.to_embed[i : i + batch_documents] for i in range(0, len(plan.to_embed), batch_documents)]
            for batch, prepared in prefetched(batches, embedder.prepare, times, depth=prefetch):
                with times.stage("encoding"):
                    rows = embedder.embed(prepared)
                times.tokens += prepared.tokens
                appends.add(rows)
                bar.update(len(batch))
        else:
            start, written = time.perf_counter(), times.seconds["writing"]
            engine(plan.to_embed, strategy, batch_size, batch_documents, appends.add, bar.update)
            # encoded elsewhere: the wait for the workers' rows, the appends apart
            times.add("encoding", time.perf_counter() - start - (times.seconds["writing"] - written))
        appends.flush()
    pieces = PassagePieces(path, encoder, show_progress, reuse=not (rebuild or fresh), elsewhere=pieces_from)
    note = pieces.note(passage_vectors)
    with times.stage("finishing"):
        ann_done = update_ann_index(table, ann)
        table.checkout_latest()
        if lock is not None:
            lock.check()  # another build took an expired lock: publish nothing
        # what a search of this version opens, saved before the version is tagged
        try:
            saved = save_snapshot(path, table, None if note else pieces.add,
                                  None if encoder is None else _program_writer(encoder, path, say))
        finally:
            pieces.discard()
        version = mark_complete(table)
        point_to(path, saved)
        cut = update_truncated(path, embedder.cut, plan.to_delete, fresh)
        report = BuildReport(plan, len(documents_in(table)), table.count_rows(), version, ann_done,
                             "" if precision is None else precision.reason, times, embedder.encoded,
                             embedder.from_cache, truncation_facts(cut), None if encoder is None else encoder.max_length,
                             pieces.counts, note)
    times.move(pieces.seconds, "finishing", "passages")  # embedded while the snapshot was written
    return report


class PassagePieces:
    """The build's passage vectors: every document's sentence pieces embedded into the snapshot it saves
    (:mod:`longembed.search.piece_vectors`), reusing the last complete snapshot's for documents it holds
    unchanged (``reuse``: not for a new or rebuilt table); :attr:`seconds` they took, :attr:`counts`
    what was done."""

    def __init__(self, path: str | Path, encoder: LongContextEncoder | None, show_progress: bool, reuse: bool,
                 elsewhere: str | Path | None = None) -> None:
        self.path, self.encoder = path, encoder
        self.show_progress, self.reuse, self.elsewhere = show_progress, reuse, elsewhere
        self.seconds = 0.0
        self.counts: PieceCounts | None = None
        self.scratch = scratch_file(work_folder(path))

    def note(self, wanted: bool) -> str:
        """Why no passage vectors are saved ('' when they are, or for BM25, which has none)."""
        if self.encoder is None:
            return ""
        if not wanted:
            return "no passage vectors saved (--no-passage-vectors): a search embeds its results' sentences"
        if not keeps_files(self.path):
            return "no passage vectors saved (gs:// and az:// keep no snapshot): a search embeds its results' sentences"
        return ""

    def add(self, snapshot: Snapshot) -> None:
        """Give ``snapshot`` its pieces and their vectors (:func:`~longembed.search.snapshot.save_snapshot`'s
        ``complete``)."""
        if self.encoder is None:
            return
        start = time.perf_counter()
        try:
            previous = previous_snapshot(self._previous_folder(), snapshot.metadata)
            snapshot.pieces, self.counts = embed_pieces(snapshot, self.encoder, snapshot.metadata["prompts"]["document"],
                                                        self.scratch, previous, self.show_progress)
        finally:
            self.seconds += time.perf_counter() - start

    def _previous_folder(self) -> Path | None:
        """The folder of the last complete snapshot (the pointer still names it while this one is
        written), else of ``elsewhere``'s; None when there is none to reuse, or its pointer cannot be read
        (all embedded again)."""
        for index in ([self.path] if self.reuse else []) + ([] if self.elsewhere is None else [self.elsewhere]):
            try:
                saved = saved_version(index)
            except UserError:
                continue
            if saved is not None:
                return saved[1]
        return None

    def discard(self) -> None:
        """Remove the vectors' scratch file when the snapshot did not take it (a failed write)."""
        self.scratch.unlink(missing_ok=True)


def _program_writer(encoder: LongContextEncoder, path: str | Path,
                    say: Callable[[str], None]) -> Callable[[Path, dict[str, Any]], None]:
    """What saves the query program in a version's folder, saying in one line when it cannot."""
    def write(folder: Path, metadata: dict[str, Any]) -> None:
        reason = save_query_program(encoder, metadata, folder)
        if reason is not None:
            say(f"{path}: no query program saved ({reason}); a search loads the model through transformers")
    return write


def _documents_at(store: IndexStore, version: int) -> dict[str, tuple[str, str]]:
    table = store.table()
    table.checkout(version)
    return documents_in(table)
