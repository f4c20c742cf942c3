"""A task folder built from a folder of documents and a file of questions (``longembed task-dir``).

    DOCS/                    read recursively; by default every document file (text, Markdown, PDF, HTML,
                             Word: :mod:`longembed.documents` reads each by its type) is one document,
      a.txt                  its id the path relative to DOCS (``a.txt``, ``notes/b.md``), its text the file's
      notes/b.md             text (UTF-8; a leading byte-order mark dropped)
    QUESTIONS.jsonl          {"question": "...", "document": "a.txt"}            one question per line
                             {"question": "...", "documents": ["a.txt", "notes/b.md"]}   several relevant
    or QUESTIONS.tsv / .csv  a header line naming the columns ``question`` and ``document``; a cell may
                             name several documents separated by ``|``; one row per line (a quoted field
                             spanning lines, almost always an unbalanced quote, is refused)

``text`` (BEIR's queries.jsonl) and ``query`` are read as the question, ``_id`` as its id, and a document
may be named without its extension when one file fits.  Optional ``answer`` (a quote), ``answer_start``
and ``answer_end`` (character offsets into the document's text as read here) say where the answer is
(:mod:`longembed.tasks.answer_quotes`): each is checked, and the spans are written as ``answers.jsonl``.

Every question becomes a query (``_id``: the row's ``id`` field or column when given, else ``q1``, ``q2``,
... in file order) judged relevant (score 1) to each document it names; other fields (``kind``,
``evidence``, ...) are ignored.  The folder written is BEIR's layout (:func:`write_task_dir`), which
:class:`~longembed.tasks.task_dir.TaskDirTask` (``longembed eval --task-dir``, ``longembed advise
--task-dir``) reads back unchanged: every document of DOCS is in the corpus, judged or not (the others
are distractors).

Nothing partial is written: every problem of every row and document (a question naming a document
DOCS does not hold, an empty question, a question or a (question, document) pair given twice, a
document that cannot be read, is not UTF-8 or is empty, ...) is collected and raised at once as a
:class:`TaskDirProblems` naming each file and line; only a clean build is written, into a temporary
folder beside the output renamed into place.
"""

from __future__ import annotations

import csv
import io
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.documents import DOCUMENT_SUFFIXES, DocumentReadError, read_document
from longembed.errors import MissingFileError, OutputExistsError, UserError
from longembed.permissions import NEW_FOLDER_MODE, creation_mode
from longembed.tasks.answer_quotes import AnswerGiven, answer_given, locate_answer
from longembed.tasks.base import RetrievalData
from longembed.tasks.task_dir import (
    ANSWERS_FILES,
    CORPUS_FILES,
    QUERIES_FILES,
    read_qrels,
    read_queries,
    write_task_dir,
)
from longembed.textfiles import jsonl_records

#: The documents read when no glob is given: every file type longembed.documents reads, one document per file.
DEFAULT_GLOBS = tuple(f"**/*{suffix}" for suffix in DOCUMENT_SUFFIXES)
#: the question's field: ours, or BEIR's queries.jsonl's ``text``
QUESTION_FIELDS = ("question", "query", "text")
DOCUMENT_FIELDS = ("document", "documents")
#: the question's id: ours, or BEIR's ``_id``
ID_FIELDS = ("id", "_id")
#: what one line of a .jsonl questions file is (said when a file looks like another format)
EXPECTED_LINE = ('one question per line with the document that answers it, {"question": "...", "document": '
                 '"notes/a.txt"} ("text" or "query" for the question, "documents": [...] for several, "id" or "_id" '
                 "for its id)")
