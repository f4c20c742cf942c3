"""``longembed advise``: which retrieval strategy to use for one model on your documents.

    longembed advise --model PATH --max-length 4096 --task-dir my-contracts --output advice/contracts
    longembed advise --model PATH --max-length 4096 --haystack my-documents/ --output advice/haystack \\
        --budget-seconds 1800
    longembed advise --model PATH --data-dir ../shared/data --tasks qmsum --output advice/qmsum
    longembed advise ... --dry-run        # the strategies and the estimate only

Every strategy is an ordinary benchmark run in OUTPUT/runs/<strategy>/ (``longembed report`` and
``longembed compare`` read them); embeddings are cached, so a rerun resumes where it stopped and a
finished advice reruns in the time of its cost measurements (:func:`longembed.advice.advise`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from longembed.advice.advisor import advise, estimate_advice
from longembed.advice.markdown import strategy_table
from longembed.advice.spec import AdviseSpec
from longembed.cli.dtype_flag import resolve_auto_flag
from longembed.cli.options import encoder_options, existing_folder, settings_from_args
from longembed.evaluation.runner import default_data_dir


def run(args: argparse.Namespace) -> int:
    """Advise (it prints its estimate, progress, recommendation and files), then print the table."""
    spec = settings_from_args(AdviseSpec, args)
    resolve_auto_flag(args)
    data_dir = existing_folder(spec.data_dir if spec.data_dir is not None else default_data_dir(), "--data-dir")
    spec = dataclasses.replace(spec, data_dir=data_dir)
    if spec.dry_run:
        estimate_advice(args.model, spec, max_length=args.max_length, encoder_options=encoder_options(args),
                        device=args.device)
        return 0
    try:
        advice = advise(args.model, spec, max_length=args.max_length, encoder_options=encoder_options(args),
                        device=args.device)
    except KeyboardInterrupt:
        print("\ninterrupted: finished chunks are cached; run the same command again to resume", file=sys.stderr)
        return 130
    print()
    print(strategy_table(advice))
    return 0
