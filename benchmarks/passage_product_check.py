"""Passage hit@1 through the code eval runs (``dense_shown_passages``: pieces pooled from the chunks' token
states, the path of :func:`~longembed.retrieval.passages.with_chunk_vectors`), MiniLM, naive chunks
tokens:256: the check that the default rule shows what ``passage_rules.py`` scored for it.

    python benchmarks/passage_product_check.py essays=/work/bench/p5/essays-task
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.passage_hits import dense_shown_passages, passage_hit_interval, passage_hits
from longembed.retrieval.pipeline import exact_dense_scores, rank_documents, unit_rows

sys.path.insert(0, str(Path(__file__).resolve().parent))
from passage_choice import load_set  # noqa: E402

MODEL = Path.home() / ".cache" / "longembed" / "models" / "all-MiniLM-L6-v2"


def main() -> None:
    name, data = load_set(sys.argv[1], Path(__file__).resolve().parents[2] / "shared" / "data")
    encoder = load_encoder(str(MODEL))
    doc_ids, texts = list(data.corpus), list(data.corpus.values())
    chunks = encoder.encode_chunks(texts, "tokens:256", late=False, normalize_embeddings=True)
    rows = np.asarray([len(v) for v, _ in chunks])
    vectors = np.concatenate([v for v, _ in chunks])
    query_ids = list(data.queries)
    queries = unit_rows(encoder.encode([data.queries[q] for q in query_ids], normalize_embeddings=True))
    ranked = rank_documents(doc_ids, 10, dense=exact_dense_scores(queries, vectors, rows))
    ranking = {q: [doc_ids[d] for d in order] for q, order in zip(query_ids, ranked.order, strict=True)}
    position = {d: i for i, d in enumerate(doc_ids)}
    firsts = np.concatenate([[0], np.cumsum(rows)[:-1]])

    def chunk_vectors(doc_id: str) -> np.ndarray:
        d = position[doc_id]
        return vectors[firsts[d] : firsts[d] + rows[d]]

    assert data.answers is not None
    shown = dense_shown_passages(data.answers, ranking, data.corpus, data.queries,
                                 dict(zip(query_ids, queries, strict=True)), chunk_vectors,
                                 lambda doc_id: chunks[position[doc_id]][1], encoder.encode_tokens)
    hits = passage_hits(data.answers, ranking, shown)
    print(name, len(hits), passage_hit_interval(hits))


if __name__ == "__main__":
    main()
