"""``longembed sweep``: choose a TempScale temperature on one task, measure it on the others.

    longembed sweep --model PATH --method pi --max-length 4096 --temperatures 1.0 0.9 0.8 0.7 0.5 \\
        --select-task qmsum --score-tasks passkey needle squality hotpotqa \\
        --data-dir ../shared/data --output runs/sweep-pi4k
    longembed sweep ... --query-temperatures 1.0 0.8 0.6      # grid of query x document taus
    longembed sweep ... --decays 0.5 1.0 --decay-reference 512  # length-aware tau(n)

Every candidate is evaluated on --select-task only; the best one (ties: the least change from
tau = 1) is then compared with tau = 1 on --score-tasks, which must not include the selection task.
--report-all adds every candidate's scores on the scoring tasks, marked "not used for selection".
Writes OUTPUT/sweep.json (``longembed.evaluation.sweep_runner``), sweep.md and sweep.png
(``longembed.report.sweep_report``), and prints the tables. Embeddings are cached (``--cache-dir``), so a rerun is fast.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import default_output, encoder_options, existing_folder, settings_from_args
from longembed.errors import UserError
from longembed.evaluation.runner import default_data_dir
from longembed.evaluation.sweep_runner import sweep_temperature
from longembed.evaluation.sweep_spec import SweepSpec
from longembed.report.sweep_report import sweep_tables, write_sweep_report
from longembed.results import SWEEP_FILE


def run(args: argparse.Namespace) -> int:
    """Run the sweep, write sweep.json / sweep.md / sweep.png, print the tables."""
    resolve_method(args)
    if args.model == "bm25":
        raise UserError("--model bm25 has no attention temperature: sweep an embedding model")
    spec = settings_from_args(SweepSpec, args)
    data_dir = existing_folder(spec.data_dir if spec.data_dir is not None else default_data_dir(), "--data-dir")
    output = spec.output_dir or Path(f"{default_output(args.model, args.method, args.max_length)}-sweep")
    spec = dataclasses.replace(spec, data_dir=data_dir, output_dir=output)
    sweep = sweep_temperature(args.model, spec, method=args.method, max_length=args.max_length,
                              encoder_options=encoder_options(args), device=args.device)
    written = write_sweep_report(sweep, output)
    print()
    print(sweep_tables(sweep))
    print(f"\nwrote {output / SWEEP_FILE}, {written['markdown']} and {written['plot']}")
    return 0
