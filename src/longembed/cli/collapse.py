"""``longembed collapse``: length collapse of an encoder vs text length, per TempScale temperature.

    longembed collapse --model PATH --temperature 1.0 0.8 0.5 --data-dir ../shared/data --output runs/collapse
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from longembed.cli.options import (
    add_cache_arguments,
    add_data_dir_argument,
    add_encoder_arguments,
    encoder_options,
    existing_folder,
)
from longembed.collapse.corpus import SOURCES
from longembed.collapse.run import (
    DEFAULT_LENGTHS,
    DEFAULT_SHORT_EDGES,
    DEFAULT_SIGMA_A_TEXTS,
    DEFAULT_TEXTS_PER_BUCKET,
    run_collapse,
)
from longembed.report.formatting import fmt
from longembed.results import COLLAPSE_FILE


def register_cli(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``collapse`` subcommand (handler: :func:`run`)."""
    p = subparsers.add_parser(
        "collapse",
        help="measure length collapse (pairwise cosine, spread, norms, sigma_a) vs text length",
        description=(
            "Cut the same real documents (essays, SQuALITY stories, QMSum meetings) to each length, "
            "add the paper's short intervals [0,100)..[400,500), and record per length and TempScale "
            "temperature: mean pairwise cosine, spread, mean norm and sigma_a of the last layer's "
            "attention. Prints an estimate first; writes OUTPUT/collapse.json and one PNG per metric. "
            "Vectors and sigma_a values are cached: a killed run resumes."
        ),
    )
    add_encoder_arguments(p, model_required=True, exclude=("temperature",))
    group = p.add_argument_group("collapse")
    group.add_argument("--temperature", "--temperatures", dest="temperatures", type=float, nargs="+",
                       default=[1.0], metavar="T",
                       help="TempScale temperatures in (0, 1], one line per temperature (default 1.0)")
    add_data_dir_argument(group, "folder in the shared data layout", required=True)
    group.add_argument("--output", type=Path, required=True, help="output folder")
    group.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS), metavar="N",
                       help="bucket lengths in tokens seen by the model, special tokens included; lengths above "
                       "--max-length are skipped (default %(default)s)")
    group.add_argument("--short-edges", type=int, nargs="*", default=list(DEFAULT_SHORT_EDGES), metavar="N",
                       help="edges of the short intervals in content tokens; give none to disable "
                       "(default %(default)s)")
    group.add_argument("--texts-per-bucket", type=int, default=DEFAULT_TEXTS_PER_BUCKET,
                       help="texts per bucket (default %(default)s; the paper's figures use more)")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    group.add_argument("--no-sigma-a", action="store_true", help="skip sigma_a (the slow part at long lengths)")
    group.add_argument("--sigma-a-texts", type=int, default=DEFAULT_SIGMA_A_TEXTS, metavar="N",
                       help="measure sigma_a on the first N texts of each bucket (default %(default)s; 0: all)")
    add_cache_arguments(group)
    group.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``collapse`` from parsed arguments; prints the estimate, then where the results went."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    data_dir = existing_folder(args.data_dir, "--data-dir")
    result = run_collapse(
        args.model,
        method=args.method,
        max_length=args.max_length,
        temperatures=args.temperatures,
        data_dir=data_dir,
        output_dir=args.output,
        lengths=args.lengths,
        short_edges=args.short_edges,
        texts_per_bucket=args.texts_per_bucket,
        batch_size=args.batch_size,
        seed=args.seed,
        show_progress_bar=not args.quiet,
        sources=args.sources,
        with_sigma_a=not args.no_sigma_a,
        sigma_a_texts=args.sigma_a_texts or None,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        device=args.device,
        **encoder_options(args),
    )
    print(f"wrote {args.output / COLLAPSE_FILE} and {len(result.config['plots'])} plots")
    for tau, buckets in result.temperatures.items():
        for b in buckets:
            print(
                f"tau={tau} {b.kind:6s} length={fmt(b.length, 1)} n={b.n_texts:3d} "
                f"cos={fmt(b.mean_pairwise_cosine, 4)} spread={fmt(b.spread, 4)} "
                f"norm={fmt(b.mean_norm, 4)} sigma_a={fmt(b.sigma_a, 4)}"
            )
    return 0
