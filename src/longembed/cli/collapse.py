"""``longembed collapse``: length collapse of an encoder vs text length, per TempScale temperature.

    longembed collapse --model PATH --temperature 1.0 0.8 0.5 --data-dir ../shared/data --output runs/collapse
"""

from __future__ import annotations

import argparse
import logging

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options, existing_folder, settings_from_args
from longembed.collapse.spec import CollapseSpec
from longembed.collapse.study import run_collapse
from longembed.report.formatting import fmt
from longembed.results import COLLAPSE_FILE


def run(args: argparse.Namespace) -> int:
    """Run ``collapse`` from parsed arguments; prints the estimate, then where the results went."""
    resolve_method(args)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    existing_folder(args.data_dir, "--data-dir")
    # the command line's --sigma-a-texts 0 means all texts
    spec = settings_from_args(CollapseSpec, args, sigma_a_texts=args.sigma_a_texts or None)
    result = run_collapse(args.model, spec, method=args.method, max_length=args.max_length, device=args.device,
                          **encoder_options(args))
    print(f"wrote {spec.output_dir / COLLAPSE_FILE} and {len(result.config['plots'])} plots")
    for tau, buckets in result.temperatures.items():
        for b in buckets:
            print(
                f"tau={tau} {b.kind:6s} length={fmt(b.length, 1)} n={b.n_texts:3d} "
                f"cos={fmt(b.mean_pairwise_cosine, 4)} spread={fmt(b.spread, 4)} "
                f"norm={fmt(b.mean_norm, 4)} sigma_a={fmt(b.sigma_a, 4)}"
            )
    return 0
