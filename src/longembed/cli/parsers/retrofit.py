"""The flags of ``longembed retrofit`` (the command itself: :mod:`longembed.cli.retrofit`).

Only light imports here: ``longembed retrofit --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_data_dir_argument
from longembed.training.config import PRECISIONS, RETROFIT_POSITIONS
from longembed.training.retrofit.config import RetrofitConfig

#: The defaults, shown in --help.
DEFAULTS = RetrofitConfig()


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``retrofit`` subcommand (handler: :func:`longembed.cli.retrofit.run`)."""
    parser = subparsers.add_parser(
        "retrofit",
        help="replace a BERT's position table by ALiBi and distil the original model into it",
        description=(
            "Build a JinaBERT from a BERT model (all-MiniLM-L6-v2, ...): every weight copied but the learned "
            "position table, bidirectional ALiBi in every layer; train it to reproduce the original model's "
            "mean-pooled vectors and token states on benchmark-safe texts of --min-seq-length..--max-seq-length "
            "tokens. Writes a folder that load_encoder(DIR, method='native') and SentenceTransformer(DIR) open."
        ),
    )
    parser.add_argument("--model", required=True, help="the teacher: a BERT model folder (learned positions, mean pooling)")
    parser.add_argument(
        "--positions", choices=RETROFIT_POSITIONS, default="alibi", help="what replaces the position table"
    )
    parser.add_argument("--output", required=True, type=Path, help="the retrofitted model folder to write")
    data = parser.add_argument_group("data (one of)")
    add_data_dir_argument(
        data, "data folder with squad/ and hotpotqa_dev_distractor/ (default: $LONGEMBED_DATA_DIR)"
    )
    data.add_argument("--text-file", type=Path, default=None,
                      help="your texts instead: jsonl with a 'text' field, or one text per line")
    pairs = parser.add_argument_group("contrastive pairs, mixed into the distillation (optional)")
    pairs.add_argument("--pairs", action="store_true",
                       help="add --pairs-weight x InfoNCE on training pairs: SQuAD and the unused HotpotQA under "
                       "--data-dir, or --pairs-file")
    pairs.add_argument("--pairs-file", type=Path, default=None,
                       help="your pairs instead: jsonl of {query, positive, negatives?} (implies --pairs)")
    pairs.add_argument("--pairs-weight", type=float, default=1.0, help="weight of the contrastive term (with --pairs)")
    pairs.add_argument("--pairs-batch-size", type=int, default=DEFAULTS.pairs_batch_size, help="pairs per step")
    pairs.add_argument("--pairs-temperature", type=float, default=DEFAULTS.pairs_temperature, help="InfoNCE tau")
    pairs.add_argument("--hard-negatives", type=int, default=DEFAULTS.hard_negatives, help="hard negatives per pair")
    train = parser.add_argument_group("training")
    train.add_argument("--max-steps", type=int, default=DEFAULTS.max_steps, help="optimizer steps")
    train.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size, help="texts per step")
    train.add_argument("--max-seq-length", type=int, default=None,
                       help="Lo, the longest training text in tokens (default: the teacher's window, 512 for BERT)")
    train.add_argument("--min-seq-length", type=int, default=DEFAULTS.min_seq_length, help="the shortest")
    train.add_argument("--learning-rate", type=float, default=DEFAULTS.learning_rate)
    train.add_argument("--warmup-steps", type=int, default=DEFAULTS.warmup_steps)
    train.add_argument("--token-weight", type=float, default=DEFAULTS.token_weight,
                       help="weight of the token states' MSE beside the pooled vectors' cosine (0: pooled only)")
    train.add_argument("--slope-scale", type=float, default=DEFAULTS.slope_scale,
                       help="multiply Jina's ALiBi slopes by this (default 1: Jina's; < 1 starts closer to the teacher)")
    train.add_argument("--save-steps", type=int, default=DEFAULTS.save_steps, help="checkpoint every N steps")
    train.add_argument("--logging-steps", type=int, default=DEFAULTS.logging_steps,
                       help="record the loss every N steps (and after the first)")
    train.add_argument("--seed", type=int, default=DEFAULTS.seed)
    train.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    train.add_argument("--precision", choices=PRECISIONS, default=DEFAULTS.precision,
                       help="the student's precision (bf16 on a CPU with bfloat16; fp16 on CUDA)")
    data.add_argument("--held-out-articles", type=int, default=DEFAULTS.held_out_articles,
                      help="SQuAD articles kept out of training (from --data-dir); the short-text fidelity is "
                      "scored on them at the end")
    parser.add_argument("--no-evaluate", action="store_true", help="skip the short-text fidelity at the end")
    train.add_argument("--cache-dir", type=Path, default=None,
                       help="keep the teacher's targets here, for later runs (default: with the checkpoints, "
                       "removed at the end)")
    parser.add_argument("--resume", action="store_true", help="continue the unfinished run in --output")
    parser.add_argument("--overwrite", action="store_true",
                        help="start again: replace a finished retrofit, or an unfinished run's checkpoints")
    parser.set_defaults(func=CommandHandler("longembed.cli.retrofit", "run"))
