"""The ``collapse`` subcommand: ``longembed collapse --model PATH --data-dir DIR --output DIR``."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from .corpus import SOURCES
from .run import DEFAULT_LENGTHS, DEFAULT_SHORT_EDGES, run_collapse

__all__ = ["register_cli", "run_from_args"]


def _option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, value), the value read as JSON when it parses (numbers, null, ...)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def register_cli(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``collapse`` subcommand to a main parser's subparsers; its handler is
    ``args.func(args) -> int``."""
    p = subparsers.add_parser(
        "collapse",
        help="measure length collapse (pairwise cosine, spread, norms, sigma_a) vs text length",
        description=(
            "Cut the same real documents (essays, SQuALITY stories, QMSum meetings) to each length, "
            "add the paper's short intervals [0,100)..[400,500), and record per length and TempScale "
            "temperature: mean pairwise cosine, spread, mean norm and sigma_a of the last layer's "
            "attention. Writes OUTPUT/collapse.json and one PNG per metric."
        ),
    )
    p.add_argument("--model", required=True, help="model folder or name (as for load_encoder)")
    p.add_argument("--method", default="truncate", help="context-window extension method (default truncate)")
    p.add_argument("--max-length", type=int, default=None, help="target length Lt of the method")
    p.add_argument(
        "--temperature",
        type=float,
        nargs="+",
        default=[1.0],
        metavar="T",
        help="TempScale temperatures in (0, 1], one line per temperature (default 1.0)",
    )
    p.add_argument("--data-dir", type=Path, required=True, help="folder in the shared data layout")
    p.add_argument("--output", type=Path, required=True, help="output folder")
    p.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=list(DEFAULT_LENGTHS),
        metavar="N",
        help="bucket lengths in tokens seen by the model, special tokens included (default %(default)s)",
    )
    p.add_argument(
        "--short-edges",
        type=int,
        nargs="*",
        default=list(DEFAULT_SHORT_EDGES),
        metavar="N",
        help="edges of the short intervals in content tokens; give none to disable (default %(default)s)",
    )
    p.add_argument("--texts-per-bucket", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    p.add_argument("--no-sigma-a", action="store_true", help="skip sigma_a (the slow part at long lengths)")
    p.add_argument(
        "--sigma-a-texts",
        type=int,
        default=None,
        metavar="N",
        help="measure sigma_a on the first N texts of each bucket only (default: all)",
    )
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more load_encoder options, e.g. --option scale=per_document (repeatable)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run_from_args)
    return p


def run_from_args(args: argparse.Namespace) -> int:
    """Run ``collapse`` from parsed arguments; prints where the results went."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    options = dict(args.option)
    if args.device is not None:
        options["device"] = args.device
    result = run_collapse(
        args.model,
        method=args.method,
        max_length=args.max_length,
        temperatures=args.temperature,
        data_dir=args.data_dir,
        output_dir=args.output,
        lengths=args.lengths,
        short_edges=args.short_edges,
        texts_per_bucket=args.texts_per_bucket,
        batch_size=args.batch_size,
        seed=args.seed,
        show_progress_bar=not args.quiet,
        sources=args.sources,
        with_sigma_a=not args.no_sigma_a,
        sigma_a_texts=args.sigma_a_texts,
        **options,
    )
    config = result["config"]
    print(f"wrote {args.output / 'collapse.json'} and {len(config['plots'])} plots")
    for tau, entry in result["temperatures"].items():
        for b in entry["buckets"]:
            print(
                f"tau={tau} {b['kind']:6s} length={_fmt(b.get('length'), 1)} n={b['n_texts']:3d} "
                f"cos={_fmt(b.get('mean_pairwise_cosine'))} spread={_fmt(b.get('spread'))} "
                f"norm={_fmt(b.get('mean_norm'))} sigma_a={_fmt(b.get('sigma_a'))}"
            )
    return 0


def _fmt(value: Any, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"
