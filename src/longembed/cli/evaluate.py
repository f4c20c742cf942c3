"""``longembed eval``: run the LongEmbed benchmark for one model and method, write results.json.

    longembed eval --model PATH --method pi --max-length 4096 --tasks passkey,qmsum --output runs/pi4k
    longembed eval --model bm25 --tasks passkey --lengths 256 --output runs/bm25
    longembed eval --model PATH --method pi --max-length 4096 --tasks qmsum --granularity chunks \
        --chunking tokens:256 --late --output runs/pi4k-late

Embeddings are cached (``--cache-dir``; default ``$LONGEMBED_CACHE_DIR`` or
``~/.cache/longembed/embeddings``), so an interrupted run resumes where it stopped when the same
command is run again, and a finished run reruns in seconds. The command never prompts: it prints a
cost estimate (documents, tokens, cached, seconds) and starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import (
    default_output,
    encoder_options,
    existing_folder,
    given_encoder_flags,
    parse_lengths,
    split_list,
)
from longembed.encoder import load_encoder
from longembed.evaluation.bm25 import BM25Model
from longembed.evaluation.runner import default_data_dir, evaluate_model
from longembed.report.tables import results_summary
from longembed.results import RESULTS_FILE
from longembed.tasks import DEFAULT_TASKS, get_task


def resolve_task_list(names: list[str] | None, needles: Path | None) -> list[Any] | None:
    """Task names, with the needle task built from ``needles`` when a file is given."""
    if needles is None:
        return names
    if not Path(needles).is_file():
        raise FileNotFoundError(f"--needles {needles}: no such file")
    names = list(DEFAULT_TASKS) if names is None else names
    if "needle" not in names:
        raise ValueError("--needles applies to the needle task, which is not among --tasks")
    task = get_task("needle", needles_path=needles)
    count = len(task.needles)  # read and check the file now, before any model loads
    print(f"needle: {count} needles from {needles} ({count} documents, {min(count, 50)} queries per length)")
    return [task if name == "needle" else name for name in names]


def run(args: argparse.Namespace) -> int:
    """Build the model, evaluate it, write results.json; exit status 1 if no task could run."""
    resolve_method(args)
    tasks = resolve_task_list(split_list(args.tasks), args.needles)
    lengths = parse_lengths(args.lengths)
    data_dir = existing_folder(args.data_dir if args.data_dir is not None else default_data_dir(), "--data-dir")
    if data_dir is None:
        print("note: no --data-dir and no $LONGEMBED_DATA_DIR: only tasks that need no data (passkey) can run")
    output = args.output or default_output(args.model, args.method, args.max_length)

    if args.model == "bm25":
        ignored = given_encoder_flags(args) + [
            flag for flag, used in (
                ("--query-temperature", args.query_temperature is not None),
                ("--document-temperature", args.document_temperature is not None),
            ) if used
        ]
        if ignored:
            print(f"note: {', '.join(ignored)} ignored for --model bm25 (it has no encoder)")
        model: Any = BM25Model()
    else:
        # lazy: the weights load at the first vector to compute, so a fully cached rerun never reads them
        model = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                             lazy=True, **encoder_options(args))
        print(repr(model))
    try:
        results = evaluate_model(
            model,
            tasks=tasks,
            data_dir=data_dir,
            lengths=lengths,
            output_dir=output,
            query_prompt=args.query_prompt,
            document_prompt=args.document_prompt,
            query_temperature=args.query_temperature,
            document_temperature=args.document_temperature,
            batch_size=args.batch_size,
            cache_dir=args.cache_dir,
            use_cache=not args.no_cache,
            chunk_size=args.chunk_size,
            cache_includes_code=not args.cache_ignore_code,
            estimate=not args.no_estimate,
            dry_run=args.dry_run,
            granularity=args.granularity,
            chunking=args.chunking,
            late=args.late,
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished chunks are cached; run the same command again to resume "
            f"(a finished {output / RESULTS_FILE} is never replaced by an unfinished run)",
            file=sys.stderr,
        )
        return 130
    if args.dry_run:
        return 0
    print(results_summary(results))
    print(f"wrote {Path(output) / RESULTS_FILE}")
    if not results.tasks:
        print("longembed eval: no task could run (see 'skipped' above)", file=sys.stderr)
        return 1
    return 0