#: the fields that tell another file for a questions file: (fields all present, what the file looks like)
OTHER_FORMATS = (
    ({"_id", "title", "text"}, "a BEIR corpus.jsonl (documents: _id, title, text)"),
    ({"_id", "text"}, "a BEIR queries.jsonl (_id, text), whose lines name no document (BEIR keeps them in "
                      "qrels/test.tsv)"),
    ({"query-id", "corpus-id"}, "BEIR qrels (query-id, corpus-id, score)"),
)
#: What separates several documents in one cell of a .tsv / .csv questions file.
DOCUMENT_SEPARATOR = "|"
QUESTION_SUFFIXES = (".jsonl", ".tsv", ".csv")
#: What an output folder may hold for ``overwrite`` to replace it: a task folder, nothing else.
_TASK_ENTRIES = {*CORPUS_FILES, *QUERIES_FILES, *ANSWERS_FILES, "qrels", "qrels.jsonl", "qrels.jsonl.gz"}
_BOM = "\ufeff"


class TaskDirProblems(UserError):
    """Every problem found in the documents and the questions, each ``file:line: what`` (one per line)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        listed = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s), nothing written:\n{listed}")


@dataclass
class QuestionRow:
    """One question of the questions file: where it is, its query id, its text, the documents it names
    and what it says of where the answer is (None: nothing)."""

    where: str
    qid: str
    text: str
    documents: list[str]
    answer: AnswerGiven | None = None


@dataclass
class BuiltTask:
    """What :func:`build_task_dir` wrote: the folder and how many documents, queries and judgements."""

    path: Path
    documents: int
    queries: int
    judgements: int
    unjudged_documents: int = 0
    answers: int = 0  # questions whose answer was located (their spans are in answers.jsonl)
    merged: JudgedMerge | None = None  # what --merge-judged added

    def describe(self) -> str:
        located = f", {self.answers} answers located" if self.answers else ""
        merged = f"; {self.merged.describe()}" if self.merged else ""
        return (f"{self.path}: {self.documents} documents ({self.unjudged_documents} named by no question), "
                f"{self.queries} questions, {self.judgements} judgements{located}{merged}")


@dataclass
class JudgedMerge:
    """What judged task folders (``longembed judge``) added to the questions file's: questions asked only
    on the judging page, judgments added to a question both hold, and (question, document) pairs that the
    file names relevant and the page graded lower (the file's grade is kept: it was written as an answer)."""

    folders: int = 0
    new_questions: int = 0
    added_judgements: int = 0
    file_kept: list[str] = field(default_factory=list)

    def describe(self) -> str:
        kept = (f"; {len(self.file_kept)} pair(s) the questions file names relevant and the page graded lower kept "
                f"as relevant: {', '.join(self.file_kept[:3])}{' ...' if len(self.file_kept) > 3 else ''}"
                if self.file_kept else "")
        return (f"merged {self.folders} judged folder(s): {self.new_questions} questions judged on the page only, "
                f"{self.added_judgements} judgements added{kept}")


def build_task_dir(
    docs: str | Path,
    questions: str | Path,
    out: str | Path,
    globs: Sequence[str] = DEFAULT_GLOBS,
    overwrite: bool = False,
    judged: Sequence[str | Path] = (),
) -> BuiltTask:
    """Read the documents under ``docs`` (files matching ``globs``) and the questions file, check them
    all, and write the BEIR task folder ``out``; a :class:`TaskDirProblems` lists every problem found
    (and nothing is written).  An existing ``out`` is refused unless it is empty, or ``overwrite`` is
    set and it holds a task folder's files only.  ``judged``: task folders written by ``longembed judge``
    on the same documents, whose graded judgments are merged in (:func:`merge_judged`)."""
    docs, questions, out = (Path(p).expanduser() for p in (docs, questions, out))
    check_outside(out, docs)
    check_output(out, overwrite)
    corpus, problems = read_documents(docs, globs)
    rows, row_problems = read_questions(questions)
    row_problems += resolve_extensions(rows, corpus) + check_rows(rows, corpus)
    answers, answer_problems = locate_answers(rows, corpus)
    problems += in_line_order(row_problems + answer_problems)
    if problems:
        raise TaskDirProblems(problems)
    queries = {row.qid: row.text for row in rows}
    qrels = {row.qid: dict.fromkeys(row.documents, 1) for row in rows}
    merged = merge_judged([Path(f).expanduser() for f in judged], queries, qrels, corpus) if judged else None
    data = RetrievalData(corpus=corpus, queries=queries, qrels=qrels, answers=answers or None).validate()
    write_atomically(data, out, overwrite)
    named = {d for grades in qrels.values() for d, grade in grades.items() if grade > 0}
    return BuiltTask(path=out, documents=len(corpus), queries=len(queries),
                     judgements=sum(len(grades) for grades in qrels.values()),
                     unjudged_documents=len(corpus) - len(named), answers=len(answers), merged=merged)


def merge_judged(folders: Sequence[Path], queries: dict[str, str], qrels: dict[str, dict[str, int]],
                 corpus: dict[str, str]) -> JudgedMerge:
    """Add the judged folders' questions and graded judgments (2/1/0) to ``queries`` and ``qrels`` (in place).

    A judged question equal to one already there (up to case and spacing, as duplicates are found) adds
    its judgments to it; for a document the questions file names (grade 1) and the page graded, the higher
    grade is kept, and a lower page grade is listed in :attr:`JudgedMerge.file_kept`.  Another judged
    question is added under its own id.  Every problem is raised at once (:class:`TaskDirProblems`): a judged
    document not under ``--docs``, a judged question whose id another question holds, an unreadable folder."""
    merge, problems = JudgedMerge(folders=len(folders)), []
    by_text = {_question_key(text): qid for qid, text in queries.items()}
    for folder in folders:
        try:
            judged_queries_, judged_qrels = _read_judged(folder, corpus)
        except UserError as exc:
            problems.append(f"--merge-judged {folder}: {exc}")
            continue
        for qid, text in judged_queries_.items():
            grades = judged_qrels.get(qid, {})
            target = by_text.get(_question_key(text))
            if target is None:
                if qid in queries:
                    problems.append(f"--merge-judged {folder}: question id {qid!r} is another question's already "
                                    f"({queries[qid][:60]!r})")
                    continue
                queries[qid], qrels[qid], by_text[_question_key(text)] = text, dict(grades), qid
                merge.new_questions += 1
                merge.added_judgements += len(grades)
                continue
            for doc, grade in grades.items():
                had = qrels[target].get(doc)
                if had is None:
                    merge.added_judgements += 1
                elif grade < had:
                    merge.file_kept.append(f"{target}/{doc}")
                qrels[target][doc] = max(grade, had or 0)
    if problems:
        raise TaskDirProblems(problems)
    return merge


def _read_judged(folder: Path, corpus: dict[str, str]) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The queries and graded qrels of a judged task folder (a BEIR ``queries.jsonl`` and ``qrels/test.tsv``);
    a judged document not in ``corpus`` is a UserError naming its line (judge and task-dir must read the
    same documents)."""
    if not (folder / "queries.jsonl").is_file() or not (folder / "qrels" / "test.tsv").is_file():
        raise UserError("not a judged task folder: it needs queries.jsonl and qrels/test.tsv (longembed judge "
                        "writes them after the first judgment)")
    judged_queries_ = read_queries(folder / "queries.jsonl")
    return judged_queries_, read_qrels(folder / "qrels" / "test.tsv", set(judged_queries_), set(corpus))


def _question_key(text: str) -> str:
    """Two questions are the same when equal up to case and spacing."""
    return " ".join(text.casefold().split())


# ---------------------------------------------------------------------------------------------- documents


def document_files(docs: Path, globs: Sequence[str] = DEFAULT_GLOBS) -> list[Path]:
    """The files under ``docs`` that match any of ``globs`` (relative to ``docs``), sorted by their
    relative path; files and folders whose name starts with "." are skipped (a broken link is listed)."""
    if not docs.is_dir():
        raise MissingFileError(f"documents folder {docs} does not exist (or is not a folder)")
    if not globs:
        raise UserError("no glob given: name the documents to read, e.g. --glob '**/*.txt'")
    found: set[Path] = set()
    for pattern in globs:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise UserError(f"glob {pattern!r} must be relative to the documents folder {docs}")
        found |= {p for p in docs.glob(pattern) if _file_like(p) and not _hidden(p.relative_to(docs))}
    return sorted(found, key=lambda p: p.relative_to(docs).as_posix())


def _file_like(path: Path) -> bool:
    """A file, or a link that does not lead to a folder: a broken link is kept, to be reported unreadable
    rather than silently left out."""
    return path.is_file() or (path.is_symlink() and not path.is_dir())


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def read_documents(docs: Path, globs: Sequence[str] = DEFAULT_GLOBS) -> tuple[dict[str, str], list[str]]:
    """(document id -> text, the problems found) of the files :func:`document_files` lists: a file that
    cannot be read, is not UTF-8, is empty (whitespace only) or whose id a qrels TSV cannot hold is a
    problem, not a document.  No file at all is a problem too."""
    corpus: dict[str, str] = {}
    problems: list[str] = []
    files = document_files(docs, globs)
    if not files:
        problems.append(f"{docs}: no document matches {', '.join(repr(g) for g in globs)}")
    for path in files:
        doc_id = path.relative_to(docs).as_posix()
        text, problem = _document_text(path)
        if problem is None and any(c in doc_id for c in '\t\r\n"'):
            problem = f"{path}: its name holds a tab, line break or quote, which qrels/test.tsv cannot hold: rename it"
        if problem is None:
            corpus[doc_id] = text
        else:
            problems.append(problem)
    return corpus, problems


def _document_text(path: Path) -> tuple[str, str | None]:
    """(text, None), or ("", the problem) for a file :func:`longembed.documents.read_document` cannot read
    (unreadable, not UTF-8, damaged, encrypted, no text, empty)."""
    try:
        return read_document(path).text, None
    except DocumentReadError as exc:
        return "", str(exc)


# ---------------------------------------------------------------------------------------------- questions


def read_questions(path: Path) -> tuple[list[QuestionRow], list[str]]:
    """(every question row read, the problems found in them) of a .jsonl, .tsv or .csv file; a row with
    a problem of its own (an empty question, no document, ...) is kept, so that what it shares with
    other rows (a duplicate, a missing document) is found too."""
    if path.is_dir():
        raise UserError(f"questions file {path} is a folder: give the .jsonl, .tsv or .csv file of the questions")
    if not path.is_file():
        raise MissingFileError(f"questions file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in QUESTION_SUFFIXES:
        raise UserError(f"questions file {path}: expected a .jsonl, .tsv or .csv file, not {path.suffix or 'none'}")
    lines, problems = _decoded_lines(path)
    if suffix == ".jsonl":
        rows, more = _jsonl_rows(path, lines)
    else:
        rows, more = _table_rows(path, lines, "\t" if suffix == ".tsv" else ",")
    problems += more
    if not rows and not problems:
        problems.append(f"{path}: no questions")
    return rows, problems


def _decoded_lines(path: Path) -> tuple[list[tuple[int, str]], list[str]]:
    """(line number, text) of every line, each decoded alone, so that every non-UTF-8 line is named
    (and kept, its bad bytes replaced, so its other problems are found too)."""
    lines: list[tuple[int, str]] = []
    problems: list[str] = []
    offset = 0
    for number, raw in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start:exc.start + 1].hex()} at byte "
                            f"offset {offset + exc.start} of the file); save the file as UTF-8")
            text = raw.decode("utf-8", errors="replace")
        lines.append((number, text.removeprefix(_BOM) if number == 1 else text))
        offset += len(raw)
    return lines, problems


def _jsonl_rows(path: Path, lines: list[tuple[int, str]]) -> tuple[list[QuestionRow], list[str]]:
    rows: list[QuestionRow] = []
    problems: list[str] = []
    fields: set[str] = set()
    position = 0  # the question's number in the file: its default id is q<position>
    for line in jsonl_records(path, lines):
        if line.record is None:
            problems.append(str(line.problem))
            continue
        position += 1
        fields |= set(line.record)
        row, row_problems = _row(line.record, line.where, position, split=False)
        problems += row_problems
        rows.append(row)
    if rows and not fields & set(DOCUMENT_FIELDS):  # not one line names a document: another kind of file
        return [], [f"{path}: expected {EXPECTED_LINE}; {looks_like(fields)}"]
    return rows, problems


def looks_like(fields: Iterable[str]) -> str:
    """What a file whose lines (or header) have ``fields`` looks like, when it is not a questions file."""
    fields = set(fields)
    named = ", ".join(sorted(fields)) or "none"
    for wanted, what in OTHER_FORMATS:
        if wanted <= fields:
            return (f"this file looks like {what}: give each line a \"document\" field (the path of its document "
                    "under --docs, with or without its extension), or evaluate a BEIR folder as it is with "
                    "longembed eval --task-dir FOLDER")
    return f"its lines have the fields {named} and none names a document"


def _table_rows(path: Path, lines: list[tuple[int, str]], delimiter: str) -> tuple[list[QuestionRow], list[str]]:
    """The rows of a .tsv / .csv questions file, read by the csv module in strict mode (a quote left open
    at the end of the file, or text after a closing quote, is an error).  A row is one line: a quoted
    field that spans lines is refused, since it is almost always an unbalanced quote that merged the
    rows after it into one question."""
    reader = csv.reader(io.StringIO("".join(text for _, text in lines)), delimiter=delimiter, strict=True)
    rows: list[QuestionRow] = []
    problems: list[str] = []
    header: list[str] | None = None
    start, position = 1, 0
    try:
        for cells in reader:
            where, first, start = f"{path}:{start}", start, reader.line_num + 1
            if reader.line_num > first:
                problems.append(f"{where}: a quoted field runs over lines {first}-{reader.line_num} (an unbalanced "
                                "quote?); a row is one line: close the quote, or double a quote inside a quoted field "
                                '(""); a question with line breaks goes in a .jsonl file')
                continue
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header = [c.strip().lower() for c in cells]
                missing = _missing_columns(header)
                if missing:
                    other = next((f"; this file looks like {what}" for fields, what in OTHER_FORMATS
                                  if fields <= set(header)), "")
                    return [], [f"{where}: the header line must name the columns {missing} (it has {cells}){other}"]
                continue
            if len(cells) != len(header):
                problems.append(f"{where}: {len(cells)} fields where the header has {len(header)}")
                continue
            position += 1
            row, row_problems = _row(dict(zip(header, cells, strict=True)), where, position, split=True)
            problems += row_problems
            rows.append(row)
    except csv.Error as exc:
        problems.append(f"{path}:{start}: {exc} (an unbalanced quote? close it, or double a quote inside a quoted "
                        'field: "")')
    return rows, problems


def _missing_columns(header: list[str]) -> list[str]:
    missing = []
    for names in (QUESTION_FIELDS, DOCUMENT_FIELDS):
        if not any(n in header for n in names):
            missing.append(" or ".join(names))
    return missing


def _row(record: dict[str, Any], where: str, position: int, split: bool) -> tuple[QuestionRow, list[str]]:
    """A row's question, its id and documents (a list, or a cell split at ``|`` when ``split``), and its
    problems: no or an empty question, no document, a document named twice in the row, a bad id."""
    problems: list[str] = []
    question = _first(record, QUESTION_FIELDS)
    if question is None:
        problems.append(f"{where}: no question (give a 'question' or 'text' field)")
    elif not isinstance(question, str):
        problems.append(f"{where}: the question must be a string, not {type(question).__name__}")
    elif not question.strip():
        problems.append(f"{where}: the question is empty")
    documents = _documents(_first(record, DOCUMENT_FIELDS), where, split, problems)
    qid = _first(record, ID_FIELDS)
    if qid is None or (split and qid == ""):
        qid = f"q{position}"
    elif isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip() or any(
            c in str(qid) for c in '\t\r\n"'):
        problems.append(f"{where}: the id must be a non-empty string or integer without tabs, line breaks or "
                        f"quotes, not {qid!r}")
    text = question if isinstance(question, str) else ""
    answer = answer_given(record, where, problems)
    return QuestionRow(where=where, qid=str(qid), text=text, documents=documents, answer=answer), problems


def _first(record: dict[str, Any], names: Iterable[str]) -> Any:
    return next((record[n] for n in names if record.get(n) is not None), None)


def _documents(value: Any, where: str, split: bool, problems: list[str]) -> list[str]:
    if split and isinstance(value, str):
        value = [d.strip() for d in value.split(DOCUMENT_SEPARATOR)]
    elif isinstance(value, str):
        value = [value]
    if value is None or value == [] or value == [""]:
        problems.append(f"{where}: no document (give a 'document' field: the path of the document that answers "
                        "the question, relative to the documents folder)")
        return []
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        problems.append(f"{where}: the document(s) must be a path or a list of paths, not {value!r}")
        return []
    if any(not d.strip() for d in value):
        problems.append(f"{where}: an empty document path in {value!r}")
    twice = sorted({d for d in value if value.count(d) > 1})
    if twice:
        problems.append(f"{where}: duplicate pair: document(s) {twice} named twice for this question")
    return value


def resolve_extensions(rows: list[QuestionRow], corpus: dict[str, str]) -> list[str]:
    """Name each document as the corpus does when a row names it without its extension (``notes/b`` for
    ``notes/b.md``); the problems of names that fit two documents (``a`` for ``a.txt`` and ``a.md``)."""
    by_stem: dict[str, list[str]] = {}
    for doc_id in corpus:
        stem = str(Path(doc_id).with_suffix(""))
        if stem != doc_id:
            by_stem.setdefault(stem, []).append(doc_id)
    problems: list[str] = []
    for row in rows:
        for i, doc in enumerate(row.documents):
            candidates = [] if doc in corpus else by_stem.get(doc, [])
            if len(candidates) == 1:
                row.documents[i] = candidates[0]
            elif candidates:
                problems.append(f"{row.where}: document {doc!r} may be {' or '.join(repr(c) for c in sorted(candidates))}: "
                                "name it with its extension")
                row.documents[i] = ""  # reported here, not again as missing
    return problems


def check_rows(rows: list[QuestionRow], corpus: dict[str, str]) -> list[str]:
    """The problems between rows and with the documents: a document not in ``corpus`` (with the
    likely one when the name differs only by folder or extension), a question or a (question, document)
    pair given twice, an id given twice.  Questions are the same when equal up to case and spacing."""
    problems: list[str] = []
    first_question: dict[str, QuestionRow] = {}
    first_id: dict[str, QuestionRow] = {}
    by_name = _documents_by_name(corpus)
    for row in rows:
        for doc in dict.fromkeys(row.documents):
            if doc.strip() and doc not in corpus:
                problems.append(f"{row.where}: document {doc!r} is not in the documents folder{_hint(doc, by_name)}")
        key = _question_key(row.text)
        earlier = first_question.setdefault(key, row) if key else row
        if earlier is not row:
            shared = sorted(set(earlier.documents) & set(row.documents))
            kind = f"duplicate pair (question and document {shared[0]!r})" if shared else "duplicate question"
            problems.append(f"{row.where}: {kind}: the question of line {_line(earlier.where)} again; give each "
                            "question once, with all its documents")
        earlier_id = first_id.setdefault(row.qid, row)
        if earlier_id is not row:
            problems.append(f"{row.where}: id {row.qid!r} is given twice (first at line {_line(earlier_id.where)})")
    return problems


def locate_answers(rows: list[QuestionRow], corpus: dict[str, str]) -> tuple[dict[str, dict[str, list[tuple[int, int]]]],
                                                                        list[str]]:
    """(query id -> document id -> answer spans, the problems) of the rows that give an answer and name
    only documents of ``corpus`` (a missing document is reported by :func:`check_rows`)."""
    answers: dict[str, dict[str, list[tuple[int, int]]]] = {}
    problems: list[str] = []
    for row in rows:
        if row.answer is None or not row.documents or not all(d in corpus for d in row.documents):
            continue
        spans, problem = locate_answer(row.answer, row.documents, corpus, row.where)
        if problem is not None:
            problems.append(problem)
        elif spans:
            answers[row.qid] = spans
    return answers, problems


def _line(where: str) -> str:
    return where.rsplit(":", 1)[1]


def in_line_order(problems: list[str]) -> list[str]:
    """The problems of one file (each ``file:line: ...``) sorted by line (stable: a line's own order kept;
    a problem of the whole file, without a line, first)."""
    return sorted(problems, key=_problem_line)


def _problem_line(problem: str) -> int:
    number = problem.split(": ", 1)[0].rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else 0


def _documents_by_name(corpus: dict[str, str]) -> dict[str, list[str]]:
    """File name and file stem -> the document ids that have it (for the hint of a missing document)."""
    names: dict[str, list[str]] = {}
    for doc_id in corpus:
        path = Path(doc_id)
        for name in {path.name, path.stem}:
            names.setdefault(name, []).append(doc_id)
    return names


def _hint(doc: str, by_name: dict[str, list[str]]) -> str:
    candidates = by_name.get(Path(doc).name) or by_name.get(Path(doc).stem) or []
    return f" (did you mean {candidates[0]!r}? ids are paths relative to it)" if len(candidates) == 1 else ""


# ---------------------------------------------------------------------------------------------- writing


def check_outside(out: Path, docs: Path) -> None:
    """A UserError when the output folder is the documents folder or inside it: a later build with a
    wider glob (``--glob '**/*'``) would read the task's own files as documents."""
    inside = out.resolve(), docs.resolve()
    if inside[0] == inside[1] or inside[1] in inside[0].parents:
        raise UserError(f"--out {out} is inside the documents folder {docs}: write the task folder elsewhere")


def check_output(out: Path, overwrite: bool) -> None:
    """A FileExistsError unless ``out`` can be written: absent, empty, or a task folder with ``overwrite``."""
    if not out.exists():
        return
    if not out.is_dir():
        raise OutputExistsError(f"output {out} exists and is not a folder")
    entries = {p.name for p in out.iterdir()}
    if not entries:
        return
    if not overwrite:
        raise OutputExistsError(f"output folder {out} exists and is not empty: give --overwrite to replace it")
    others = sorted(entries - _TASK_ENTRIES)
    if others:
        raise OutputExistsError(f"output folder {out} holds {others}, which are not a task folder's files: "
                              "--overwrite replaces a task folder only; choose another folder")


def write_atomically(data: RetrievalData, out: Path, overwrite: bool) -> None:
    """Write the task into a temporary folder beside ``out``, then rename it into place (an old task
    folder there is moved aside first and removed once the new one is in place)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        staging.chmod(creation_mode(NEW_FOLDER_MODE))  # mkdtemp's folder is owner-only; mkdir's would not be
        write_task_dir(data, staging)
        check_output(out, overwrite)  # again: another process may have written it meanwhile
        old = None
        if out.exists():
            old = out.with_name(f"{staging.name}.old")
            out.rename(old)
        staging.rename(out)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
