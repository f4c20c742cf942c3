"""Passage hit@1 of window rules over ``passage_signals.py``'s files: each rule a weighted sum of the signals,
each min-max scaled over the document's windows, the first best window shown.

    python benchmarks/passage_rules.py /work/bench/p5/squad.pkl --grid             # every mix on a 0.25 grid
    python benchmarks/passage_rules.py /work/bench/p5/essays.pkl --rule 3x100:separate=0.5,bm25=0.5
"""

from __future__ import annotations

import argparse
import itertools
import pickle
from pathlib import Path

import numpy as np

from longembed.results.intervals import bootstrap_interval

SIGNALS = ("separate", "late", "bm25", "maxsim", "chunk")


def minmax(x: np.ndarray) -> np.ndarray:
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def evaluate(records: list[dict], window: str, weights: dict[str, float]) -> tuple[list[float], list[int]]:
    hits, words = [], []
    for r in records:
        w = r["by_window"].get(window)
        if w is None:
            hits.append(0.0)
            continue
        score = sum(weight * minmax(np.asarray(w[s], dtype=np.float64)) for s, weight in weights.items() if weight)
        best = int(np.argmax(np.round(score, 9))) if np.ndim(score) else 0
        hits.append(100.0 if w["hit"][best] else 0.0)
        words.append(w["words"][best])
    return hits, words


def parse_rule(text: str) -> tuple[str, dict[str, float]]:
    window, _, mix = text.partition(":")
    return window, {k: float(v) for k, v in (p.split("=") for p in mix.split(","))}


def describe(window: str, weights: dict[str, float], records: list[dict]) -> str:
    hits, words = evaluate(records, window, weights)
    i = bootstrap_interval(hits)
    mix = ",".join(f"{k}={v:g}" for k, v in weights.items() if v)
    return f"| {window}:{mix} | {len(hits)} | {i.estimate:.1f} [{i.low:.1f}, {i.high:.1f}] | {np.median(words):g} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("signals")
    parser.add_argument("--rule", action="append", default=[])
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--windows", default="3x100")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    records = pickle.loads(Path(args.signals).read_bytes())["records"]
    oracle = [100.0 * any(r["by_window"]["3x100"]["hit"]) if "3x100" in r["by_window"] else 0.0 for r in records]
    print(f"{len(records)} queries; some 3x100 window holds the answer: {np.mean(oracle):.1f}")
    for text in args.rule:
        print(describe(*parse_rule(text), records))
    if args.grid:
        steps = (0, 0.25, 0.5, 0.75, 1)
        scored = []
        for window in args.windows.split(","):
            for combo in itertools.product(steps, repeat=len(SIGNALS)):
                if not any(combo):
                    continue
                weights = dict(zip(SIGNALS, combo, strict=True))
                hits, words = evaluate(records, window, weights)
                scored.append((float(np.mean(hits)), window, weights, float(np.median(words))))
        scored.sort(key=lambda s: -s[0])
        for hit, window, weights, words in scored[: args.top]:
            print(f"{hit:.1f} {words:g} {window}:" + ",".join(f"{k}={v:g}" for k, v in weights.items() if v))


if __name__ == "__main__":
    main()
