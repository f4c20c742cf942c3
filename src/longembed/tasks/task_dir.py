"""A retrieval task read from a folder of your own: the LongEmbed benchmark on your documents.

    DIR/corpus.jsonl     {"_id": "d1", "title": "Optional", "text": "..."}   one document per line
    DIR/queries.jsonl    {"_id": "q1", "text": "..."}                        one query per line
    DIR/qrels/test.tsv   a header line, then query-id <TAB> corpus-id <TAB> score        (BEIR)
    or DIR/qrels.jsonl   {"qid": "q1", "doc_id": "d1", "score": 1}  (score optional: 1)   (LongEmbed)
    DIR/answers.jsonl    {"qid": "q1", "doc_id": "d1", "start": 120, "end": 180}   optional: where the answer is

This is BEIR's layout (which mteb reads) with LongEmbed's hub layout (:mod:`longembed.tasks.hf_hub`) as
the other form of the judgements; rows may use either layout's id field names (hf_hub.py's lists: a
LongEmbed hub config folder is a task folder too). Any file may be gzipped (``corpus.jsonl.gz``,
``qrels/test.tsv.gz``). Another qrels file (``qrels/dev.tsv``) is chosen by naming it: ``--task-dir
DIR/qrels/dev.tsv`` or ``TaskDirTask(DIR, qrels="qrels/dev.tsv")``; a folder holding both forms is
ambiguous until one is named.

``answers.jsonl`` (optional, ours; ``longembed task-dir`` writes it from answer quotes and offsets) gives
character spans ``[start, end)`` of a relevant document's text (as read here, title included) that answer a
query, one span per line (a query may have several): they become ``RetrievalData.answers``, from which
eval reports passage hit@1. A span outside its document, over whitespace only, or naming an unknown
query or a document not relevant to its query is an error naming the line.

Documents: a non-empty ``title`` is prepended as ``title + " " + text``, as mteb does
(``mteb/_create_dataloaders.py``, ``_corpus_to_dict``); mteb also strips whitespace from both ends of
the result, which is not done here, so that a document is its file's text and a task written out with
:func:`write_task_dir` reads back unchanged.

Nothing is silently dropped. BEIR's ``queries.jsonl`` often holds the queries of every split: a query
with no judgement in the chosen qrels is left out, and so is a query whose judgements are all <= 0
(trec_eval averages over queries with a relevant document); both are counted and recorded
(:class:`TaskDirRecord`, which a run prints and keeps in ``results.json`` under ``config.task_dirs``). Every document stays in
the corpus. Anything else the files get wrong (bad JSON, a missing or empty id or text, an id given
twice, a judgement naming an unknown query or document, a score that is not an integer, an empty
corpus) is a ValueError naming the file and line.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from longembed.errors import MissingFileError, OutputExistsError, UserError
from longembed.tasks.base import RetrievalData, TaskMetadata, check_length, iter_jsonl, require_fields
from longembed.tasks.hf_hub import (
    DOC_ID_FIELDS,
    QRELS_DOC_FIELDS,
    QRELS_QUERY_FIELDS,
    QUERY_ID_FIELDS,
    id_field,
)
from longembed.tasks.registry import task_metadata
from longembed.textfiles import unicode_problem, utf8_lines

LAYOUTS = ("beir", "longembed")
CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")
QUERIES_FILES = ("queries.jsonl", "queries.jsonl.gz")
#: Where the answers are (optional): one span of a relevant document per line.
ANSWERS_FILES = ("answers.jsonl", "answers.jsonl.gz")
#: The qrels looked for when none is named: BEIR's test split, LongEmbed's single file.
QRELS_FILES = ("qrels/test.tsv", "qrels/test.tsv.gz", "qrels.jsonl", "qrels.jsonl.gz")
BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")
_QRELS_SUFFIXES = (".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz")
#: A task name is a cache folder and a column title: letters, digits, ``.``, ``_`` and ``-``.
_NAME = re.compile(r"[^\W][\w.-]*")


@dataclass
class TaskDirRecord:
    """What a run read from a task folder: where, which qrels file, how many documents and queries it
    scored, which queries it left out and why, and the sha256 of every file read."""

    path: str
    qrels: str
    documents: int
    queries: int
    queries_left_out: int
    # reason -> count: "unjudged" (no judgement in the qrels), "no_relevant" (every score <= 0), "sampled" (left
    # out by longembed advise's budget sampling, which also samples the documents: ``documents`` counts the sample)
    left_out_by_reason: dict[str, int] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)  # file (relative to path) -> sha256 of its bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self, name: str) -> str:
        """One progress line, e.g. "mine: 12 documents, 5 queries (2 left out: 1 unjudged, ...)"."""
        left_out = ""
        if self.queries_left_out:
            reasons = ", ".join(f"{n} {_REASONS[r]}" for r, n in self.left_out_by_reason.items() if n)
            left_out = f" ({self.queries_left_out} left out: {reasons})"
        return f"{name}: {self.documents} documents, {self.queries} queries{left_out}, from {self.path} ({self.qrels})"


_REASONS = {
    "unjudged": "without judgements in the qrels",
    "no_relevant": "whose judgements are all <= 0",
    "sampled": "sampled out to fit longembed advise's --budget-seconds",
}


class TaskDirTask:
    """A retrieval task (scored by nDCG@10, as LongEmbed's real tasks) read from ``path``.

    ``path``: the task folder, or a qrels file inside it (``DIR/qrels/dev.tsv``, ``DIR/qrels.jsonl``),
    which then is the judgements used.  ``name``: the task's name in results and reports (default: the
    folder's name); it may not be a registered task's.  ``qrels``: the judgements file, relative to the
    folder (default: ``qrels/test.tsv`` or ``qrels.jsonl``, whichever exists).  The folder and files
    are checked here; they are read by :meth:`load`, which also sets :attr:`record`.
    """

    def __init__(self, path: str | Path, name: str | None = None, qrels: str | Path | None = None) -> None:
        path = Path(path).expanduser()
        if path.is_file():
            if path.name in (*CORPUS_FILES, *QUERIES_FILES):
                raise UserError(f"{path}: give the task folder, or the qrels file to use, not its {path.name}")
            if qrels is not None:
                raise UserError(f"{path} is a file (the qrels) and qrels={qrels!r} names another: give one")
            path, qrels = (path.parent.parent if path.parent.name == "qrels" else path.parent), path
        if not path.is_dir():
            raise MissingFileError(f"task folder {path} does not exist")
        self.path = path.resolve()
        self.corpus_file = _one_file(self.path, CORPUS_FILES, "documents")
        self.queries_file = _one_file(self.path, QUERIES_FILES, "queries")
        self.qrels_file = _qrels_file(self.path, qrels)
        self.answers_file = _optional_file(self.path, ANSWERS_FILES)
        name = self.path.name if name is None else name
        check_task_name(name, f"the task folder {self.path}")
        self.metadata = TaskMetadata(
            name=name, description=f"retrieval task read from {self.path}", main_score="ndcg@10", lengths=None,
            source=f"the folder {self.path}: corpus.jsonl, queries.jsonl, qrels/test.tsv or qrels.jsonl",
        )
        self.record: TaskDirRecord | None = None

    def load(self, data_dir: Path | None = None, length: int | None = None) -> RetrievalData:
        """Read and check the folder's files (``data_dir`` is not used: the task has its own folder)."""
        check_length(self.metadata, length)
        corpus = read_corpus(self.corpus_file)
        queries = read_queries(self.queries_file)
        qrels = read_qrels(self.qrels_file, set(queries), set(corpus))
        kept, left_out = judged_queries(queries, qrels)
        if not kept:
            raise UserError(
                f"{self.qrels_file}: none of the {len(queries)} queries of {self.queries_file} has a judged "
                f"relevant document (score > 0)"
            )
        kept_qrels = {q: r for q, r in qrels.items() if q in kept}
        answers = None
        if self.answers_file is not None:
            located = read_answers(self.answers_file, queries, corpus, qrels)
            answers = {q: spans for q, spans in located.items() if q in kept}
        data = RetrievalData(corpus=corpus, queries=kept, qrels=kept_qrels, answers=answers).validate()
        read = [f for f in (self.corpus_file, self.queries_file, self.qrels_file, self.answers_file) if f is not None]
        self.record = TaskDirRecord(
            path=str(self.path), qrels=self._relative(self.qrels_file), documents=len(corpus), queries=len(kept),
            queries_left_out=sum(left_out.values()), left_out_by_reason=left_out,
            sha256={self._relative(f): file_sha256(f) for f in read},
        )
        return data

    def _relative(self, file: Path) -> str:
        return file.relative_to(self.path).as_posix() if file.is_relative_to(self.path) else str(file)


def check_task_name(name: str, what: str) -> None:
    """A ValueError unless ``name`` can name the task of ``what``: a safe name no registered task has."""
    if not _NAME.fullmatch(name):
        raise UserError(
            f"task name {name!r} (of {what}) may hold only letters, digits, '.', '_' and '-' and may not start "
            "with '.' or '-': give one with --task-name"
        )
    if task_metadata(name) is not None:
        raise UserError(f"task name {name!r} (of {what}) is a built-in task's: give another with --task-name")


def task_dir_tasks(paths: Sequence[str | Path], names: Sequence[str] = ()) -> list[TaskDirTask]:
    """One :class:`TaskDirTask` per folder, named by ``names`` in order (none: each folder's name);
    two with the same name are an error."""
    if names and len(names) != len(paths):
        raise UserError(
            f"--task-name given {len(names)} time(s) for {len(paths)} --task-dir: give one per --task-dir, "
            "in the same order, or none (each task is then named after its folder)"
        )
    tasks = [TaskDirTask(path, name) for path, name in zip(paths, names or [None] * len(paths), strict=True)]
    seen: dict[str, Path] = {}
    for task in tasks:
        name = task.metadata.name
        if name in seen:
            raise UserError(f"task name {name!r} is given to {seen[name]} and to {task.path}: name them with "
                             "--task-name")
        seen[name] = task.path
    return tasks


def _one_file(folder: Path, names: Sequence[str], what: str) -> Path:
    """The one file of ``names`` that ``folder`` holds; an error if it holds none or several."""
    found = [folder / n for n in names if (folder / n).is_file()]
    if len(found) > 1:
        raise UserError(f"{folder} holds {' and '.join(f.name for f in found)}: keep one")
    if not found:
        raise MissingFileError(f"task folder {folder} has no {' or '.join(names)} (its {what})")
    return found[0]


def _optional_file(folder: Path, names: Sequence[str]) -> Path | None:
    """The one file of ``names`` that ``folder`` holds, None if it holds none; several are an error."""
    found = [folder / n for n in names if (folder / n).is_file()]
    if len(found) > 1:
        raise UserError(f"{folder} holds {' and '.join(f.name for f in found)}: keep one")
    return found[0] if found else None


def _qrels_file(folder: Path, qrels: str | Path | None) -> Path:
    """The judgements file: the one named, else qrels/test.tsv or qrels.jsonl (both: ambiguous)."""
    if qrels is not None:
        path = folder / Path(qrels).expanduser()
        if not path.is_file():
            raise MissingFileError(f"qrels file {path} does not exist")
        if not path.name.endswith(_QRELS_SUFFIXES):
            raise UserError(f"qrels file {path}: expected a BEIR .tsv or a LongEmbed .jsonl (optionally .gz)")
        return path.resolve()
    found = [n for n in QRELS_FILES if (folder / n).is_file()]
    if len(found) > 1:
        raise UserError(
            f"{folder} holds {' and '.join(found)}: say which judgements to use (--task-dir {folder}/{found[0]}, "
            f"or TaskDirTask(..., qrels={found[0]!r}))"
        )
    if not found:
        others = sorted(p.relative_to(folder).as_posix() for p in (folder / "qrels").glob("*.tsv*"))
        hint = f"; it has {', '.join(others)}: name one, e.g. --task-dir {folder}/{others[0]}" if others else ""
        raise MissingFileError(f"task folder {folder} has no qrels/test.tsv or qrels.jsonl{hint}")
    return folder / found[0]


def file_sha256(path: Path) -> str:
    """sha256 of the bytes of ``path`` (as stored: a .gz file's compressed bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_corpus(path: Path) -> dict[str, str]:
    """Document id -> text (a non-empty title prepended, as mteb does) of ``corpus.jsonl``."""
    corpus: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        doc_id = _new_id(_row_id(row, DOC_ID_FIELDS, where), first_line, lineno, where)
        text = _text(row, where)
        title = row.get("title")
        if title is not None and not isinstance(title, str):
            raise UserError(f"{where}: 'title' must be a string, not {type(title).__name__}")
        _check_unicode(title or "", where, "title")
        if title and title.strip():
            text = f"{title} {text}"
        elif not text.strip():
            raise UserError(f"{where}: document {doc_id!r} is empty (no text, no title)")
        corpus[doc_id] = text
    if not corpus:
        raise UserError(f"{path}: no documents (the corpus is empty)")
    return corpus


def read_queries(path: Path) -> dict[str, str]:
    """Query id -> text of ``queries.jsonl``."""
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        qid = _new_id(_row_id(row, QUERY_ID_FIELDS, where), first_line, lineno, where)
        text = _text(row, where)
        if not text.strip():
            raise UserError(f"{where}: query {qid!r} has an empty 'text'")
        queries[qid] = text
    if not queries:
        raise UserError(f"{path}: no queries")
    return queries


def _row_id(row: Any, names: tuple[str, ...], where: str) -> str:
    """The row's id (hf_hub.py's field names), which must be a non-empty string or an integer."""
    if not isinstance(row, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(row).__name__}")
    value = id_field(row, names, where)
    raw = next(row[n] for n in names if row.get(n) is not None)
    if isinstance(raw, bool) or not isinstance(raw, str | int) or not value.strip():
        raise UserError(f"{where}: the id must be a non-empty string or an integer, not {raw!r}")
    _check_unicode(value, where, "id")
    return value


def _new_id(value: str, first_line: dict[str, int], lineno: int, where: str) -> str:
    """``value``, remembered at ``lineno``; a ValueError if an earlier line has it."""
    if value in first_line:
        raise UserError(f"{where}: id {value!r} is given twice (first at line {first_line[value]})")
    first_line[value] = lineno
    return value


def _text(row: dict[str, Any], where: str) -> str:
    text = require_fields(row, ("text",), where)["text"]
    if not isinstance(text, str):
        raise UserError(f"{where}: 'text' must be a string, not {type(text).__name__}")
    _check_unicode(text, where, "text")
    return text


def _check_unicode(value: str, where: str, field: str) -> None:
    """A ValueError naming the line and field when ``value`` is not valid Unicode (a lone surrogate, which a
    JSON ``\\ud800`` escape gives): it could be neither tokenized nor hashed later."""
    problem = unicode_problem(value)
    if problem:
        raise UserError(f"{where}: the {field!r} {problem}")


def read_qrels(path: Path, query_ids: set[str], doc_ids: set[str]) -> dict[str, dict[str, int]]:
    """Query id -> {document id: score} of a BEIR ``.tsv`` or a LongEmbed ``.jsonl`` qrels file (in file
    order); every row must name a known query and document, and name the pair once."""
    rows = _tsv_qrels(path) if path.name.endswith((".tsv", ".tsv.gz")) else _jsonl_qrels(path)
    qrels: dict[str, dict[str, int]] = {}
    line_of: dict[tuple[str, str], int] = {}
    for lineno, qid, doc_id, score in rows:
        where = f"{path}:{lineno}"
        if qid not in query_ids:
            raise UserError(f"{where}: query {qid!r} is not in the queries file")
        if doc_id not in doc_ids:
            raise UserError(f"{where}: document {doc_id!r} is not in the corpus")
        if (qid, doc_id) in line_of:
            raise UserError(f"{where}: query {qid!r} and document {doc_id!r} are judged twice (first at line "
                             f"{line_of[qid, doc_id]})")
        line_of[qid, doc_id] = lineno
        qrels.setdefault(qid, {})[doc_id] = score
    if not qrels:
        raise UserError(f"{path}: no judgements")
    return qrels


def read_answers(path: Path, queries: dict[str, str], corpus: dict[str, str],
                 qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Query id -> relevant document id -> its answer spans, from ``answers.jsonl`` (in file order); a
    line naming an unknown query or a document not relevant to it, or a span that is not a non-empty
    ``[start, end)`` of the document's text (whitespace only counts as empty), is an error naming it.
    The answers of a query the qrels do not judge (another split's) are left out with the query."""
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        qid, doc_id = _row_id(row, QRELS_QUERY_FIELDS, where), _row_id(row, QRELS_DOC_FIELDS, where)
        if qid not in queries:
            raise UserError(f"{where}: query {qid!r} is not in the queries file")
        if qid not in qrels:
            continue  # a query of another split: left out with its query, which is counted as unjudged
        if qrels[qid].get(doc_id, 0) <= 0:
            raise UserError(f"{where}: document {doc_id!r} is not judged relevant to query {qid!r} in the qrels")
        start, end = (_offset(row, name, where) for name in ("start", "end"))
        text = corpus[doc_id]
        if not 0 <= start < end <= len(text) or not text[start:end].strip():
            raise UserError(f"{where}: [{start}, {end}) is not a non-empty span of document {doc_id!r} "
                             f"({len(text)} characters)")
        answers.setdefault(qid, {}).setdefault(doc_id, []).append((start, end))
    return answers


