"""``longembed index``: documents -> a LanceDB index that searches exactly as ``eval`` scored.

    plan (read every source, compare with the index: added, changed, removed, unchanged)
    -> delete the rows of changed and removed documents -> embed the rest in batches, each batch
    appended as one Lance version -> bring the ANN index up to date (:mod:`longembed.search.ann`:
    built from :data:`~longembed.search.ann.ANN_MIN_CHUNKS` chunks, or as ``ann`` says) -> move the
    ``complete`` tag to the last version, its snapshot saved beside the table first
    (:mod:`longembed.search.snapshot`: what a search opens, BM25 indexed once, here).

One build per index at a time: a build holds the index folder's lock (:meth:`IndexStore.build_lock`);
a second one refuses at once, naming the index.

Incremental: a document whose text (sha256) and source are unchanged is not embedded again.  A build
with another strategy, model or prompt than the index's is refused unless ``rebuild``.

Crash-safe: every append holds whole documents and is one atomic Lance commit, and a search reads
the version the ``complete`` tag names.  A build killed at any point leaves whole documents behind;
the next build keeps those whose text it wants (they are the rows an uninterrupted build would have
written, in the same order), deletes the rest and embeds what is missing, so its table equals an
uninterrupted build's row for row and vector for vector.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

import longembed
from longembed.diskspace import check_free_space
from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.retrieval.model_files import model_identity, same_files
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search.ann import ann_wanted, update_ann_index
from longembed.search.embedding import DocumentEmbedder, load_strategy_encoder, resolved_prompts
from longembed.search.sources import Document
from longembed.search.store import (
    INDEX_FORMAT,
    IndexStore,
    complete_version,
    delete_documents,
    documents_in,
    index_errors,
    mark_complete,
    table_metadata,
)
from longembed.search.table_snapshot import check_readable, save_snapshot
from longembed.search.version_files import point_to

#: documents per encode call and per Lance append (a crash loses at most one batch's work)
BATCH_DOCUMENTS = 32
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

    def summary(self) -> str:
        return (f"{self.plan.summary()}; the index holds {self.documents} documents, {self.chunks} "
                f"{'chunks' if self.chunks != self.documents else 'rows'} (version {self.version})"
                + (f"; {self.ann}" if self.ann else ""))


def index_metadata(strategy: Strategy, encoder: LongContextEncoder | None, name: str | None = None) -> dict[str, Any]:
    """What the table records of its build (and a later build or a search compares)."""
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
    built = Strategy.from_dict(recorded["config"], default_model=BM25).to_dict()
    differences = [f"{key}: {built.get(key)!r} -> {value!r}"
                   for key, value in wanted["config"].items() if built.get(key) != value]
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
    if "://" in str(path) or not documents:
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
) -> BuildReport:
    """Index ``documents`` at ``path`` with ``strategy`` (see the module docstring), recorded as ``name``
    (default: the strategy's own, e.g. ``late-chunks+bm25``).

    ``engine``: None embeds here; a callable ``engine(documents, embedder_args, append)`` embeds
    elsewhere (``longembed.search.ray_build``) and calls ``append(rows)`` per batch of whole documents.
    ``on_plan(plan, encoder)``: called before any vector is computed (the CLI prints the estimate).
    ``ann``: auto (an ANN index from :data:`~longembed.search.ann.ANN_MIN_CHUNKS` chunks), on, off.
    ``keep``: ids of documents whose files could not be read this time: the rows they have stay.
    A BlockingIOError when another build holds the index.
    """
    ann_wanted(ann, 0)  # a bad mode fails before anything is loaded
    check_document_sizes(documents, strategy)
    store = IndexStore(path)
    with store.build_lock(), index_errors(path, writing=True):
        return _build(store, path, documents, strategy, name, rebuild, ann, device, batch_size, batch_documents, engine,
                      on_plan, show_progress, log or (lambda _: None), keep)


def _build(store: IndexStore, path: str | Path, documents: Sequence[Document], strategy: Strategy,
           name: str | None, rebuild: bool, ann: str, device: str | None, batch_size: int, batch_documents: int,
           engine: Callable[..., Any] | None, on_plan: Callable[[BuildPlan, LongContextEncoder | None], None] | None,
           show_progress: bool, say: Callable[[str], None], keep: Sequence[str] = ()) -> BuildReport:
    encoder = None if strategy.lexical_only else load_strategy_encoder(strategy, device)
    wanted = index_metadata(strategy, encoder, name)
    dimensions = None if encoder is None else encoder.embedding_dim
    table, committed, present = None, {}, {}
    if not rebuild and store.has_table():  # a damaged table is never opened to be replaced
        table = store.table()
        check_same_build(table_metadata(table, path), wanted, str(path))
        version = complete_version(table)
        committed = {} if version is None else _documents_at(store, version)
        present = documents_in(table)
    plan = plan_build(documents, committed, present, keep)
    say(f"{path}: {plan.summary()}; {len(plan.to_embed)} documents to embed")
    check_index_space(path, plan.to_embed, strategy, dimensions)  # before a --rebuild drops the old table
    if table is None:
        table = store.create(dimensions, wanted)
    elif plan.to_embed or plan.to_delete:
        check_readable(table)  # the end reads every row (the snapshot): a damaged file refuses before a write
    if on_plan is not None:
        on_plan(plan, encoder)
    if plan.to_delete:
        delete_documents(table, plan.to_delete)
    embedder = DocumentEmbedder(strategy, encoder, batch_size)

    def append(rows: Any) -> None:
        table.add(rows.table(table.schema))

    with tqdm(total=len(plan.to_embed), desc="index", unit="doc", disable=not show_progress) as bar:
        if engine is None:
            for start in range(0, len(plan.to_embed), batch_documents):
                batch = plan.to_embed[start : start + batch_documents]
                append(embedder.rows(batch))
                bar.update(len(batch))
        else:
            engine(plan.to_embed, strategy, batch_size, batch_documents, append, bar.update)
    ann_done = update_ann_index(table, ann)
    table.checkout_latest()
    saved = save_snapshot(path, table)  # what a search of this version opens, saved before the version is tagged
    version = mark_complete(table)
    point_to(path, saved)
    return BuildReport(plan, len(documents_in(table)), table.count_rows(), version, ann_done)


def _documents_at(store: IndexStore, version: int) -> dict[str, tuple[str, str]]:
    table = store.table()
    table.checkout(version)
    return documents_in(table)
