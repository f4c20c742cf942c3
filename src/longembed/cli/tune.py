"""``longembed tune``: LongEmbed's further tuning of an APE model's added position rows.

    longembed tune --model PATH --method pi --max-length 4096 --output DIR --data-dir ../shared/data \\
        [--train-file PAIRS.jsonl] [--max-steps N] [--batch-size B] [--learning-rate LR]

Defaults are the paper's (Appendix B: lr 5e-4, 100 warm-up steps, 3 epochs, batch 512, tau 0.01,
7 hard negatives); on a CPU give --max-steps, --batch-size and --hard-negatives that fit.  Writes a
sentence-transformers folder that ``load_encoder(DIR)`` opens with the method and Lt recorded in it.
A killed run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from longembed.cli.options import add_data_dir_argument, parse_length
from longembed.evaluation.runner import default_data_dir
from longembed.training.contrastive import PRECISIONS
from longembed.training.data import SOURCES
from longembed.training.tune import TUNABLE_METHODS, default_tuning_config, tune_positions

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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = default_tuning_config(
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        epochs=args.epochs,
        max_steps=args.max_steps,
        hard_negatives=args.hard_negatives,
        temperature=args.loss_temperature,
        max_seq_length=args.max_seq_length,
        save_steps=args.save_steps,
        seed=args.seed,
        device=args.device,
        precision=args.precision,
    )
    data_dir = None if args.train_file is not None else (args.data_dir or default_data_dir())
    result = tune_positions(
        args.model,
        args.method,
        args.max_length,
        args.output,
        data_dir=data_dir,
        train_file=args.train_file,
        sources=tuple(args.sources),
        config=config,
        max_pairs=args.max_pairs,
        overwrite=args.overwrite,
    )
    s = result.summary
    print(json.dumps({"output": str(result.folder), "steps": s.steps, "seconds": s.seconds,
                      "examples_per_second": s.examples_per_second, "final_loss": s.final_loss}, indent=2))
    return 0
