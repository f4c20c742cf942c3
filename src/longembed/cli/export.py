"""``longembed export``: write an extended model as a plain folder other tools load without longembed.

    longembed export --model PATH --method pi --max-length 4096 --output DIR     # APE: pi, gp, rp
    longembed export --model NOMIC --method yarn --max-length 8192 --output DIR  # RoPE: pi, ntk, yarn
    longembed export --model TUNED_DIR --output DIR                               # a tuned folder

The folder loads with ``SentenceTransformer(DIR)`` (or transformers' AutoModel) and gives longembed's
vectors for inputs longer than Lo; what it does to short inputs is in the README.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import add_encoder_arguments, encoder_options
from longembed.export import export_model


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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = export_model(
        args.model, args.method, args.max_length, args.output, overwrite=args.overwrite, **encoder_options(args)
    )
    print(f"wrote {folder}")
    return 0
