"""The flags of ``longembed evaluate`` (the command itself: :mod:`longembed.cli.evaluate`).

Only light imports here: ``longembed evaluate --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import MODEL_HELP, CommandHandler, add_benchmark_arguments, add_encoder_arguments
from longembed.evaluation.choices import GRANULARITIES
from longembed.tasks import DEFAULT_TASKS


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a model on the LongEmbed benchmark",
        description=(
            "Evaluate a model (or --model bm25) with one context-window extension method on LongEmbed "
            "tasks; write OUTPUT/results.json and print a table. Tasks whose data is missing are skipped "
            "(listed in results.json under 'skipped')."
        ),
    )
    add_encoder_arguments(parser, model_required=True, model_help=MODEL_HELP + ", or 'bm25' for the BM25 baseline")
    group = parser.add_argument_group("benchmark")
    group.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="LIST",
        help=f"comma- or space-separated task names (default: the six offline tasks: {', '.join(DEFAULT_TASKS)})",
    )
    add_benchmark_arguments(group, "run folder for results.json (default: runs/<model>-<method>-<max_length>)")
    group.add_argument(
        "--needles",
        type=Path,
        default=None,
        metavar="FILE",
        help="needle task: a .jsonl of {fact, question} pairs instead of the packaged needles (at least 2; "
        "min(50, needles) queries per length)",
    )
    chunks = parser.add_argument_group("chunks (retrieve passages, not only documents)")
    chunks.add_argument(
        "--granularity", choices=GRANULARITIES, default="document",
        help="document: one vector per document; chunks: a document scores its best chunk (MaxSim), and a "
        "passage task (qmsum_passages) embeds its passages with their context (default: document)",
    )
    chunks.add_argument(
        "--chunking", default="tokens:256", metavar="SPEC",
        help="with --granularity chunks: tokens:SIZE[:OVERLAP] or sentences:N (default tokens:256)",
    )
    style = chunks.add_mutually_exclusive_group()
    style.add_argument("--late", dest="late", action="store_true", default=True,
                       help="late chunking: one pass over the whole document, chunk = mean of its token states "
                       "(default)")
    style.add_argument("--naive", dest="late", action="store_false",
                       help="naive chunking: every chunk embedded alone")
    group.add_argument("--query-temperature", type=float, default=None,
                       help="TempScale tau for queries (default: --temperature)")
    group.add_argument("--document-temperature", type=float, default=None,
                       help="TempScale tau for documents (default: --temperature)")
    group.add_argument(
        "--cache-ignore-code",
        action="store_true",
        help="key the cache on longembed's version, not on the hash of its encoder code "
        "(reuse vectors across code edits you know do not change them)",
    )
    group.add_argument("--chunk-size", type=int, default=64, help="texts per cache write (default 64)")
    group.add_argument("--no-estimate", action="store_true",
                       help="skip the warm-up that times the encoder (counts are still printed)")
    group.add_argument("--dry-run", action="store_true",
                       help="print the plan and the cost estimate, then stop (nothing encoded or written)")
    parser.set_defaults(func=CommandHandler("longembed.cli.evaluate", "run"))
