"""What the hub diagnostic costs a run: ``same_vector_groups`` (twins) against ``rank``, on one matrix.

Every unit a run scores is ranked (``metrics.rank``) and, since the hub diagnostic, its documents are
grouped by vector (``metrics.same_vector_groups``) on the same (queries x documents) score matrix.
This times both, alternated, on matrices shaped like a passkey length (200 x 400, most documents
twins as when truncated), QMSum (1,527 x 197) and a large corpus of your own (1,000 x 20,000 with a
group of 4,900 twins), and prints the medians and their ratio.

    python benchmarks/bench_first_ranked.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from longembed.evaluation.metrics import rank, same_vector_groups

SHAPES = {  # name -> (queries, documents, twins in one group)
    "passkey 4k, truncated": (200, 400, 340),
    "QMSum": (1527, 197, 0),
    "20k documents": (1000, 20000, 4900),
}


def matrix(queries: int, documents: int, twins: int, seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).random((queries, documents)).astype(np.float32)
    if twins:
        scores[:, 1 : twins + 1] = scores[:, [0]]
    return scores


def timed(function, *args) -> float:
    began = time.perf_counter()
    function(*args)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'matrix':<24}{'rank s':>9}{'groups s':>10}{'groups / rank':>15}")
    for name, (queries, documents, twins) in SHAPES.items():
        scores = matrix(queries, documents, twins)
        query_ids = [f"q{i}" for i in range(queries)]
        doc_ids = [f"d{j}" for j in range(documents)]
        ranks, groups = [], []
        for _ in range(args.repeats):  # alternated, so both see the same machine
            ranks.append(timed(rank, scores, query_ids, doc_ids))
            groups.append(timed(same_vector_groups, scores, doc_ids))
        r, g = statistics.median(ranks), statistics.median(groups)
        print(f"{name:<24}{r:>9.3f}{g:>10.3f}{g / r:>15.2f}")


if __name__ == "__main__":
    main()
