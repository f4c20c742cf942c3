"""The retrieval score after each stage: query -> positive among all held-out positives."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from longembed.encoder import load_encoder
from longembed.errors import UserError
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
    task = HeldOutTask.from_pairs(pairs, max_queries=max_queries, seed=seed)
    method = "native" if is_alibi_folder(transformer_folder(folder)) else "truncate"
    encoder = load_encoder(folder, method=method, device=device)
    vectors = encoder.encode(task.texts, batch_size=batch_size, normalize_embeddings=True)
    return task.score(dict(zip(task.texts, np.asarray(vectors), strict=True)))


@dataclass(frozen=True)
class HeldOutTask:
    """Query -> positive retrieval over held-out pairs: the queries, the candidate documents (every distinct
    positive) and the relevance of each query, all by text, so one set of vectors can be scored twice
    (e.g. for a cosine and for retrieval) without encoding again."""

    queries: list[str]
    documents: list[str]
    relevant: dict[str, set[str]]

    @classmethod
    def from_pairs(cls, pairs: Sequence[TrainingPair], max_queries: int | None = None, seed: int = 0) -> HeldOutTask:
        """Every distinct positive is a candidate; a seeded subset of ``max_queries`` queries when given."""
        if not pairs:
            raise UserError("no held-out pairs to score")
        relevant: dict[str, set[str]] = {}
        for p in pairs:
            relevant.setdefault(p.query, set()).add(p.positive)
        queries = sorted(relevant)
        if max_queries is not None and len(queries) > max_queries:
            queries = sorted(random.Random(f"longembed-jina-eval:{seed}").sample(queries, max_queries))
        documents = list(dict.fromkeys(p.positive for p in pairs))
        return cls(queries, documents, {q: relevant[q] for q in queries})

    @property
    def texts(self) -> list[str]:
        """Every text to embed once: the documents, then the queries that are not also a document."""
        return list(dict.fromkeys(self.documents + self.queries))

    def score(self, vectors: Mapping[str, np.ndarray]) -> dict[str, float]:
        """The metrics (%) from unit vectors by text (every text of :attr:`texts`)."""
        doc_ids = {text: f"d{i}" for i, text in enumerate(self.documents)}
        query_ids = [f"q{i}" for i in range(len(self.queries))]
        judged = {qid: {doc_ids[d]: 1 for d in self.relevant[q]} for qid, q in zip(query_ids, self.queries, strict=True)}
        q = np.stack([vectors[text] for text in self.queries])
        d = np.stack([vectors[text] for text in self.documents])
        metrics = evaluate_scores(q @ d.T, query_ids, list(doc_ids.values()), judged, (1, 10))
        keep = ("ndcg@10", "mrr@10", "recall@10", "accuracy@1")
        return {name: round(100 * metrics[name], 2) for name in keep} | {
            "queries": len(self.queries),
            "documents": len(self.documents),
        }
