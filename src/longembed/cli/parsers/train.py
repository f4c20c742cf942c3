"""The flags of ``longembed train`` (the command itself: :mod:`longembed.cli.train`).

Only light imports here: ``longembed train --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler
from longembed.training.config import PRECISIONS, SOURCES, STAGES
from longembed.training.contextual.config import ContextualConfig

CONTEXTUAL = ContextualConfig()


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
    """Add the ``train`` subcommand with its recipes: ``jina`` (handler: :func:`run_jina`) and ``contextual``
    (:func:`run_contextual`)."""
    parser = subparsers.add_parser(
        "train",
        help="train an embedding model: from scratch (the Jina v2 recipe), or for late chunking (contextual)",
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
    _register_contextual(recipes)


def _register_contextual(recipes: argparse._SubParsersAction) -> None:
    """``longembed train contextual``: late-chunking fine-tuning with in-sequence negatives (InSeNT)."""
    c = CONTEXTUAL
    parser = recipes.add_parser(
        "contextual",
        help="fine-tune a model for late chunking: in-sequence negatives (ConTEB / InSeNT)",
        description=(
            "Fine-tune an embedding model for late-chunking pooling (ConTEB / InSeNT, arXiv 2505.24782): long "
            "documents (SQuAD articles, unused HotpotQA questions; never the benchmark's data) run once through "
            "the model with --method at --max-length, each chunk mean-pooled, and each query must find its chunk "
            "among the other chunks of its document and of the step's other documents; a distillation term keeps "
            "short texts where the original model put them. Writes a folder that load_encoder(DIR) opens with "
            "the method it was trained under; a killed run continues with --resume."
        ),
    )
    parser.add_argument("--model", required=True, help="the model to fine-tune (a folder, a hub id, or 'default')")
    parser.add_argument("--output", required=True, type=Path, help="the trained model folder to write")
    data = parser.add_argument_group("data")
    data.add_argument("--data-dir", type=Path, default=None,
                      help="the shared data folder (SQuAD, HotpotQA); default $LONGEMBED_DATA_DIR")
    data.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES), help="training sources")
    data.add_argument("--held-out-articles", type=int, default=c.held_out_articles,
                      help="SQuAD articles never trained on (the short-text check scores them)")
    model = parser.add_argument_group("the model's long inputs")
    model.add_argument("--method", default=c.method,
                       help="extension method the documents run through (pi for MiniLM, ntk for nomic; default truncate)")
    model.add_argument("--max-length", type=positive_int, default=c.max_length, help="Lt, the extended window")
    model.add_argument("--doc-tokens", type=positive_int, default=c.doc_tokens,
                       help="token budget of a training document (packed to it; at most --max-length)")
    loss = parser.add_argument_group("loss")
    loss.add_argument("--temperature", type=float, default=c.temperature, help="InfoNCE tau (ConTEB: 0.05)")
    loss.add_argument("--in-sequence-weight", type=float, default=c.in_sequence_weight,
                      help="weight of the in-sequence term; the in-batch term gets 1 - it (ConTEB: 0.5)")
    loss.add_argument("--distill-weight", type=float, default=c.distill_weight,
                      help="weight of 1 - cos to the original model's vectors of texts alone (0: no distillation)")
    train = parser.add_argument_group("training")
    train.add_argument("--max-steps", type=positive_int, default=c.max_steps, help="optimizer steps")
    train.add_argument("--documents-per-step", type=positive_int, default=c.documents_per_step,
                       help="documents per step (in-batch negatives come from the others)")
    train.add_argument("--queries-per-document", type=positive_int, default=c.queries_per_document)
    train.add_argument("--squad-share", type=float, default=c.squad_share,
                       help="probability that a step's document is a SQuAD article (default 0.5; HotpotQA gives "
                       "about 70 one-question texts for each article)")
    train.add_argument("--learning-rate", type=float, default=c.learning_rate)
    train.add_argument("--warmup-steps", type=int, default=c.warmup_steps)
    train.add_argument("--no-gradient-checkpointing", action="store_true",
                       help="keep every layer's activations (faster, memory grows with --doc-tokens)")
    train.add_argument("--save-steps", type=positive_int, default=c.save_steps, help="checkpoint every N steps")
    train.add_argument("--logging-steps", type=positive_int, default=c.logging_steps)
    train.add_argument("--seed", type=int, default=c.seed)
    train.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    train.add_argument("--precision", choices=PRECISIONS, default=c.precision)
    train.add_argument("--cache-dir", type=Path, default=None,
                       help="keep the original model's distillation targets here (default: beside the checkpoints)")
    parser.add_argument("--no-evaluate", action="store_true",
                        help="skip the short-text check on the held-out SQuAD articles at the end")
    parser.add_argument("--resume", action="store_true", help="continue the unfinished run in --output")
    parser.add_argument("--overwrite", action="store_true", help="retrain into a folder that holds a finished run")
    parser.set_defaults(func=CommandHandler("longembed.cli.train", "run_contextual"))
