"""Passage pieces per forward: the last rule (a count of pieces) against token budgets, alternated in one process.

The essays' sentence pieces (``retrieval.passages.document_pieces``), embedded as a build embeds them
(:data:`~longembed.search.piece_vectors.PIECES_PER_CALL` per encode call), in the dtype given:

    python benchmarks/piece_batches.py --essays 24 --dtype bfloat16 --rounds 3
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch

from longembed import load_encoder
from longembed.retrieval.passages import document_pieces
from longembed.search.piece_vectors import PIECES_PER_CALL

ESSAYS = Path("../shared/data/paul_graham_essays/PaulGrahamEssays")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--essays", type=int, default=24)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    texts = [p.read_text(encoding="utf-8") for p in sorted(ESSAYS.glob("*.txt"))[: args.essays]]
    encoder = load_encoder("default", dtype=args.dtype)
    pieces = [t[a:b] for t in texts for a, b in document_pieces(t)]
    tokens = sum(len(ids) for ids in encoder.tokenizer(pieces)["input_ids"])
    print(f"{len(pieces)} pieces, {tokens:,} tokens", flush=True)

    def run(count: int, budget: int | None) -> Callable[[], None]:
        def encode() -> None:
            for start in range(0, len(pieces), PIECES_PER_CALL):
                encoder.encode(pieces[start : start + PIECES_PER_CALL], batch_size=count,
                               max_tokens_per_batch=budget, normalize_embeddings=True)
        return encode

    variants = [("128 pieces (last rule, batch 16)", run(128, None)), ("256 pieces (last rule, batch 32)", run(256, None)),
                ("4,096 tokens", run(PIECES_PER_CALL, 4096)), ("8,192 tokens", run(PIECES_PER_CALL, 8192)),
                ("16,384 tokens", run(PIECES_PER_CALL, 16384))]
    run(256, None)()  # warm-up
    for number in range(args.rounds):
        for name, encode in variants[number % len(variants):] + variants[: number % len(variants)]:
            start = time.perf_counter()
            encode()
            seconds = time.perf_counter() - start
            print(f"round {number + 1} {name}: {seconds:.2f} s, {tokens / seconds:,.0f} tokens/s", flush=True)


if __name__ == "__main__":
    main()
