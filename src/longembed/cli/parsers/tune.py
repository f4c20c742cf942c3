"""The flags of ``longembed tune`` (the command itself: :mod:`longembed.cli.tune`).

Only light imports here: ``longembed tune --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_data_dir_argument, parse_length
from longembed.training.config import (
    PRECISIONS,
    SOURCES,
    TUNABLE_METHODS,
    TUNE_OBJECTIVES,
    default_tuning_config,
)

#: The paper's hyperparameters, shown as the flags' defaults.
PAPER = default_tuning_config()


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tune`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "tune",
        help="train the added position rows of an extended APE model (LongEmbed's further tuning)",
        description=(
            "Extend an absolute-position model with PI or RP to --max-length, freeze every original weight "
            "and the original position rows, and train the new rows contrastively with PoSE position ids."
        ),
    )
    parser.add_argument("--model", required=True, help="model folder (BERT / XLM-R style, learned positions)")
    parser.add_argument("--method", required=True, choices=TUNABLE_METHODS, help="the position map to start from")
    parser.add_argument("--max-length", required=True, type=parse_length, help="Lt, e.g. 4096 or 4k")
    parser.add_argument("--output", required=True, type=Path, help="the tuned model folder to write")
    data = parser.add_argument_group("data")
    data.add_argument("--train-file", type=Path, default=None,
                      help="jsonl of {query, positive, negatives?} (default: SQuAD + unused HotpotQA under --data-dir)")
    add_data_dir_argument(data, "data folder with squad/ and hotpotqa_dev_distractor/ (default: $LONGEMBED_DATA_DIR)")
    data.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES), help="built-in pair sources")
    data.add_argument("--max-pairs", type=int, default=None, help="train on a seeded random subset of the pairs")
    train = parser.add_argument_group("training (defaults: the paper's)")
    train.add_argument("--objective", choices=TUNE_OBJECTIVES, default="contrastive",
                       help="contrastive: the paper's InfoNCE; distill: each text at its PoSE rows embedded as the "
                       "original model embeds it; both: InfoNCE + --distill-weight x distill")
    train.add_argument("--distill-weight", type=float, default=1.0, help="weight of the distillation term (both)")
    train.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps (default: epochs)")
    train.add_argument("--epochs", type=float, default=PAPER.epochs)
    train.add_argument("--batch-size", type=int, default=PAPER.batch_size)
    train.add_argument("--learning-rate", type=float, default=PAPER.learning_rate)
    train.add_argument("--warmup-steps", type=int, default=PAPER.warmup_steps)
    train.add_argument("--hard-negatives", type=int, default=PAPER.hard_negatives, help="hard negatives per pair")
    train.add_argument("--loss-temperature", type=float, default=PAPER.temperature, help="InfoNCE tau")
    train.add_argument("--max-seq-length", type=int, default=None, help="cut training texts here (default: Lo)")
    train.add_argument("--save-steps", type=int, default=PAPER.save_steps, help="checkpoint every N steps")
    train.add_argument("--seed", type=int, default=PAPER.seed)
    train.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    train.add_argument("--precision", choices=PRECISIONS, default=PAPER.precision, help="mixed precision on GPUs")
    parser.add_argument("--overwrite", action="store_true", help="replace a finished tuned model at --output")
    parser.set_defaults(func=CommandHandler("longembed.cli.tune", "run"))
