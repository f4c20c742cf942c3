"""``longembed train jina``: the Jina Embeddings v2 recipe, one stage per call.

    longembed train jina --stage mlm --output runs/jina/mlm --config recipe.json --data-dir ../shared/data
    longembed train jina --stage pairs --init runs/jina/mlm --output runs/jina/pairs --config recipe.json
    longembed train jina --stage negatives --init runs/jina/pairs --output runs/jina/negatives --config recipe.json
    longembed train jina --stage mlm --config recipe.json --write-config full.json   # the effective config

The model size and every hyperparameter live in the config file (``JinaRecipeConfig``: sections model,
mlm, pairs, negatives, data; a file may give only some of them); --max-steps, --device and --precision
override the stage's section.  Calling a stage again with the same arguments resumes it from its last
checkpoint.  The output folder opens with ``load_encoder(DIR, method="native")``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from longembed.cli.options import existing_folder
from longembed.evaluation.runner import default_data_dir
from longembed.training.contrastive import PRECISIONS
from longembed.training.jina import RECORD_FILE, STAGES, JinaRecipeConfig, train_jina


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
    jina.set_defaults(func=run_jina)


def run_jina(args: argparse.Namespace) -> int:
    """Run one stage (or write the effective config) and print what it did."""
    config = JinaRecipeConfig.load(args.config) if args.config is not None else JinaRecipeConfig()
    config = config.with_overrides(args.stage, args.max_steps, args.device, args.precision)
    if args.write_config is not None:
        print(f"wrote {config.save(args.write_config)}")
        return 0
    if args.output is None:
        raise ValueError("give --output, the folder to write the stage to")
    existing_folder(args.init, "--init")
    data_dir = existing_folder(
        args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir"
    )
    result = train_jina(
        args.stage, args.output, init=args.init, config=config, data_dir=data_dir, overwrite=args.overwrite
    )
    summary = result.summary
    print(
        f"\nstage {args.stage}: {summary.steps} steps in {summary.seconds} s, final loss {summary.final_loss}"
    )
    if "held_out" in result.record:
        print(f"held-out pairs: {json.dumps(result.record['held_out'])}")
    method = "native" if result.record.get("positions") == "alibi" else "truncate"
    print(
        f"wrote {result.folder} ({RECORD_FILE}); open it with load_encoder({str(result.folder)!r}, method={method!r})"
    )
    return 0
