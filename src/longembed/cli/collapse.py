"""``longembed collapse``: length collapse of an encoder vs text length, per TempScale temperature.

    longembed collapse --model PATH --temperature 1.0 0.8 0.5 --data-dir ../shared/data --output runs/collapse
"""

from __future__ import annotations

import argparse
import logging

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import (
    encoder_options,
    existing_folder,
)
from longembed.collapse.run import (
    run_collapse,
)
from longembed.report.formatting import fmt
from longembed.results import COLLAPSE_FILE


def run(args: argparse.Namespace) -> int:
    """Run ``collapse`` from parsed arguments; prints the estimate, then where the results went."""
    resolve_method(args)
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
