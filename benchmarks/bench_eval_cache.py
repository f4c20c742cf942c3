"""Benchmark run time with a cold and a warm embedding cache (target: warm at least 20x faster).

Runs the whole benchmark twice in one process with the same encoder and a fresh cache folder:
first cold (every text encoded and cached), then warm (everything read from the cache). Prints per
task the cold time, documents per second, the warm time and the speedup, the estimate the runner
printed before the cold run against the measured encode time, and checks that both runs give the
same scores and that the warm run encoded nothing.

    python benchmarks/bench_eval_cache.py                              # packaged MiniLM, pi, 4096
    python benchmarks/bench_eval_cache.py --model /work/models/all-MiniLM-L6-v2 --data-dir ../shared/data
    python benchmarks/bench_eval_cache.py --tasks passkey --lengths 256,512   # a quick check

Defaults: method pi, --max-length 4096, all default tasks whose data is available, passkey/needle
lengths up to --max-length; data from --data-dir, else $LONGEMBED_DATA_DIR, else ../shared/data next
to the repository. Exit status 1 if the scores differ or the warm run encoded anything.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed import load_encoder
from longembed.evaluation.runner import evaluate_model
from longembed.results import RunResults
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS

REPO = Path(__file__).resolve().parents[1]


class CountingEncoder:
    """Delegates to an encoder and counts the texts it was asked to encode."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.n_texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        self.n_texts += len(texts)
        return self.inner.encode(texts, **kwargs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model folder (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="comma-separated (default: all)")
    parser.add_argument("--lengths", default=None, help="comma-separated (default: those <= --max-length)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--keep", type=Path, default=None, help="keep the cache and both runs' results here")
    return parser.parse_args(argv)


def default_data_dir() -> Path | None:
    env = os.environ.get("LONGEMBED_DATA_DIR")
    if env:
        return Path(env)
    shared = REPO.parent / "shared" / "data"
    return shared if shared.is_dir() else None


def timed_run(encoder: Any, args: argparse.Namespace, work: Path, name: str) -> tuple[RunResults, float, int]:
    counting = CountingEncoder(encoder)
    began = time.perf_counter()
    results = evaluate_model(
        counting,
        tasks=args.tasks.split(","),
        data_dir=args.data_dir,
        lengths=args.lengths,
        output_dir=work / name,
        batch_size=args.batch_size,
        cache_dir=work / "cache",
    )
    return results, time.perf_counter() - began, counting.n_texts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.data_dir = args.data_dir or default_data_dir()
    args.lengths = (
        [int(x) for x in args.lengths.split(",")] if args.lengths
        else [n for n in SYNTHETIC_LENGTHS if n <= args.max_length]
    )
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-eval-cache-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        began = time.perf_counter()
        encoder = load_encoder(args.model, method=args.method, max_length=args.max_length)
        load_s = time.perf_counter() - began
        print(f"{encoder!r}\nloaded in {load_s:.1f} s; data {args.data_dir}; lengths {args.lengths}; work dir {work}")

        print("\n=== cold run (empty cache) ===")
        cold, cold_s, cold_texts = timed_run(encoder, args, work, "cold")
        print("\n=== warm run (same cache) ===")
        warm, warm_s, warm_texts = timed_run(encoder, args, work, "warm")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{'task':<12}{'docs':>7}{'queries':>9}{'cold s':>9}{'encode s':>10}{'docs/s':>9}"
          f"{'warm s':>9}{'speedup':>9}{'score':>8}")
    for name, entry in cold.tasks.items():
        docs, queries = entry.counts.documents, entry.counts.queries
        cold_t, warm_t = entry.wall_time_s, warm.tasks[name].wall_time_s
        encode_t = entry.encode_time_s
        print(f"{name:<12}{docs:>7}{queries:>9}{cold_t:>9.1f}{encode_t:>10.1f}{docs / max(encode_t, 1e-9):>9.2f}"
              f"{warm_t:>9.2f}{cold_t / max(warm_t, 1e-9):>8.0f}x{entry.score:>8.2f}")
    estimate = cold.estimate.seconds
    encode_total = sum(e.encode_time_s for e in cold.tasks.values())
    ratio = cold_s / max(warm_s, 1e-9)
    same = all(cold.tasks[n].metrics == warm.tasks[n].metrics for n in cold.tasks)
    print(f"\nwhole run: cold {cold_s:.1f} s ({cold_texts} texts encoded), warm {warm_s:.1f} s "
          f"({warm_texts} texts encoded): warm is {ratio:.0f}x faster (target >= 20x: "
          f"{'PASS' if ratio >= 20 else 'FAIL'})")
    print(f"estimate before the cold run: {estimate} s of encoding; measured encode time {encode_total:.1f} s")
    print(f"skipped: {sorted(cold.skipped) or 'none'}; scores identical cold vs warm: {same}; "
          f"average {cold.average} over {cold.average_tasks}")
    return 0 if same and warm_texts == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