def _offset(row: dict[str, Any], name: str, where: str) -> int:
    value = require_fields(row, (name,), where)[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{where}: {name!r} must be an integer character offset, not {value!r}")
    return value


def _tsv_qrels(path: Path) -> list[tuple[int, str, str, int]]:
    """(line, query id, document id, score) of a BEIR qrels file, after its header line."""
    rows: list[tuple[int, str, str, int]] = []
    header_seen = False
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        fields = next(csv.reader([line.rstrip("\r\n")], delimiter="\t"))
        if len(fields) != 3:
            raise UserError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got "
                             f"{len(fields)}")
        if not header_seen:
            header_seen = True
            if _is_integer(fields[2]):
                raise UserError(f"{where}: expected BEIR's header line {chr(9).join(BEIR_QRELS_HEADER)!r} first; "
                                 "this line is a judgement (add the header, or it would be taken as one)")
            continue
        qid, doc_id = (_tsv_id(v, where) for v in fields[:2])
        rows.append((lineno, qid, doc_id, parse_score(fields[2], where)))
    return rows


def _tsv_id(value: str, where: str) -> str:
    if not value.strip():
        raise UserError(f"{where}: an empty id")
    return value


def _jsonl_qrels(path: Path) -> list[tuple[int, str, str, int]]:
    """(line, query id, document id, score) of a LongEmbed qrels.jsonl (score 1 when absent or null)."""
    rows = []
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        qid, doc_id = _row_id(row, QRELS_QUERY_FIELDS, where), _row_id(row, QRELS_DOC_FIELDS, where)
        score = row.get("score")
        rows.append((lineno, qid, doc_id, 1 if score is None else parse_score(score, where)))
    return rows


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def parse_score(value: Any, where: str) -> int:
    """A relevance score as an integer: an int, an integer-valued float (1.0) or the text of an int;
    anything else (1.5, "high", true) is a ValueError naming ``where``."""
    if isinstance(value, str) and _is_integer(value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise UserError(f"{where}: the score must be an integer, not {value!r}")


def judged_queries(
    queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> tuple[dict[str, str], dict[str, int]]:
    """(the queries with a relevant judged document, in file order; how many were left out, by reason:
    "unjudged" and "no_relevant")."""
    kept: dict[str, str] = {}
    left_out = {"unjudged": 0, "no_relevant": 0}
    for qid, text in queries.items():
        if qid not in qrels:
            left_out["unjudged"] += 1
        elif not any(score > 0 for score in qrels[qid].values()):
            left_out["no_relevant"] += 1
        else:
            kept[qid] = text
    return kept, left_out


def write_task_dir(data: RetrievalData, path: str | Path, layout: str = "beir") -> Path:
    """Write ``data`` as a task folder that :class:`TaskDirTask` reads back unchanged; returns the folder.

    ``layout="beir"``: corpus.jsonl and queries.jsonl with ``_id`` (documents with an empty ``title``),
    ``qrels/test.tsv`` with its header.  ``"longembed"``: the hub layout, ``doc_id`` / ``qid`` and
    ``qrels.jsonl`` (a ``score`` only where it is not 1).  Every judgement is written, zeros included, and
    the answer spans (``data.answers``) as ``answers.jsonl`` when there are any.
    A folder that already holds task files is refused, as is a passage task (its documents' contexts
    have no place in these files) and an id a TSV cannot hold (tab, newline).
    """
    if layout not in LAYOUTS:
        raise UserError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if data.passages is not None or data.contexts is not None or data.query_contexts is not None:
        raise UserError("a passage task (contexts, passages) cannot be written as a task folder: it has no place "
                         "for where each document sits in its context")
    folder = Path(path).expanduser()
    existing = [n for n in (*CORPUS_FILES, *QUERIES_FILES, *QRELS_FILES, *ANSWERS_FILES) if (folder / n).exists()]
    if existing:
        raise OutputExistsError(f"{folder} already holds {', '.join(existing)}: remove them or choose another folder")
    beir = layout == "beir"
    doc_key, query_key = ("_id", "_id") if beir else ("doc_id", "qid")
    documents = [{doc_key: d, **({"title": ""} if beir else {}), "text": t} for d, t in data.corpus.items()]
    judgements = [(q, d, s) for q, rels in data.qrels.items() for d, s in rels.items()]
    folder.mkdir(parents=True, exist_ok=True)
    _write_jsonl(folder / "corpus.jsonl", documents)
    _write_jsonl(folder / "queries.jsonl", [{query_key: q, "text": t} for q, t in data.queries.items()])
    if beir:
        _write_tsv(folder / "qrels" / "test.tsv", judgements)
    else:
        _write_jsonl(folder / "qrels.jsonl",
                     [{"qid": q, "doc_id": d, **({} if s == 1 else {"score": s})} for q, d, s in judgements])
    if data.answers:
        _write_jsonl(folder / "answers.jsonl", [{"qid": q, "doc_id": d, "start": start, "end": end}
                                                for q, by_doc in data.answers.items() for d, spans in by_doc.items()
                                                for start, end in spans])
    return folder


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _write_tsv(path: Path, judgements: list[tuple[str, str, int]]) -> None:
    bad = next((i for q, d, _ in judgements for i in (q, d) if any(c in i for c in '\t\r\n"')), None)
    if bad is not None:
        raise UserError(f"id {bad!r} holds a tab, line break or quote, which qrels/test.tsv cannot hold: "
                         "use layout='longembed'")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("\t".join(BEIR_QRELS_HEADER) + "\n")
        for qid, doc_id, score in judgements:
            handle.write(f"{qid}\t{doc_id}\t{score}\n")
