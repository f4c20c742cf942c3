"""``longembed sweep``: choose a TempScale temperature on one task, measure it on the others.

    longembed sweep --model PATH --method pi --max-length 4096 --temperatures 1.0 0.9 0.8 0.7 0.5 \\
        --select-task qmsum --score-tasks passkey needle squality hotpotqa \\
        --data-dir ../shared/data --output runs/sweep-pi4k
    longembed sweep ... --query-temperatures 1.0 0.8 0.6      # grid of query x document taus
    longembed sweep ... --decays 0.5 1.0 --decay-reference 512  # length-aware tau(n)

Every candidate is evaluated on --select-task only; the best one (ties: the least change from
tau = 1) is then compared with tau = 1 on --score-tasks, which must not include the selection task.
--report-all adds every candidate's scores on the scoring tasks, marked "not used for selection".
Writes OUTPUT/sweep.json (``longembed.evaluation.sweep``), sweep.md and sweep.png
(``longembed.report.sweep``), and prints the tables. Embeddings are cached (``--cache-dir``), so a rerun is fast.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import (
    default_output,
    encoder_options,
    existing_folder,
    parse_lengths,
    split_list,
)
from longembed.evaluation.runner import default_data_dir
from longembed.evaluation.sweep import sweep_temperature
from longembed.report.sweep import sweep_tables, write_sweep_report
from longembed.results import SWEEP_FILE

#: The paper's range without its extreme 0.1 (section 5.1: {0.1, 0.5, 0.6, ..., 1.0}).




def build_candidates(
    temperatures: list[float],
    query_temperatures: list[float] | None = None,
    document_temperatures: list[float] | None = None,
    decays: list[float] | None = None,
    decay_reference: int = 512,
) -> list[dict[str, Any]]:
    """Candidate settings from the command-line lists (duplicates are dropped later by the sweep).

    One candidate per --temperatures value; the query x document grid when either per-side list is
    given; one length-aware candidate per (decay, temperature).
    """
    candidates: list[dict[str, Any]] = [{"temperature": t} for t in temperatures]
    if query_temperatures is not None or document_temperatures is not None:
        queries = query_temperatures or temperatures
        documents = document_temperatures or temperatures
        candidates += [
            {"query_temperature": q, "document_temperature": d}
            for q, d in itertools.product(queries, documents)
        ]
    for decay in decays or ():
        candidates += [
            {"temperature": t, "temperature_decay": decay, "temperature_reference": decay_reference}
            for t in temperatures
        ]
    return candidates


def run(args: argparse.Namespace) -> int:
    """Run the sweep, write sweep.json / sweep.md / sweep.png, print the tables."""
    resolve_method(args)
    if args.model == "bm25":
        raise ValueError("--model bm25 has no attention temperature: sweep an embedding model")
    score_tasks = split_list(args.score_tasks) or []
    lengths = parse_lengths(args.lengths)
    data_dir = existing_folder(args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir")
    output = args.output or Path(f"{default_output(args.model, args.method, args.max_length)}-sweep")
    candidates = build_candidates(
        args.temperatures,
        args.query_temperatures,
        args.document_temperatures,
        args.decays,
        args.decay_reference,
    )
    sweep = sweep_temperature(
        args.model,
        method=args.method,
        max_length=args.max_length,
        encoder_options=encoder_options(args),
        candidates=candidates,
        select_task=args.select_task.strip(),
        score_tasks=score_tasks,
        data_dir=data_dir,
        lengths=lengths,
        output_dir=output,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        batch_size=args.batch_size,
        query_prompt=args.query_prompt,
        document_prompt=args.document_prompt,
        report_all=args.report_all,
        tie_tolerance=args.tie_tolerance,
        device=args.device,
        estimate=args.estimate,
    )
    written = write_sweep_report(sweep, output)
    print()
    print(sweep_tables(sweep))
    print(f"\nwrote {output / SWEEP_FILE}, {written['markdown']} and {written['plot']}")
    return 0
