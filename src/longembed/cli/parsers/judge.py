"""The flags of ``longembed judge`` (the command: :mod:`longembed.cli.judge`); light imports only."""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler
from longembed.cli.parsers.serve import port_number

#: the judging page's default port (serve's is 8080: both can run at once)
JUDGE_PORT = 8765


def strategy_list(text: str) -> list[str]:
    """An argparse type: comma-separated strategy names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one strategy, e.g. bm25,chunks,late-chunks")
    return names


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``judge`` subcommand (handler: :func:`longembed.cli.judge.run`)."""
    parser = subparsers.add_parser(
        "judge",
        help="build a test set from your documents: judge the pooled results of every strategy on a page",
        description=(
            "Index DOCS with each candidate strategy advise would compare for --model (cached in --indexes: a "
            "rerun re-embeds only changed documents), then serve a judging page on 127.0.0.1: type a question "
            "(or queue them with --questions), see the union of every strategy's top --k documents, merged, "
            "shuffled and without saying which strategy found which, and grade each relevant (2), partly (1) or "
            "not (0) by click or key. Every click is appended to OUT/judgments.jsonl and fsynced, and "
            "OUT/queries.jsonl and OUT/qrels/test.tsv are rewritten from it: OUT is a BEIR task folder for "
            "longembed eval --task-dir and longembed advise --task-dir. The page's Advise button runs advise on "
            "the judgments so far in the background (judging goes on) and shows its recommendation, each strategy's "
            "judged@10 and the index command to use next. A rerun resumes where it stopped."
        ),
    )
    parser.add_argument("--docs", type=Path, required=True, metavar="DIR", help="the documents (a folder)")
    parser.add_argument("--out", type=Path, required=True, metavar="TASK_DIR",
                        help="the task folder the judgments go to (created; an existing one is resumed)")
    parser.add_argument("--model", default="default",
                        help="the embedding model advise will be asked about (a folder, a hub id, 'default'; "
                             "'bm25' pools BM25 alone)")
    parser.add_argument("--strategies", type=strategy_list, default=None, metavar="A,B,...",
                        help="pool only these candidates (default: all of advise's for the model; each dense "
                             "one costs an embedding of the documents)")
    parser.add_argument("-k", "--k", type=int, default=10, help="pool depth: each strategy's top k (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order results are shown in (default 0)")
    parser.add_argument("--questions", type=Path, default=None, metavar="FILE",
                        help="questions to judge in turn: a .txt file (one per line) or .jsonl (\"question\" or "
                             "\"text\" per line)")
    parser.add_argument("--indexes", type=Path, default=None, metavar="DIR",
                        help="where each strategy's index is kept (default: TASK_DIR/.indexes)")
    parser.add_argument("--glob", default=None, help="the files of DOCS to read (default: every document file)")
    parser.add_argument("--chunking", default=None, help="the chunks of the chunked strategies (advise's default)")
    parser.add_argument("--port", type=port_number, default=JUDGE_PORT,
                        help=f"port on 127.0.0.1 (default {JUDGE_PORT}; 0 picks a free one)")
    parser.add_argument("--device", default=None, help="torch device (default: cpu or cuda)")
    parser.add_argument("--batch-size", type=int, default=16, help="documents per encode batch while indexing")
    parser.add_argument("--no-serve", dest="serve", action="store_false",
                        help="build the indexes and the task folder's corpus, then stop")
    parser.set_defaults(func=CommandHandler("longembed.cli.judge", "run"))
