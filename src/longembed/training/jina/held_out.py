"""The retrieval score after each stage: query -> positive among all held-out positives."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from longembed.encoder import load_encoder
from longembed.evaluation.metrics import evaluate_scores
from longembed.training.data import TrainingPair
from longembed.training.jina.folders import transformer_folder
from longembed.training.mlm.model import is_alibi_folder


def held_out_retrieval(
    folder: Path | str,
    pairs: Sequence[TrainingPair],
    max_queries: int | None = None,
    batch_size: int = 32,
    device: str | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """nDCG@10, MRR@10, recall@10 and accuracy@1 (%) of query -> positive among all held-out positives.

    The model is opened as the benchmark opens it: ``load_encoder(folder, method="native")`` for
    ALiBi, "truncate" for an APE model.  A query with several positives (HotpotQA) has them all as
    relevant.  ``max_queries`` keeps a seeded subset of the queries (every positive stays a candidate).
    """
    if not pairs:
        raise ValueError("no held-out pairs to score")
    documents = list(dict.fromkeys(p.positive for p in pairs))
    doc_ids = {text: f"d{i}" for i, text in enumerate(documents)}
    qrels: dict[str, dict[str, int]] = {}
    for p in pairs:
        qrels.setdefault(p.query, {})[doc_ids[p.positive]] = 1
    queries = sorted(qrels)
    if max_queries is not None and len(queries) > max_queries:
        queries = sorted(random.Random(f"longembed-jina-eval:{seed}").sample(queries, max_queries))
    method = "native" if is_alibi_folder(transformer_folder(folder)) else "truncate"
    encoder = load_encoder(folder, method=method, device=device)
    q = encoder.encode(queries, batch_size=batch_size, normalize_embeddings=True)
    d = encoder.encode(documents, batch_size=batch_size, normalize_embeddings=True)
    query_ids = [f"q{i}" for i in range(len(queries))]
    judged = {query_ids[i]: qrels[text] for i, text in enumerate(queries)}
    metrics = evaluate_scores(
        np.asarray(q) @ np.asarray(d).T, query_ids, [doc_ids[t] for t in documents], judged, (1, 10)
    )
    keep = ("ndcg@10", "mrr@10", "recall@10", "accuracy@1")
    return {name: round(100 * metrics[name], 2) for name in keep} | {
        "queries": len(queries),
        "documents": len(documents),
    }
