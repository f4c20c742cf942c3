"""What late interaction's scoring costs beside one vector per chunk (issue 56, item 2): MaxSim over token
vectors (:func:`longembed.retrieval.maxsim.maxsim_scores`, float16 stored, float32 products) against the
exact scan of chunk vectors (:func:`longembed.retrieval.pipeline.exact_dense_scores`), on random unit
vectors of a task's shape, alternated in one process so that both see the same load.

    python benchmarks/maxsim_scan.py --queries 78 --query-tokens 107 --documents 10 --document-tokens 16700

(the QMSum sample of RESULTS.md: 10 meetings of ~16.7k tokens, 78 queries of ~107 tokens; a chunk is 256
tokens.)  Prints the median seconds of each over ``--repeats`` alternated rounds and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from longembed.retrieval.maxsim import maxsim_scores
from longembed.retrieval.pipeline import exact_dense_scores, unit_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=78)
    parser.add_argument("--query-tokens", type=int, default=107)
    parser.add_argument("--documents", type=int, default=10)
    parser.add_argument("--document-tokens", type=int, default=16_700)
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    query_tokens = unit_rows(rng.normal(size=(args.queries * args.query_tokens, args.dim))).astype(np.float16)
    document_tokens = unit_rows(rng.normal(size=(args.documents * args.document_tokens, args.dim))).astype(np.float16)
    chunks_per_document = -(-args.document_tokens // args.chunk_tokens)
    queries = unit_rows(rng.normal(size=(args.queries, args.dim)))
    chunks = unit_rows(rng.normal(size=(args.documents * chunks_per_document, args.dim)))
    timings: dict[str, list[float]] = {"maxsim": [], "chunks": []}
    for _ in range(args.repeats):
        began = time.perf_counter()
        maxsim_scores(query_tokens, np.full(args.queries, args.query_tokens), document_tokens,
                      np.full(args.documents, args.document_tokens))
        timings["maxsim"].append(time.perf_counter() - began)
        began = time.perf_counter()
        exact_dense_scores(queries, chunks, np.full(args.documents, chunks_per_document))
        timings["chunks"].append(time.perf_counter() - began)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"MaxSim over {len(query_tokens):,} x {len(document_tokens):,} token vectors: {medians['maxsim']:.3f} s; "
          f"best chunk of {len(chunks):,} chunk vectors: {medians['chunks'] * 1000:.2f} ms; "
          f"ratio {medians['maxsim'] / medians['chunks']:.0f}x (median of {args.repeats} alternated rounds)")
    print(f"token vectors stored: {document_tokens.nbytes / 2**20:.1f} MiB float16 against "
          f"{chunks.nbytes / 2**20:.2f} MiB of float32 chunk vectors")


if __name__ == "__main__":
    main()
