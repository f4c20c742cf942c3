"""Tuned fusion against the fixed rules and each system alone, on one hybrid's scores (issue 56, item 1).

Runs one hybrid eval (``--fuse bm25``, RRF) exactly as ``longembed eval`` does (vectors through the
embedding cache), keeps its dense and BM25 score matrices, and scores from them: the dense side alone,
BM25 alone, RRF (k = 60), the linear mix at 0.5, and the tuned fusion advise reports (the rule
cross-validated over these queries, each query scored by the rule fitted without its fold:
:mod:`longembed.evaluation.fusion_tuning`).  Prints a markdown table (main metric with its 95% bootstrap
interval; paired intervals of tuned minus each other) and writes every per-query score to
``OUTPUT/tuned_fusion.json`` beside the hybrid's results.json.

    python benchmarks/tuned_fusion.py --task-dir runs/essays-task --output runs/tuned-essays
    python benchmarks/tuned_fusion.py --tasks qmsum_passages --data-dir ../shared/data --max-queries 150 \\
        --output runs/tuned-qmsum-passages
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from longembed.encoder import load_encoder
from longembed.evaluation.fusion_tuning import StoredUnit, cross_validate, fusion_grid, percent, query_table
from longembed.evaluation.metrics import DEFAULT_K_VALUES, per_query_metrics
from longembed.evaluation.runner import plan_run, run_plan
from longembed.evaluation.scoring import candidates
from longembed.evaluation.spec import EvalSpec
from longembed.results.intervals import bootstrap_interval
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.pipeline import rank_documents
from longembed.retrieval.strategy import Strategy


def alone(stored: StoredUnit, system: str) -> dict[str, float]:
    """Per-query main metric (percent) of one system alone, ranked as eval ranks it."""
    data = stored.unit.data
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    scores = {"dense": stored.dense} if system == "dense" else {"lexical": stored.lexical}
    ranked = rank_documents(doc_ids, max(DEFAULT_K_VALUES), allowed=candidates(data, query_ids, doc_ids), **scores)
    ranking = {q: [doc_ids[d] for d in row] for q, row in zip(query_ids, ranked.order, strict=True)}
    return percent(per_query_metrics(data.qrels, ranking)[stored.task.metadata.main_score])


def interval_text(values: np.ndarray) -> str:
    got = bootstrap_interval(list(values))
    return f"{got.estimate:.1f} [{got.low:.1f}, {got.high:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--task-dir", nargs="*", default=[])
    parser.add_argument("--tasks", nargs="*", default=[])
    parser.add_argument("--data-dir")
    parser.add_argument("--max-queries", type=int)
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--cache-dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    strategy = Strategy(granularity="chunks", chunking=args.chunking, late=False, fuse="bm25")
    spec = EvalSpec(tasks=args.tasks or None, task_dirs=args.task_dir or None, data_dir=args.data_dir,
                    max_queries=args.max_queries, strategy=strategy, cache_dir=args.cache_dir, output_dir=args.output,
                    show_progress=False, estimate=False, log=print)
    began = time.perf_counter()
    stored: list[StoredUnit] = []
    run_plan(plan_run(load_encoder(args.model, method="truncate"), spec), time.perf_counter(),
             keep=lambda *scores: stored.append(StoredUnit(*scores)))
    grid = fusion_grid()
    table = query_table(stored, grid)
    tuned = cross_validate(table, grid, seed=args.seed)
    columns = {
        "dense alone": np.concatenate([list(alone(s, "dense").values()) for s in stored]),
        "BM25 alone": np.concatenate([list(alone(s, "bm25").values()) for s in stored]),
        "RRF k=60": table.scores[grid.index(Fusion("bm25", "rrf", k=60))],
        "linear 0.5": table.scores[grid.index(Fusion("bm25", "linear", weight=0.5))],
        "tuned (out-of-fold)": tuned.out_of_fold,
    }
    label = ", ".join(dict.fromkeys(s.unit.label for s in stored))
    print(f"\n{label}: {len(table.keys)} queries; fitted on all: {tuned.fusion.describe()} (in-sample "
          f"{tuned.in_sample:.1f}); folds chose {[f.to_dict() for f in tuned.fold_fusions]}")
    print("\n| run | nDCG@10 [95%] | tuned minus it [95%, paired] |\n|---|---:|---:|")
    for name, values in columns.items():
        versus = "" if name.startswith("tuned") else interval_text(tuned.out_of_fold - values)
        print(f"| {name} | {interval_text(values)} | {versus} |")
    record = {"queries": [list(k) for k in table.keys], "per_query": {n: v.tolist() for n, v in columns.items()},
              "tuning": tuned.record(), "folds": tuned.folds.tolist(), "wall_seconds": round(time.perf_counter() - began, 1)}
    Path(args.output, "tuned_fusion.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
