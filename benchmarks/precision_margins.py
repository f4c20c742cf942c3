"""Which passkey queries change their answer in bfloat16, and by how much float32 had them decided.

For one passkey length: every query against every document in float32 and in bfloat16, the
largest change of a score, the median float32 margin (the right document's score minus the best
wrong one's), and for each query whose top-1 correctness differs, its margin in both precisions.

    python benchmarks/precision_margins.py --model /work/models/all-MiniLM-L6-v2 --method pi \\
        --max-length 2048 --length 1024 --data-dir ../shared/data
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from longembed import load_encoder
from longembed.tasks.passkey import PasskeyTask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    data = PasskeyTask().load(args.data_dir, args.length)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    gold = np.array([doc_ids.index(next(iter(data.qrels[q]))) for q in query_ids])
    scores = {}
    for dtype in ("float32", "bfloat16"):
        encoder = load_encoder(args.model, method=args.method, max_length=args.max_length, dtype=dtype)
        documents = encoder.encode([data.corpus[i] for i in doc_ids], normalize_embeddings=True)
        queries = encoder.encode([data.queries[q] for q in query_ids], normalize_embeddings=True)
        scores[dtype] = queries @ documents.T

    def margin(s: np.ndarray, row: int) -> float:
        return float(s[row, gold[row]] - np.delete(s[row], gold[row]).max())

    full, reduced = scores["float32"], scores["bfloat16"]
    right = {k: s.argmax(1) == gold for k, s in scores.items()}
    print(f"accuracy@1: float32 {right['float32'].mean():.2f}, bfloat16 {right['bfloat16'].mean():.2f}")
    print(f"largest score change: {np.abs(full - reduced).max():.4f}")
    print(f"median |float32 margin|: {np.median([abs(margin(full, r)) for r in range(len(query_ids))]):.4f}")
    for row in np.flatnonzero(right["float32"] != right["bfloat16"]):
        print(f"{query_ids[row]}: margin float32 {margin(full, row):+.5f}, bfloat16 {margin(reduced, row):+.5f}")


if __name__ == "__main__":
    main()
