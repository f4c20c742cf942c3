"""The flags of ``longembed evaluate`` (the command itself: :mod:`longembed.cli.evaluate`).

Only light imports here: ``longembed evaluate --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import (
    MODEL_HELP,
    CommandHandler,
    add_encoder_arguments,
    add_settings_arguments,
    help_epilog,
)
from longembed.evaluation.spec import BENCHMARK, EvalSpec
from longembed.retrieval.strategy import Strategy


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
        epilog=help_epilog([
            "longembed eval --model default --tasks passkey needle --lengths 256 4096 --method pi --max-length 4096",
            "longembed eval --model bm25 --tasks passkey                     # the lexical baseline",
            "longembed eval --model nomic-embed-text-v1.5 --method selfextend --max-length 8192 \\",
            "    --granularity chunks --chunking tokens:256 --late --fuse bm25  # late chunks + BM25",
            "longembed eval --model default --task-dir my_task --output runs/mine   # your own BEIR folder",
        ]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_encoder_arguments(parser, model_required=True, model_help=MODEL_HELP + ", or 'bm25' for the BM25 baseline")
    groups = {BENCHMARK: parser.add_argument_group(BENCHMARK)}
    add_settings_arguments(parser, EvalSpec, groups)  # every EvalSpec field is a flag
    add_settings_arguments(parser, Strategy, groups)  # and every Strategy field but the encoder's
    groups[BENCHMARK].add_argument(
        "--needles",
        type=Path,
        default=None,
        metavar="FILE",
        help="needle task: a .jsonl of {fact, question} pairs instead of the packaged needles (at least 2; "
        "one document per needle: the first 100 give min(50, needles) queries per length, "
        "--queries-per-length N > 50 needs 2N needles)",
    )
    parser.set_defaults(func=CommandHandler("longembed.cli.evaluate", "run"))
