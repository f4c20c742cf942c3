"""``longembed eval``: run the LongEmbed benchmark for one model and method, write results.json.

    longembed eval --model PATH --method pi --max-length 4096 --tasks passkey,qmsum --output runs/pi4k
    longembed eval --model bm25 --tasks passkey --lengths 256 --output runs/bm25

Embeddings are cached (``--cache-dir``; default ``$LONGEMBED_CACHE_DIR`` or
``~/.cache/longembed/embeddings``), so an interrupted run resumes where it stopped when the same
command is run again, and a finished run reruns in seconds. The command never prompts: it prints a
cost estimate (documents, tokens, cached, seconds) and starts.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from longembed.cli.options import MODEL_HELP, add_benchmark_arguments, add_encoder_arguments, encoder_options


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a model on the LongEmbed benchmark",
        description=(
            "Evaluate a model (or --model bm25) with one context-window extension method on LongEmbed "
            "tasks; write OUTPUT/results.json and print a table. Tasks whose data is missing are skipped "
            "(listed in results.json under 'skipped')."
        ),
    )
    add_encoder_arguments(
        parser, model_required=True, model_help=MODEL_HELP + ", or 'bm25' for the BM25 baseline"
    )
    group = parser.add_argument_group("benchmark")
    group.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="LIST",
        help="comma- or space-separated task names (default: the six offline tasks: "
        "passkey, needle, qmsum, squality, hotpotqa, narrativeqa)",
    )
    add_benchmark_arguments(
        group, "run folder for results.json (default: runs/<model>-<method>-<max_length>)"
    )
    group.add_argument(
        "--query-temperature",
        type=float,
        default=None,
        help="TempScale tau for queries (default: --temperature)",
    )
    group.add_argument(
        "--document-temperature",
        type=float,
        default=None,
        help="TempScale tau for documents (default: --temperature)",
    )
    group.add_argument(
        "--cache-ignore-code",
        action="store_true",
        help="key the cache on longembed's version, not on the hash of its encoder code "
        "(reuse vectors across code edits you know do not change them)",
    )
    group.add_argument("--chunk-size", type=int, default=64, help="texts per cache write (default 64)")
    group.add_argument(
        "--no-estimate",
        action="store_true",
        help="skip the warm-up that times the encoder (counts are still printed)",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and the cost estimate, then stop (nothing encoded or written)",
    )
    parser.set_defaults(func=run)


def split_list(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``; None stays None."""
    if values is None:
        return None
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def parse_length(text: str) -> int:
    """``"512"`` -> 512, ``"4k"`` -> 4096 (k = 1024, as in LongEmbed's lengths)."""
    match = re.fullmatch(r"(\d+)\s*([kK]?)", text.strip())
    if not match:
        raise ValueError(f"not a length: {text!r} (use e.g. 512 or 4k)")
    return int(match.group(1)) * (1024 if match.group(2) else 1)


def default_output(model: str, method: str, max_length: int | None) -> Path:
    """``runs/<model folder name>-<method>-<max_length>`` (``runs/bm25`` for BM25)."""
    if model == "bm25":
        return Path("runs") / "bm25"
    name = Path(model.rstrip("/")).name or "model"
    return Path("runs") / f"{name}-{method}-{max_length if max_length is not None else 'native'}"


def run(args: argparse.Namespace) -> int:
    """Build the model, evaluate it, write results.json; exit status 1 if no task could run."""
    from longembed.evaluation.bm25 import BM25Model
    from longembed.evaluation.runner import default_data_dir, evaluate_model

    tasks = split_list(args.tasks)
    lengths_text = split_list(args.lengths)
    lengths = [parse_length(x) for x in lengths_text] if lengths_text is not None else None
    data_dir = args.data_dir if args.data_dir is not None else default_data_dir()
    if data_dir is None:
        print(
            "note: no --data-dir and no $LONGEMBED_DATA_DIR: only tasks that need no data (passkey) can run"
        )
    elif not Path(data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {data_dir} is not a folder")
    output = args.output or default_output(args.model, args.method, args.max_length)

    if args.model == "bm25":
        ignored = [
            flag
            for flag, used in (
                ("--method", args.method != "truncate"),
                ("--max-length", args.max_length is not None),
                ("--temperature", args.temperature != 1.0),
            )
            if used
        ]
        if ignored:
            print(f"note: {', '.join(ignored)} ignored for --model bm25")
        model = BM25Model()
    else:
        from longembed import load_encoder

        model = load_encoder(
            args.model,
            method=args.method,
            max_length=args.max_length,
            device=args.device,
            **encoder_options(args),
        )
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
        )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: finished chunks are cached; run the same command again to resume "
            f"({output}/results.json is marked incomplete)",
            file=sys.stderr,
        )
        return 130
    if args.dry_run:
        return 0
    print(f"wrote {Path(output) / 'results.json'}")
    if not results["tasks"]:
        print("longembed eval: no task could run (see 'skipped' above)", file=sys.stderr)
        return 1
    return 0
