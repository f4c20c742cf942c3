"""The judgments a person makes on pooled search results (``longembed judge``), kept so that none is lost:
every click is one fsynced line of ``judgments.jsonl`` in the task folder, and the BEIR files
(``queries.jsonl``, ``qrels/test.tsv``) are rewritten from that log, atomically, after each click.

The log is the truth; the BEIR files are derived from it.  Its lines are events, in the order made:

    {"event": "question", "time": ..., "query_id": "j1", "text": "...", "pool": ["a.txt", ...],
     "pool_depth": 10, "strategies": ["bm25", "chunks", ...], "seed": 0,
     "shown": [{"doc_id": "a.txt", "source": ..., "passage": {...}}, ...], "ranks": {"a.txt": {"bm25": 3}}}
    {"event": "judgment", "time": ..., "query_id": "j1", "doc_id": "a.txt", "grade": 2,
     "pool_depth": 10, "strategies": [...]}
    {"event": "pool", "time": ..., "query_id": "j1", "strategies": [...], "shown": [...], "ranks": {...},
     "pool_depth": 10}   a later session's new strategies (or deeper pool), its new results added to the
                         pool's end (judged after the others)

A question's pool is recorded once, when it is first asked, with what the page showed of each result and
each strategy's rank of it (never sent to the page), so a resumed session shows the same results in the
same order without searching again, and judged@k of a pooled strategy can be read from the log; a later judgment of the same (query, document) replaces the earlier one (a changed
mind).  Grades are TREC's graded relevance: 2 relevant, 1 partly, 0 not relevant; every judgment is
written to the qrels, zeros included (a judged non-relevant document is not an unjudged one), and
``queries.jsonl`` holds the questions with at least one judgment.

Crashes: a line is appended with one ``write`` and fsynced before the click is answered; a line torn by a
crash (no final newline, or not JSON) is the click in flight, dropped when the log is next read and cut
off before the next append.  The BEIR files are written beside their names, fsynced and renamed over
them (PostgreSQL's durable rename), and rewritten from the log whenever a log is opened, so a crash
between the append and the rewrite is repaired at the next start.  Concurrency: every operation holds
an exclusive ``flock`` on ``.judgments.lock`` (other processes: a second server on the same folder) and a
thread lock (other requests of this one), and reads the log afresh under it.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.durable import fsync_path
from longembed.errors import UserError

LOG_FILE = "judgments.jsonl"
LOCK_FILE = ".judgments.lock"
QUERIES_FILE = "queries.jsonl"
QRELS_FILE = Path("qrels") / "test.tsv"
#: TREC's graded relevance, as the page's buttons say it
GRADES = {2: "relevant", 1: "partly relevant", 0: "not relevant"}
#: the prefix of the query ids the judging page gives (j1, j2, ...): distinct from task-dir's q1, q2
QUERY_ID_PREFIX = "j"
#: characters a qrels TSV line cannot hold in an id
_TSV_UNSAFE = "\t\r\n"


@dataclass
class JudgedQuestion:
    """One question: its id, text, the pool shown (document ids, in the order shown), how it was pooled,
    and its judgments so far (document id -> grade)."""

    query_id: str
    text: str
    pool: list[str]
    pool_depth: int
    strategies: list[str]
    seed: int = 0
    grades: dict[str, int] = field(default_factory=dict)
    #: what the page showed of each result, in the pool's order (``doc_id``, ``source``, ``passage``)
    shown: list[dict[str, Any]] = field(default_factory=list)
    #: document id -> {strategy: its rank of the document}
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def left(self) -> int:
        """Results of the pool not judged yet."""
        return sum(1 for doc in self.pool if doc not in self.grades)

    def next_unjudged(self) -> str | None:
        """The first document of the pool (in the order shown) not judged yet."""
        return next((doc for doc in self.pool if doc not in self.grades), None)


def now() -> str:
    return _dt.datetime.now(tz=_dt.UTC).isoformat(timespec="milliseconds")


class JudgmentLog:
    """The judgments of one task folder (module docstring).  Safe to share between threads and between
    processes; each method reads the log afresh under the lock."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / LOG_FILE
        self._thread_lock = threading.Lock()
        with self._locked():
            if not self.path.exists():  # from the start: the folder is a judging folder
                self.path.touch()
                fsync_path(self.folder, is_dir=True)
            self._repair_tail()
            self._rewrite_beir(self._read())

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, open(self.folder / LOCK_FILE, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def questions(self) -> list[JudgedQuestion]:
        """Every question asked, in the order asked, with its judgments."""
        with self._locked():
            return list(self._read().values())

    def question(self, query_id: str) -> JudgedQuestion:
        with self._locked():
            return _known(self._read(), query_id)

    def asked(self, text: str) -> JudgedQuestion | None:
        """The question already asked with this text, if any."""
        with self._locked():
            return next((q for q in self._read().values() if q.text == text.strip()), None)

    def ask(self, text: str, shown: Sequence[dict[str, Any]], pool_depth: int, strategies: Sequence[str],
            seed: int = 0, ranks: dict[str, dict[str, int]] | None = None) -> JudgedQuestion:
        """The question ``text``: the one already asked with that text (its pool unchanged: a resumed
        session), else a new question whose pool is ``shown`` (each a dict with ``doc_id``), recorded
        before it is returned."""
        text = text.strip()
        if not text:
            raise UserError("the question is empty")
        with self._locked():
            questions = self._read()
            asked = next((q for q in questions.values() if q.text == text), None)
            if asked is not None:
                return asked
            pool = [str(result["doc_id"]) for result in shown]
            for doc in pool:
                _check_id(doc, "document id")
            if len(set(pool)) != len(pool):
                raise ValueError(f"a pool names a document twice: {pool}")
            question = JudgedQuestion(f"{QUERY_ID_PREFIX}{len(questions) + 1}", text, pool, pool_depth,
                                      list(strategies), seed, shown=[dict(r) for r in shown], ranks=dict(ranks or {}))
            self._append({"event": "question", "time": now(), "query_id": question.query_id, "text": text,
                          "pool": pool, "pool_depth": pool_depth, "strategies": question.strategies,
                          "seed": seed, "shown": question.shown, "ranks": question.ranks})
            return question

    def extend(self, query_id: str, strategies: Sequence[str], shown: Sequence[dict[str, Any]],
               ranks: dict[str, dict[str, int]], pool_depth: int) -> JudgedQuestion:
        """Pool ``strategies`` into the question to ``pool_depth``: the results of ``shown`` not in its pool
        yet are added at its end, and every rank they gave is kept; recorded durably.  Nothing is recorded
        when the question pooled them all that deep already."""
        with self._locked():
            question = _known(self._read(), query_id)
            deeper = pool_depth > question.pool_depth
            new = [s for s in strategies if deeper or s not in question.strategies]
            if not new:
                return question
            added = [dict(r) for r in shown if r["doc_id"] not in question.pool]
            for result in added:
                _check_id(str(result["doc_id"]), "document id")
            record = {"event": "pool", "time": now(), "query_id": query_id, "strategies": new, "shown": added,
                      "ranks": {doc: {s: r for s, r in by.items() if s in new} for doc, by in ranks.items()},
                      "pool_depth": max(pool_depth, question.pool_depth)}
            self._append(record)
            _apply_pool(question, record)
            return question

    def judge(self, query_id: str, doc_id: str, grade: int) -> JudgedQuestion:
        """Record ``grade`` for ``doc_id`` of the question ``query_id`` (a document of its pool), durably,
        then rewrite the BEIR files; the question as it now stands."""
        if isinstance(grade, bool) or grade not in GRADES:
            raise UserError(f"grade must be one of {sorted(GRADES)} (0 not, 1 partly, 2 relevant), not {grade!r}")
        with self._locked():
            questions = self._read()
            question = _known(questions, query_id)
            if doc_id not in question.pool:
                raise UserError(f"document {doc_id!r} is not in the pool of question {query_id}")
            self._append({"event": "judgment", "time": now(), "query_id": query_id, "doc_id": doc_id,
                          "grade": grade, "pool_depth": question.pool_depth, "strategies": question.strategies})
            question.grades[doc_id] = grade
            self._rewrite_beir(questions)
            return question

    # -------------------------------------------------------------------------------------------- the log

    def snapshot(self, destination: str | Path, corpus: str = "corpus.jsonl") -> Path:
        """Copy the task as it stands (corpus, queries, qrels and this log) to ``destination`` under the
        lock, so a reader (``advise`` on the judging page) sees one consistent moment while judging goes on.
        The corpus is hard-linked when it can be (it is replaced by a rename, never written in place)."""
        destination = Path(destination)
        (destination / QRELS_FILE).parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            for name in (QUERIES_FILE, QRELS_FILE, LOG_FILE):
                shutil.copyfile(self.folder / name, destination / name)
            source, target = self.folder / corpus, destination / corpus
            target.unlink(missing_ok=True)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        return destination

    def _read(self) -> dict[str, JudgedQuestion]:
        questions: dict[str, JudgedQuestion] = {}
        for lineno, record in read_log(self.path):
            where = f"{self.path}:{lineno}"
            if record.get("event") == "question":
                questions[record["query_id"]] = JudgedQuestion(
                    record["query_id"], record["text"], list(record["pool"]), int(record["pool_depth"]),
                    list(record["strategies"]), int(record.get("seed", 0)), shown=list(record.get("shown", [])),
                    ranks=dict(record.get("ranks", {})))
            elif record.get("event") == "judgment":
                if record["query_id"] not in questions:
                    raise UserError(f"{where}: a judgment of question {record['query_id']!r}, never asked")
                questions[record["query_id"]].grades[record["doc_id"]] = int(record["grade"])
            elif record.get("event") == "pool":
                _apply_pool(_known(questions, record["query_id"]), record)
            else:
                raise UserError(f"{where}: unknown event {record.get('event')!r}")
        return questions

    def _append(self, record: dict[str, Any]) -> None:
        """One line, written with one call and fsynced."""
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"{self.path}: wrote {written} of {len(line)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)

    def _repair_tail(self) -> None:
        """Cut a torn last line (a crash mid-append: the click in flight) so the next line starts clean."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        keep = len(data) if not data or data.endswith(b"\n") else data.rfind(b"\n") + 1
        if keep != len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())

    # ---------------------------------------------------------------------------------------- BEIR files

    def _rewrite_beir(self, questions: dict[str, JudgedQuestion]) -> None:
        judged = [q for q in questions.values() if q.grades]
        queries = "".join(json.dumps({"_id": q.query_id, "text": q.text}, ensure_ascii=False) + "\n" for q in judged)
        qrels = "query-id\tcorpus-id\tscore\n" + "".join(
            f"{q.query_id}\t{doc}\t{grade}\n" for q in judged for doc, grade in sorted(q.grades.items()))
        write_durably(self.folder / QUERIES_FILE, queries)
        write_durably(self.folder / QRELS_FILE, qrels)


def read_log(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each whole line of a judgment log; a last line torn by a crash (no
    newline, or not JSON) is left out; a damaged line before the last is an error."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    for lineno, line in enumerate(lines, 1):
        last = lineno >= len(lines) - 1
        if not line.strip():
            continue
        if lineno == len(lines):  # no newline after it: torn
            return
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if last:
                return
            raise UserError(f"{path}:{lineno}: not a JSON line ({exc}); the log is damaged") from exc
        yield lineno, record


def write_durably(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` so that a crash leaves the old file or the new one, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    with open(staging, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)
    fsync_path(path.parent, is_dir=True)


def _apply_pool(question: JudgedQuestion, record: dict[str, Any]) -> None:
    """A ``pool`` event on its question: the strategies, results and ranks it adds."""
    question.strategies += [s for s in record["strategies"] if s not in question.strategies]
    question.pool_depth = max(question.pool_depth, int(record.get("pool_depth", question.pool_depth)))
    for result in record["shown"]:
        if result["doc_id"] not in question.pool:
            question.pool.append(result["doc_id"])
            question.shown.append(result)
    for doc, by in record.get("ranks", {}).items():
        question.ranks.setdefault(doc, {}).update(by)


def _known(questions: dict[str, JudgedQuestion], query_id: str) -> JudgedQuestion:
    if query_id not in questions:
        raise UserError(f"no question {query_id!r} has been asked")
    return questions[query_id]


def _check_id(value: str, what: str) -> None:
    if not value or any(c in value for c in _TSV_UNSAFE):
        raise UserError(f"{what} {value!r} is empty or holds a tab or line break, which qrels/test.tsv cannot hold")
