"""How much the fused tie-break moves hybrid scores (issue 41, section 4).

Reciprocal rank fusion of two systems ties often; until this change the tie went to the document id
(ascending), so how files are named moved the score.  The tie now goes to the sum of the two systems'
min-max-normalised scores, then to the id (:mod:`longembed.retrieval.fusion`).  For one eval
configuration this script computes the dense and BM25 score matrices once (vectors through eval's
embedding cache, so rerunning a published run's configuration costs no encoding when its cache is
there) and ranks the fused scores three ways: ties by id ascending (the old rule), by id descending
(the same files named the other way round) and by the new rule.  It prints nDCG@10 (accuracy@1 for
passkey/needle) under each, and how many queries have a tie among their top 10.

    python benchmarks/fusion_ties.py --model /work/models/all-MiniLM-L6-v2 --method pi --max-length 4096 \\
        --tasks qmsum squality hotpotqa --data-dir ../shared/data --cache-dir $LONGEMBED_CACHE_DIR
    python benchmarks/fusion_ties.py --model default --task-dir tests/search/data/tiny_beir
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from longembed.encoder import load_encoder
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.metrics import mean_metrics, per_query_metrics
from longembed.evaluation.scoring import candidates, lexical_scores
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import fuse_with_tie_break
from longembed.retrieval.ranking import rank
from longembed.tasks import get_task
from longembed.tasks.task_dir import TaskDirTask


def units(args: argparse.Namespace) -> list[tuple[str, object]]:
    out = []
    for name in args.tasks or []:
        task = get_task(name)
        lengths = task.metadata.lengths and [n for n in args.lengths if n in task.metadata.lengths] or [None]
        out += [(f"{name}/{n}" if n else name, task.load(args.data_dir, n)) for n in lengths]
    for folder in args.task_dir or []:
        out.append((Path(folder).name, TaskDirTask(folder).load(None, None)))
    return out


def measure(label: str, data, encoder: CachedEncoder, metric: str) -> list[dict]:
    query_ids, doc_ids = list(data.queries), list(data.corpus)
    query_texts, doc_texts = list(data.queries.values()), list(data.corpus.values())
    prompts = encoder.retrieval_prompts()
    documents = encoder.encode(doc_texts, shard=f"{label}/documents", prompt=prompts["document"], desc=label)
    queries = encoder.encode(query_texts, shard=f"{label}/queries", prompt=prompts["query"], desc=label)
    allowed = candidates(data, query_ids, doc_ids)
    dense = queries.vectors @ documents.vectors.T
    dense = dense if allowed is None else np.where(allowed, dense, -np.inf)
    lexical = lexical_scores(BM25Model(), data, query_texts, doc_texts)
    by_id = np.argsort(np.argsort(np.asarray(doc_ids)))  # each document's place in id order
    descending_ids = np.broadcast_to(by_id.astype(float), dense.shape)  # a higher key first: id descending
    rows = []
    for fusion in (Fusion(), Fusion(method="linear")):
        fused, key = fuse_with_tie_break(fusion, dense, lexical)
        scores = {}
        for rule, tie_break in (("id ascending (old)", None), ("id descending", descending_ids), ("normalised sum (new)", key)):
            ranking = rank(fused, query_ids, doc_ids, top_k=100, tie_break=tie_break)
            scores[rule] = round(100 * mean_metrics(per_query_metrics(data.qrels, ranking))[metric], 2)
        top = np.sort(np.where(np.isfinite(fused), fused, -np.inf), axis=1)[:, ::-1][:, :11]
        tied = int(np.sum(np.any(np.isclose(top[:, 1:], top[:, :-1], rtol=0, atol=1e-12), axis=1)))
        rows.append({"unit": label, "fusion": fusion.method, "metric": metric, **scores,
                     "queries": len(query_ids), "queries_with_a_tie_in_top_10": tied})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="truncate")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--lengths", nargs="*", type=int, default=[1024, 2048, 4096])
    parser.add_argument("--task-dir", nargs="*", default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    encoder = CachedEncoder(load_encoder(args.model, method=args.method, max_length=args.max_length, lazy=True),
                            args.cache_dir)
    for label, data in units(args):
        metric = "accuracy@1" if label.startswith(("passkey", "needle")) else "ndcg@10"
        for row in measure(label, data, encoder, metric):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
