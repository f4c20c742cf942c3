"""``longembed judge --docs DIR --out TASK_DIR``: pool every candidate strategy's results for questions a
person types, have them judged on a page, and keep the judgments as a BEIR task folder
(:mod:`longembed.judging`; the guide: docs/guides/judging.md)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import uvicorn

from longembed.errors import OutputExistsError, UserError
from longembed.judging.advising import AdviceJob, AdviceSettings
from longembed.judging.app import create_judging_app
from longembed.judging.indexes import PoolIndexes, build_pool_indexes, open_searchers, pool_candidates
from longembed.judging.session import JudgingSession
from longembed.search.sources import Document, SourceOptions, gather_sources
from longembed.tasks.judgment_log import LOG_FILE, JudgmentLog, write_durably
from longembed.tasks.task_dir_builder import QUESTION_FIELDS

#: the task folder's corpus (BEIR's name)
CORPUS_FILE = "corpus.jsonl"
#: the index folder inside the task folder when --indexes is not given (hidden: not a task file)
INDEXES_FOLDER = ".indexes"


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise UserError(f"--k must be at least 1, not {args.k}")
    check_output(args.out)
    queued = read_questions(args.questions) if args.questions else []
    reading = gather_sources([args.docs], SourceOptions(args.glob))
    for failure in reading.failed:
        print(f"could not read {failure.id}: {failure.reason}")
    write_corpus(args.out, reading.documents)
    candidates = pool_candidates(args.model, args.strategies, args.chunking)
    print(f"pooling the top {args.k} of {len(candidates)} strategies over {len(reading.documents)} documents")
    indexes = build_pool_indexes(reading.documents, candidates, args.indexes or args.out / INDEXES_FOLDER,
                                 args.device, args.batch_size)
    log = JudgmentLog(args.out)
    folder = shlex.quote(str(args.out))
    if not args.serve:
        print(f"ready: longembed judge --docs {shlex.quote(str(args.docs))} --out {folder} serves the page")
        return 0
    session = JudgingSession(log, open_searchers(indexes, args.device), args.k, args.seed, queued)
    extended, added = session.extend_pools()
    if extended:
        print(f"pooled {', '.join(session.strategies)} into {extended} questions asked before: {added} results "
              "to judge")
    progress = session.progress()
    print(f"{progress['questions']} questions asked, {progress['judgments']} judgments, {len(queued)} queued")
    print(f"judge at http://127.0.0.1:{args.port}/  (Ctrl+C stops; every click is already saved)")
    print(f"then press Advise on the page, or: longembed advise --task-dir {folder} --model "
          f"{shlex.quote(args.model)} --output advice/{Path(args.out).name}")
    pool_indexes = PoolIndexes(args.model, reading.documents, args.indexes or args.out / INDEXES_FOLDER, args.chunking,
                               args.device, args.batch_size)
    advice = AdviceJob(session, AdviceSettings(args.model, str(args.docs), args.chunking, args.device, args.batch_size),
                       pool_indexes.searchers)
    uvicorn.run(create_judging_app(session, advice), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


def check_output(out: Path) -> None:
    """Refuse an ``--out`` that holds files but no judgment log: its queries and qrels would be replaced."""
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / LOG_FILE).is_file():
        raise OutputExistsError(f"--out {out} holds files but no {LOG_FILE}: it is not a judging folder, and judge "
                                "would replace its queries.jsonl and qrels; choose a new or empty folder")


def write_corpus(out: Path, documents: list[Document]) -> None:
    """The task folder's corpus.jsonl: every document read (rewritten only when it changed)."""
    text = "".join(json.dumps({"_id": d.id, "title": "", "text": d.text}, ensure_ascii=False) + "\n"
                   for d in sorted(documents, key=lambda d: d.id))
    path = out / CORPUS_FILE
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_durably(path, text)


def read_questions(path: Path) -> list[str]:
    """The questions of a .txt file (one per line) or a .jsonl file (``question``/``query``/``text``)."""
    if not path.is_file():
        raise UserError(f"--questions {path}: no such file")
    lines = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
    if path.suffix != ".jsonl":
        return [line for line in lines if line]
    questions = []
    for lineno, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            record = json.loads(line)
            text = next(record[f] for f in QUESTION_FIELDS if isinstance(record.get(f), str))
        except (ValueError, StopIteration, AttributeError, TypeError) as exc:
            raise UserError(f"{path}:{lineno}: expected {{\"question\": \"...\"}}") from exc
        questions.append(text.strip())
    return questions
