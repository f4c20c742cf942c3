"""The flags of ``longembed search`` (the command itself: :mod:`longembed.cli.search`).  Light imports only."""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``search`` subcommand (handler: :func:`longembed.cli.search.run`)."""
    parser = subparsers.add_parser(
        "search",
        help="search an index built by longembed index",
        description=(
            "Rank an index's documents for a question as longembed eval ranks them (a document scores its best "
            "chunk; a hybrid index fuses the dense ranking with BM25's). Each result shows its score, its best "
            "passage and every system's rank. --queries FILE --run OUT writes a TREC run file instead. Loading "
            "the index and the model is paid once per process: search many queries in one call (--queries) or "
            "from Python (longembed.search.open_index)."
        ),
    )
    parser.add_argument("query", nargs="?", default=None, help="the question (or --queries FILE)")
    parser.add_argument("--index", required=True, metavar="DIR|URI",
                        help="the index folder, or s3://bucket/prefix (gs://, az://)")
    parser.add_argument("-k", "--k", type=int, default=None,
                        help="results per query (default: 10; with --run, 100 as eval ranks)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    parser.add_argument("--queries", type=Path, default=None, metavar="FILE",
                        help="a queries.jsonl (BEIR: _id and text) to search in one batch; needs --run")
    parser.add_argument("--run", type=Path, default=None, metavar="OUT",
                        help="with --queries: write a TREC run file (qid Q0 docid rank score tag), scores strictly "
                        "decreasing in the order eval ranks")
    parser.add_argument("--exact", action="store_true",
                        help="scan every vector even if the index has an ANN index (a check of its results)")
    parser.add_argument("--passages", choices=["query", "chunk"], default="query",
                        help="the passage each result shows: query = its best sentence window for the question "
                        "(its best chunks' sentences embedded once per search), chunk = the chunk that scored it "
                        "(no embedding beyond the question's: for throughput). Default: query")
    parser.add_argument("--path-prefix", default=None, help="only documents whose source starts with this")
    parser.add_argument("--device", default=None, help="torch device for the query encoder (default: cpu or cuda)")
    parser.set_defaults(func=CommandHandler("longembed.cli.search", "run"))
