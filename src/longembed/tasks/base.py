"""Shared types of the LongEmbed tasks: metadata, the retrieval data a task yields, and the task interface.

Every task is a small declarative module (a :class:`TaskMetadata` object plus a loader function), in the
spirit of mteb. A task turns a data directory (the ``../shared/data`` layout, or a snapshot of the
``dwzhu/LongEmbed`` hub dataset) into a :class:`RetrievalData`: a corpus, queries and graded relevance
judgements (qrels). Synthetic tasks (passkey, needle) are generated one evaluation length at a time.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from longembed.errors import UserError
from longembed.textfiles import parse_json_line, utf8_lines

#: The eight evaluation lengths (in tokens) of the synthetic tasks (LongEmbed section 3.2).
SYNTHETIC_LENGTHS: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)

#: LongEmbed's rough conversion: 1 token = 0.75 words (section 3.2, footnote 3).
WORDS_PER_TOKEN = 0.75


def word_budget(length: int) -> int:
    """Maximum number of words (``str.split()`` units) of a synthetic document of ``length`` tokens.

    LongEmbed constrains the word count of a document of L tokens to at most ``L * 0.75``.
    """
    return int(length * WORDS_PER_TOKEN)


@dataclass(frozen=True)
class TaskMetadata:
    """What a task is, how it is scored and where its data comes from (its declaration: see
    :mod:`longembed.tasks.registry`).

    ``lengths``: the evaluation lengths of a task generated per length (synthetic: passkey, needle),
    None for a real task.  ``title``: the column header of reports (LongEmbed's short names; None:
    the name).  ``hub_config``: the task's config in the ``dwzhu/LongEmbed`` hub dataset, None for an
    offline stand-in that has none.
    """

    name: str
    description: str
    main_score: str
    lengths: tuple[int, ...] | None
    source: str
    stand_in_for: str | None = None
    title: str | None = None
    hub_config: str | None = None

    @property
    def synthetic(self) -> bool:
        """Whether the task is generated one evaluation length at a time (scored by length)."""
        return self.lengths is not None


@dataclass(frozen=True)
class Passage:
    """Where a corpus document sits in a longer text: ``contexts[context][start:end]``."""

    context: str
    start: int
    end: int


@dataclass(frozen=True)
class Blocks:
    """Candidate blocks: a query ranks only the documents of its own block (query and document id ->
    block number).  A generated set of N queries is N / 50 blocks of the paper's size (50 queries over
    100 documents each), so it is as hard as the paper's set with N queries' precision
    (:func:`longembed.tasks.query_sets.paper_blocks`)."""

    queries: dict[str, int]
    documents: dict[str, int]

    def count(self) -> int:
        """How many blocks there are."""
        return len(set(self.queries.values()) | set(self.documents.values()))


@dataclass
class RetrievalData:
    """A retrieval problem: every query is scored against every document of the corpus.

    Passage tasks also say where each document comes from: ``contexts`` are the long texts (e.g.
    meetings) the corpus's passages are cut from, ``passages`` the place of each corpus document in
    its context (so late chunking can embed a passage with its whole context around it), and
    ``query_contexts`` the context each query searches (its passages only).  Generated sets larger
    than the paper's may instead be cut into ``blocks`` of the paper's size: a query ranks its own
    block's documents only.

    Tasks that know where the answer is give ``answers``: query id -> relevant document id -> the
    character spans of that document that answer the query (the planted needle, the annotated
    transcript turns, the supporting sentences).  They judge the passage a result shows (eval's
    passage hit@1), not the ranking, so they are not part of :meth:`fingerprint`.
    """

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    contexts: dict[str, str] | None = None
    passages: dict[str, Passage] | None = None
    query_contexts: dict[str, str] | None = None
    blocks: Blocks | None = None
    answers: dict[str, dict[str, list[tuple[int, int]]]] | None = None

    def validate(self) -> RetrievalData:
        """Check internal consistency; return ``self`` so loaders can ``return data.validate()``.

        Every judged query must exist, every judged document must exist, and every query must have at
        least one relevant (relevance > 0) document: a query without one cannot be scored.
        """
        if not self.corpus:
            raise UserError("empty corpus")
        if not self.queries:
            raise UserError("no queries")
        for qid, rels in self.qrels.items():
            if qid not in self.queries:
                raise UserError(f"qrels name query {qid!r}, which is not among the queries")
            missing = [d for d in rels if d not in self.corpus]
            if missing:
                raise UserError(f"qrels of query {qid!r} name documents not in the corpus: {missing[:5]}")
            if not any(r > 0 for r in rels.values()):
                raise UserError(f"query {qid!r} has no relevant document")
        unjudged = [q for q in self.queries if q not in self.qrels]
        if unjudged:
            raise UserError(f"{len(unjudged)} queries have no qrels, e.g. {unjudged[:3]}")
        self._validate_passages()
        self._validate_blocks()
        self._validate_answers()
        return self

    def _validate_answers(self) -> None:
        """Every answer span lies inside a relevant document of its query and holds some text."""
        for qid, by_document in (self.answers or {}).items():
            for doc_id, spans in by_document.items():
                if self.qrels.get(qid, {}).get(doc_id, 0) <= 0:
                    raise UserError(f"answers: query {qid!r} names {doc_id!r}, which is not one of its relevant documents")
                text = self.corpus[doc_id]
                bad = [s for s in spans if not (0 <= s[0] < s[1] <= len(text)) or not text[s[0] : s[1]].strip()]
                if bad or not spans:
                    raise UserError(f"answers: query {qid!r}, document {doc_id!r}: spans {bad or spans} are not "
                                     f"non-empty (start, end) spans of its {len(text)} characters")

    def _validate_passages(self) -> None:
        """Passages are exact slices of their contexts; a query searches an existing context that
        holds its relevant passages."""
        if self.passages is None:
            if self.contexts is not None or self.query_contexts is not None:
                raise UserError("contexts and query_contexts need passages (where each document sits)")
            return
        if self.contexts is None:
            raise UserError("passages need the contexts they are cut from")
        for doc_id, text in self.corpus.items():
            where = self.passages.get(doc_id)
            if where is None:
                raise UserError(f"document {doc_id!r} has no passage location")
            context = self.contexts.get(where.context)
            if context is None or context[where.start : where.end] != text:
                raise UserError(f"document {doc_id!r} is not {where.context}[{where.start}:{where.end}]")
        for qid, context in (self.query_contexts or {}).items():
            if qid not in self.queries or context not in self.contexts:
                raise UserError(f"query_contexts: {qid!r} -> {context!r} names an unknown query or context")
            outside = [d for d, r in self.qrels.get(qid, {}).items() if r > 0 and self.passages[d].context != context]
            if outside:
                raise UserError(f"query {qid!r} searches {context!r} but its relevant passages {outside[:3]} are elsewhere")

    def _validate_blocks(self) -> None:
        """Every query and document is in a block, and a query's relevant documents are in its own."""
        if self.blocks is None:
            return
        if self.query_contexts is not None:
            raise UserError("blocks and query_contexts both limit a query's candidates: give one of them")
        for side, ids, where in (("query", self.queries, self.blocks.queries),
                                 ("document", self.corpus, self.blocks.documents)):
            if set(where) != set(ids):
                strays = sorted(set(ids) ^ set(where))
                raise UserError(f"blocks: every {side} needs exactly one block; {strays[:3]} do not match")
        for qid, rels in self.qrels.items():
            block = self.blocks.queries[qid]
            outside = [d for d, r in rels.items() if r > 0 and self.blocks.documents[d] != block]
            if outside:
                raise UserError(f"query {qid!r} ranks block {block} but its relevant documents {outside[:3]} "
                                 "are in another")

    def fingerprint(self) -> str:
        """sha256 of the data (corpus, queries, qrels, any passage layout and blocks) as canonical JSON:
        two runs with the same fingerprint scored the same retrieval problem.  Data without blocks hash
        as they did before blocks existed."""
        content = dataclasses.asdict(self)
        del content["answers"]
        if self.blocks is None:
            del content["blocks"]
        canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def stats(self) -> dict[str, float]:
        """Counts and mean word lengths (``str.split()``), as in LongEmbed's Table 1."""
        n_docs = len(self.corpus)
        n_q = len(self.queries)
        return {
            "num_docs": n_docs,
            "num_queries": n_q,
            "mean_doc_words": sum(len(t.split()) for t in self.corpus.values()) / max(n_docs, 1),
            "max_doc_words": max((len(t.split()) for t in self.corpus.values()), default=0),
            "mean_query_words": sum(len(t.split()) for t in self.queries.values()) / max(n_q, 1),
        }


