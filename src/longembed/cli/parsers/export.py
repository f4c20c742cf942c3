"""The flags of ``longembed export`` (the command itself: :mod:`longembed.cli.export`).

Only light imports here: ``longembed export --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_encoder_arguments


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "export",
        help="write an extended model as a plain sentence-transformers folder",
        description=(
            "Write MODEL extended with METHOD to MAX_LENGTH as a standard folder (position table for APE "
            "models, rotary parameters for RoPE models) that loads with no longembed code."
        ),
    )
    parser.add_argument("--output", required=True, type=Path, help="the folder to write")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --output")
    add_encoder_arguments(
        parser,
        model_required=True,
        exclude=("prompts", "pooling", "on_overflow", "temperature_reference"),
    )
    parser.set_defaults(func=CommandHandler("longembed.cli.export", "run"))
