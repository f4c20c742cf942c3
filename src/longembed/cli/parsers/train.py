"""The flags of ``longembed train`` (the command itself: :mod:`longembed.cli.train`).

Only light imports here: ``longembed train --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler
from longembed.training.choices import PRECISIONS, STAGES


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` subcommand with its ``jina`` recipe (handler: :func:`run_jina`)."""
    parser = subparsers.add_parser(
        "train",
        help="train an embedding model from scratch (the Jina v2 recipe)",
        description="Train an embedding model with a published recipe.",
    )
    recipes = parser.add_subparsers(dest="recipe", required=True, metavar="RECIPE")
    jina = recipes.add_parser(
        "jina",
        help="JinaBERT: MLM pre-training, then contrastive pairs, then hard negatives",
        description=(
            "One stage of the Jina Embeddings v2 recipe: mlm (masked-language-model pre-training of a "
            "JinaBERT with ALiBi, section 4.3), pairs (bidirectional InfoNCE, eqs. 3-4) or negatives "
            "(InfoNCE with hard negatives, eq. 5). Writes a folder that load_encoder(DIR, method='native') "
            "opens; a killed run resumes when called again with the same arguments."
        ),
    )
    jina.add_argument("--stage", required=True, choices=STAGES, help="the stage to run")
    jina.add_argument(
        "--output", type=Path, default=None, help="the stage's folder (required unless --write-config)"
    )
    jina.add_argument(
        "--init", type=Path, default=None, help="the previous stage's folder (required for pairs, negatives)"
    )
    jina.add_argument(
        "--config", type=Path, default=None, help="recipe config JSON (default: the small reproduction)"
    )
    jina.add_argument("--max-steps", type=positive_int, default=None, help="override the stage's max_steps")
    jina.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the shared data folder (SQuAD, HotpotQA); default $LONGEMBED_DATA_DIR; not needed with the "
        "config's data.text_file / data.train_file",
    )
    jina.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    jina.add_argument("--precision", choices=PRECISIONS, default=None, help="override the stage's precision")
    jina.add_argument(
        "--overwrite", action="store_true", help="retrain into a folder that holds a finished stage"
    )
    jina.add_argument(
        "--write-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the effective config (file + flags) to FILE and exit without training",
    )
    jina.set_defaults(func=CommandHandler("longembed.cli.train", "run_jina"))
