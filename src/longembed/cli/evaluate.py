"""``longembed eval``: run the LongEmbed benchmark for one model and method, write results.json.

    longembed eval --model PATH --method pi --max-length 4096 --tasks passkey,qmsum --output runs/pi4k
    longembed eval --model bm25 --tasks passkey --lengths 256 --output runs/bm25
    longembed eval --model PATH --method pi --max-length 4096 --tasks qmsum --granularity chunks \
        --chunking tokens:256 --late --output runs/pi4k-late
    longembed eval --model PATH --method pi --max-length 4096 --tasks qmsum --fuse bm25 --output runs/pi4k-bm25
    longembed eval --model PATH --method pi --max-length 4096 --task-dir my-contracts --task-name contracts

``--task-dir`` runs a retrieval task from your own folder (BEIR's corpus.jsonl, queries.jsonl,
qrels/test.tsv, or LongEmbed's qrels.jsonl: :mod:`longembed.tasks.task_dir`).

Embeddings are cached (``--cache-dir``; default ``$LONGEMBED_CACHE_DIR`` or
``~/.cache/longembed/embeddings``), so an interrupted run resumes where it stopped when the same
command is run again, and a finished run reruns in seconds. The command never prompts: it prints a
cost estimate (documents, tokens, cached, seconds) and starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longembed.cli.dtype_flag import resolve_auto_flag
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import (
    default_output,
    encoder_options,
    existing_folder,
    given_encoder_flags,
    settings_from_args,
    strategy_from_args,
)
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import MissingFileError, UserError
from longembed.evaluation.runner import default_data_dir, evaluate_model
from longembed.evaluation.spec import SAMPLE_SEED_ALONE, EvalSpec
from longembed.report.tables import results_summary
from longembed.results import RESULTS_FILE
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.strategy import BM25
from longembed.tasks import DEFAULT_TASKS, get_task
from longembed.tasks.needle import set_size as needle_set_size


def resolve_task_list(
    names: list[str] | None, needles: Path | None, spec: EvalSpec | None = None,
    default: Sequence[str] = DEFAULT_TASKS,
) -> list[Any] | None:
    """Task names, with the needle task built from ``needles`` (and the spec's ``queries_per_length``,
    ``haystack``, ``needle_haystacks`` and ``candidates``) when a file is given; the file is read and checked now, before
    any model loads (``default``: the tasks that run without --tasks; none beside --task-dir folders)."""
    if needles is None:
        return names
    if not Path(needles).is_file():
        raise MissingFileError(f"--needles {needles}: no such file")
    names = list(default) if names is None else names
    if "needle" not in names:
        raise UserError("--needles applies to the needle task, which is not among --tasks")
    spec = spec or EvalSpec()
    task = get_task("needle", needles_path=needles, queries_per_length=spec.queries_per_length,
                    haystack=spec.haystack, haystacks=spec.needle_haystacks, candidates=spec.candidates)
    count = len(task.needles)
    documents, queries = needle_set_size(count, spec.queries_per_length)
    print(f"needle: {count} needles from {needles} ({documents} documents, {queries} queries per length)")
    return [task if name == "needle" else name for name in names]


def run_variant(spec: EvalSpec) -> list[str]:
    """What the default run folder's name adds for chunked and fused runs ("late-chunks", "bm25-rrf")."""
    strategy = spec.strategy
    variant = [f"{'late' if strategy.late else 'naive'}-chunks"] if strategy.chunked else []
    fusion = strategy.fusion
    return variant + ([f"{fusion.source}-{fusion.method}"] if fusion is not None else [])


def run(args: argparse.Namespace) -> int:
    """Build the model, evaluate it, write results.json; exit status 1 if no task could run."""
    resolve_method(args)
    resolve_auto_flag(args)
    # BM25 alone: the runner names the model and refuses the dense options in words of its own
    lexical = {"model": None} if args.model == BM25 else {}
    spec = settings_from_args(EvalSpec, args, strategy=strategy_from_args(args, **lexical))
    if "sample_seed" in getattr(args, "given_flags", {}) and spec.max_queries is None:
        raise UserError(SAMPLE_SEED_ALONE)  # --sample-seed 0 too: the spec cannot tell it from the default
    data_dir = existing_folder(spec.data_dir if spec.data_dir is not None else default_data_dir(), "--data-dir")
    output = spec.output_dir or default_output(args.model, args.method, args.max_length, run_variant(spec))
    spec = dataclasses.replace(spec, tasks=resolve_task_list(spec.tasks, args.needles, spec,
                                                             () if spec.task_dirs else DEFAULT_TASKS), data_dir=data_dir,
                               output_dir=output)
    if data_dir is None and _needs_data(spec):
        print("note: no --data-dir and no $LONGEMBED_DATA_DIR: only tasks that need no data (passkey) can run")
    model = _model(args, spec)
    try:
        results = evaluate_model(model, spec)
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished chunks are cached; run the same command again to resume "
            f"(a finished {Path(output) / RESULTS_FILE} is never replaced by an unfinished run)",
            file=sys.stderr,
        )
        return 130
    if spec.dry_run:
        return 0
    print(results_summary(results))
    print(f"wrote {Path(output) / RESULTS_FILE}")
    if not results.tasks:
        print("longembed eval: no task could run (see 'skipped' above)", file=sys.stderr)
        return 1
    return 0


def _needs_data(spec: EvalSpec) -> bool:
    """Whether a built-in task other than passkey is to run (a --task-dir folder brings its own data;
    without --tasks, only the --task-dir folders run when there are any)."""
    tasks = spec.tasks
    if tasks is None:
        tasks = () if spec.task_dirs else DEFAULT_TASKS
    elif isinstance(tasks, str):
        tasks = tasks.replace(",", " ").split()
    return any(task != "passkey" for task in tasks)


def _model(args: argparse.Namespace, spec: EvalSpec) -> BM25Model | LongContextEncoder:
    """BM25 for ``--model bm25`` (noting the encoder flags it ignores), else the encoder, loaded lazily:
    its weights load at the first vector to compute, so a fully cached rerun never reads them."""
    if args.model == "bm25":
        ignored = given_encoder_flags(args) + [
            flag for flag, used in (
                ("--query-temperature", spec.query_temperature is not None),
                ("--document-temperature", spec.document_temperature is not None),
            ) if used
        ]
        if ignored:
            print(f"note: {', '.join(ignored)} ignored for --model bm25 (it has no encoder)")
        return BM25Model()
    model = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                         lazy=True, **encoder_options(args))
    print(repr(model))
    return model
