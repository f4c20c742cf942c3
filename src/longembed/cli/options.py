"""Command-line flags shared by every subcommand that builds an encoder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from longembed.extension.methods import METHODS

MODEL_HELP = "model folder, sentence-transformers folder or hub id ('default': packaged all-MiniLM-L6-v2)"


def add_encoder_arguments(
    parser: argparse.ArgumentParser, model_required: bool = False, model_help: str = MODEL_HELP
) -> None:
    """--model, --method, --max-length and the encoder's switches."""
    group = parser.add_argument_group("encoder")
    group.add_argument(
        "--model",
        default=None if model_required else "default",
        required=model_required,
        help=model_help,
    )
    group.add_argument(
        "--method", default="truncate", choices=list(METHODS), help="context-window extension method"
    )
    group.add_argument(
        "--max-length", type=int, default=None, help="Lt: longest input in tokens (default: the model's Lo)"
    )
    group.add_argument(
        "--original-length", type=int, default=None, help="Lo override (default: from the model config)"
    )
    group.add_argument(
        "--position-scheme", choices=["ape", "rope", "alibi"], default=None, help="override detection"
    )
    group.add_argument(
        "--scale", choices=["fixed", "per_document"], default="fixed", help="s = ceil(Lt/Lo) or ceil(n/Lo)"
    )
    group.add_argument(
        "--apply-to", choices=["long", "all"], default="long", help="extend only inputs > Lo, or all"
    )
    group.add_argument(
        "--attention-scale", choices=["logn"], default=None, help="multiply logits by max(1, log n/log Lo)"
    )
    group.add_argument("--temperature", type=float, default=1.0, help="TempScale tau in (0, 1]")
    group.add_argument(
        "--ntk-factor", type=float, default=None, help="NTK lambda (default: Table 6 by scale)"
    )
    group.add_argument(
        "--group-size", type=int, default=None, help="SelfExtend g (default: Table 6 by scale)"
    )
    group.add_argument("--window", type=int, default=None, help="SelfExtend w (default: Table 6 by scale)")
    group.add_argument(
        "--pooling", choices=["mean", "cls", "last"], default=None, help="override the folder's pooling"
    )
    group.add_argument(
        "--on-overflow", choices=["truncate", "error"], default="truncate", help="inputs > max-length"
    )
    group.add_argument("--batch-size", type=int, default=16, help="most sequences per batch")


def encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """The EncoderConfig fields set on the command line (model, method and max_length excluded)."""
    return {
        "original_length": args.original_length,
        "position_scheme": args.position_scheme,
        "scale": args.scale,
        "apply_to": args.apply_to,
        "attention_scale": args.attention_scale,
        "temperature": args.temperature,
        "ntk_factor": args.ntk_factor,
        "group_size": args.group_size,
        "window": args.window,
        "pooling": args.pooling,
        "on_overflow": args.on_overflow,
    }


def add_benchmark_arguments(group: argparse._ArgumentGroup, output_help: str) -> None:
    """Flags shared by every benchmark command (eval, sweep): data, lengths, output, prompts, cache."""
    group.add_argument(
        "--lengths",
        nargs="+",
        default=None,
        metavar="LIST",
        help="passkey/needle lengths, e.g. 256,512,1k,4k (default: all eight, 256..32k)",
    )
    group.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data folder (default: $LONGEMBED_DATA_DIR; passkey needs none)",
    )
    group.add_argument("--output", type=Path, default=None, help=output_help)
    group.add_argument(
        "--query-prompt",
        default=None,
        help="prefix of every query (default: the model's 'query' prompt, else none; '' for none)",
    )
    group.add_argument(
        "--document-prompt",
        default=None,
        help="prefix of every document (default: the model's 'document' or 'passage' prompt)",
    )
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache (default: $LONGEMBED_CACHE_DIR or ~/.cache/longembed/embeddings)",
    )
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")
    group.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