def restricted_answers(answers: dict[str, dict[str, list[tuple[int, int]]]] | None, queries: set[str] | dict[str, str],
                       documents: set[str] | dict[str, str]) -> dict[str, dict[str, list[tuple[int, int]]]] | None:
    """``answers`` of a sample: the kept queries' spans in the kept documents (None stays None), so a
    sampled run still reports passage hit@1."""
    if answers is None:
        return None
    kept = {q: {d: spans for d, spans in by_doc.items() if d in documents} for q, by_doc in answers.items() if q in queries}
    return {q: by_doc for q, by_doc in kept.items() if by_doc}


class TaskDataMissing(Exception):
    """The data a task needs is not where it was looked for; the message says where to get it."""


@runtime_checkable
class Task(Protocol):
    """A LongEmbed task. Synthetic tasks load one length at a time; real tasks take ``length=None``."""

    metadata: TaskMetadata

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData: ...


def check_length(metadata: TaskMetadata, length: int | None) -> None:
    """Raise ValueError unless ``length`` fits the task: one of its lengths if synthetic, else None."""
    if metadata.lengths is None:
        if length is not None:
            raise UserError(f"task {metadata.name!r} has no lengths; pass length=None (got {length})")
        return
    if length is None:
        raise UserError(f"task {metadata.name!r} is generated per length: pass one of {metadata.lengths}")
    if length not in metadata.lengths:
        raise UserError(f"task {metadata.name!r}: length {length} is not one of {metadata.lengths}")


def require_dir(data_dir: Path | str | None, sub: str, metadata: TaskMetadata) -> Path:
    """Return ``data_dir / sub`` if it exists, else raise :class:`TaskDataMissing` naming the source."""
    if data_dir is None:
        raise TaskDataMissing(f"task {metadata.name!r} needs a data directory (none given). "
                              f"{metadata.source}")
    path = Path(data_dir) / sub
    if not path.exists():
        raise TaskDataMissing(f"task {metadata.name!r}: {path} does not exist. {metadata.source}")
    return path


def read_json_file(path: Path) -> Any:
    """Parse a .json (or .json.gz) data file; bad UTF-8 or JSON raises a ValueError naming the file."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) of every non-empty line; errors name the file and line (bad UTF-8:
    the line that holds the bad bytes, and their byte offset: :func:`longembed.textfiles.utf8_lines`)."""
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        yield lineno, parse_json_line(line, f"{path}:{lineno}")


def require_fields(record: Any, fields: tuple[str, ...], where: str) -> dict[str, Any]:
    """``record`` if it is an object holding every field, else a ValueError naming ``where``."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise UserError(f"{where}: missing field(s) {missing}")
    return record
