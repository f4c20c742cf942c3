"""The essays' tuned-fusion comparison split by question kind (fact / paraphrase), from the per-query scores
``benchmarks/tuned_fusion.py`` wrote (query ``q<i>`` is line i of ``questions.jsonl``): each run's nDCG@10
with its 95% bootstrap interval, and tuned minus RRF and minus the dense side, paired.  Encodes nothing.

    python benchmarks/essays/tuned_by_kind.py runs/tuned-essays/tuned_fusion.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from longembed.results.intervals import bootstrap_interval

QUESTIONS = Path(__file__).resolve().parent / "questions.jsonl"
TUNED = "tuned (out-of-fold)"


def text(values: np.ndarray, sign: str = "") -> str:
    got = bootstrap_interval(list(values))
    return f"{got.estimate:{sign}.1f} [{got.low:{sign}.1f}, {got.high:{sign}.1f}]"


def main(path: str) -> None:
    run = json.loads(Path(path).read_text(encoding="utf-8"))
    kinds = [json.loads(line)["kind"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    kind_of = {f"q{i + 1}": kind for i, kind in enumerate(kinds)}
    names = list(run["per_query"])
    print("| kind | queries | " + " | ".join(names) + " | tuned - RRF | tuned - dense |")
    print("|---|---:|" + "---:|" * (len(names) + 2))
    for kind in sorted(set(kinds)):
        rows = [i for i, (_, query) in enumerate(run["queries"]) if kind_of[query] == kind]
        scores = {name: np.asarray(values)[rows] for name, values in run["per_query"].items()}
        cells = [text(scores[name]) for name in names]
        cells += [text(scores[TUNED] - scores["RRF k=60"], "+"), text(scores[TUNED] - scores["dense alone"], "+")]
        print(f"| {kind} | {len(rows)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
