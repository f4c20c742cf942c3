"""Throughput: longembed against sentence-transformers at 512 tokens, and length batching.

1. 512-token inputs on all-MiniLM-L6-v2: longembed ``encode`` vs sentence-transformers
   ``encode``, same texts, same batch size, timed alternately in the same process (median of
   --repeats).  Reported as a ratio of throughputs (> 1: longembed is faster).
2. Mixed lengths: QMSum meetings cut to 4,096 tokens, MiniLM + pi.  Naive fixed-size batches in
   input order (padded to each batch's longest) vs longembed's batching by length under a token
   budget, alternated --repeats times (min of each).  Reported as a speed-up ratio; the vectors of
   both runs are compared too.

    python benchmarks/bench_throughput.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from longembed import load_encoder
from longembed.loading import default_model_path


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def essay_chunks(data_dir: Path, tokenizer, n_chunks: int, tokens: int) -> list[str]:
    files = sorted((data_dir / "paul_graham_essays" / "PaulGrahamEssays").glob("*.txt"))
    ids = tokenizer(" ".join(f.read_text() for f in files), add_special_tokens=False)["input_ids"]
    size = tokens - 2
    chunks = [ids[i : i + size] for i in range(0, len(ids) - size, size)][:n_chunks]
    return [tokenizer.decode(c) for c in chunks]


def qmsum_documents(data_dir: Path) -> list[str]:
    docs = []
    for split in ("train", "val"):
        for path in sorted((data_dir / "qmsum" / "data" / "ALL" / split).glob("*.json")):
            meeting = json.loads(path.read_text())
            docs.append("\n".join(f"{u['speaker']}: {u['content']}" for u in meeting["meeting_transcripts"]))
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--texts", type=int, default=128, help="512-token texts in part 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--qmsum-docs", type=int, default=96, help="QMSum documents in part 2 (197 = all)")
    parser.add_argument("--parts", default="1,2", help="which parts to run (default: 1,2)")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if "1" in args.parts.split(","):
        compare_with_sentence_transformers(args)
    if "2" in args.parts.split(","):
        compare_batching(args)


def compare_with_sentence_transformers(args: argparse.Namespace) -> None:

    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(default_model_path()), device="cpu")
    st.max_seq_length = 512
    ours = load_encoder("default")
    texts = essay_chunks(args.data_dir, ours.tokenizer, args.texts, 512)
    lengths = [len(ours.tokenizer(t)["input_ids"]) for t in texts]
    ours.encode(texts[:4]), st.encode(texts[:4])  # warm up
    st_times, our_times = [], []
    for _ in range(args.repeats):
        st_times.append(timed(lambda: st.encode(texts, batch_size=args.batch_size)))
        our_times.append(timed(lambda: ours.encode(texts, batch_size=args.batch_size)))
    diff = np.abs(st.encode(texts[:16]) - ours.encode(texts[:16])).max()
    st_t, our_t = statistics.median(st_times), statistics.median(our_times)
    print(
        f"part 1: {len(texts)} texts of {min(lengths)}-{max(lengths)} tokens, batch {args.batch_size}, threads {torch.get_num_threads()}"
    )
    print(
        f"  sentence-transformers {st_t:.2f}s ({len(texts) / st_t:.1f} texts/s), runs {[round(t, 2) for t in st_times]}"
    )
    print(
        f"  longembed             {our_t:.2f}s ({len(texts) / our_t:.1f} texts/s), runs {[round(t, 2) for t in our_times]}"
    )
    print(
        f"  throughput ratio longembed / sentence-transformers = {st_t / our_t:.2f}   (max |diff| {diff:.1e})"
    )


def compare_batching(args: argparse.Namespace) -> None:
    pi = load_encoder("default", method="pi", max_length=4096)
    docs = []
    for doc in qmsum_documents(args.data_dir)[: args.qmsum_docs]:
        ids = pi.tokenizer(doc, add_special_tokens=False)["input_ids"][:4094]
        docs.append(pi.tokenizer.decode(ids))
    doc_lengths = [len(pi.tokenizer(d)["input_ids"]) for d in docs]
    batch = 8

    def naive():
        out = []
        for i in range(0, len(docs), batch):  # input order, each batch padded to its longest
            out.append(pi.encode(docs[i : i + batch], batch_size=batch, max_tokens_per_batch=10**9))
        return np.concatenate(out)

    results, naive_times, sorted_times = {}, [], []
    for _ in range(args.repeats):  # alternate, so a change in machine load hits both alike
        naive_times.append(timed(lambda: results.__setitem__("naive", naive())))
        sorted_times.append(timed(lambda: results.__setitem__("sorted", pi.encode(docs, batch_size=batch))))
    naive_t, sorted_t = min(naive_times), min(sorted_times)
    padded = sum(
        max(doc_lengths[i : i + batch]) * len(doc_lengths[i : i + batch]) for i in range(0, len(docs), batch)
    )
    print(
        f"part 2: {len(docs)} QMSum documents cut to 4k, {min(doc_lengths)}-{max(doc_lengths)} tokens (sum {sum(doc_lengths)}), batch {batch}"
    )
    print(
        f"  naive fixed-size batches in input order: {naive_t:.1f}s min of {[round(t, 1) for t in naive_times]} (padded tokens {padded})"
    )
    print(
        f"  longembed length batching:               {sorted_t:.1f}s min of {[round(t, 1) for t in sorted_times]}"
    )
    print(
        f"  speed-up = {naive_t / sorted_t:.2f}   (max |diff| between the two: {np.abs(results['naive'] - results['sorted']).max():.1e})"
    )


if __name__ == "__main__":
    main()
