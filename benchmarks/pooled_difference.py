"""A paired difference over units that several runs scored between them: "B - A on the 1k..8k mean".

``longembed compare`` pairs two runs.  When one side's lengths come from several runs (1k..4k at 200
queries per length in one run, 8k at 50 in another, or PI to 4096 up to 4k and PI to 8192 at 8k), this
pools every shared unit (task, length) into one mean, weighted as a run's average is (each length
1 / (tasks x the task's lengths)), with the paired bootstrap interval and the sign-flip p-value of
``compare`` (:mod:`longembed.results.paired`, the same seed).  On two single runs it prints exactly
``compare``'s average row (checked in RESULTS.md).

    python benchmarks/pooled_difference.py --a runs/pi-4k-200 runs/pi-8k-50 --b runs/alibi-200 runs/alibi-8k-50 \\
        --lengths 1024 2048 4096 8192
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from longembed.results import RunResults
from longembed.results.paired import difference_interval, mean_terms, normalised, sign_flip_test

Unit = tuple[str, int | None]


def units(folders: Sequence[Path], lengths: set[int] | None) -> dict[Unit, tuple[str | None, dict[str, float]]]:
    """(task, length) -> (data fingerprint, query id -> score) over several runs; a unit two runs both
    scored is refused (which one would count?)."""
    out: dict[Unit, tuple[str | None, dict[str, float]]] = {}
    for folder in folders:
        run = RunResults.load(folder)
        for name, task in run.tasks.items():
            for length, unit in task.units().items():
                if lengths is not None and length is not None and length not in lengths:
                    continue
                if unit.per_query is None:
                    raise SystemExit(f"{folder}: {name} {length} has no per-query scores")
                if (name, length) in out:
                    raise SystemExit(f"{name} {length} is scored by two of the runs {[str(f) for f in folders]}")
                out[name, length] = (unit.data_sha256, unit.per_query)
    return out


def pooled(a: dict, b: dict) -> dict:
    """B - A over the shared units: means, difference [interval], p-value, the units and query count."""
    shared = [key for key in a if key in b]
    if not shared:
        raise SystemExit("the two sides share no unit")
    differences: dict[str, list[float]] = {}
    means_a: dict[str, float] = {}
    means_b: dict[str, float] = {}
    for task, length in shared:
        (sha_a, scores_a), (sha_b, scores_b) = a[task, length], b[task, length]
        if sha_a != sha_b or set(scores_a) != set(scores_b):
            raise SystemExit(f"{task} {length}: the two sides scored different data")
        key = f"{task}/{length}"
        differences[key] = [scores_b[q] - scores_a[q] for q in scores_a]
        means_a[key] = sum(scores_a.values()) / len(scores_a)
        means_b[key] = sum(scores_b.values()) / len(scores_b)
    tasks = {task for task, _ in shared}
    weights = {f"{t}/{n}": 1 / (len(tasks) * sum(1 for s, _ in shared if s == t)) for t, n in shared}
    shares = normalised(weights)
    return {
        "units": [f"{t} {n}" for t, n in shared],
        "queries": sum(len(d) for d in differences.values()),
        "a": sum(shares[k] * means_a[k] for k in shares),
        "b": sum(shares[k] * means_b[k] for k in shares),
        "difference": difference_interval(differences, weights),
        "p_value": sign_flip_test(mean_terms(differences, weights)).p_value,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", nargs="+", type=Path, required=True, help="run folders of side A")
    parser.add_argument("--b", nargs="+", type=Path, required=True, help="run folders of side B")
    parser.add_argument("--lengths", nargs="*", type=int, default=None, help="synthetic lengths to pool (default: all shared)")
    args = parser.parse_args(argv)
    lengths = set(args.lengths) if args.lengths else None
    result = pooled(units(args.a, lengths), units(args.b, lengths))
    d = result["difference"]
    print(f"units: {', '.join(result['units'])} ({result['queries']} query pairs)")
    print(f"A {result['a']:.2f}  B {result['b']:.2f}  B - A {d.estimate:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"
          f"  p = {result['p_value']:.4g}")


if __name__ == "__main__":
    main()
