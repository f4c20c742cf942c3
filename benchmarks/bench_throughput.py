"""Throughput: longembed against sentence-transformers at 512 tokens, and length batching.

1. 512-token inputs on all-MiniLM-L6-v2: longembed ``encode`` vs sentence-transformers
   ``encode``, same texts, same batch size, timed alternately in the same process (median of
   --repeats).  Reported as a ratio of throughputs (> 1: longembed is faster).
2. QMSum meetings cut to 4,096 tokens, MiniLM + pi.  Naive fixed-size batches in input order
   (padded to each batch's longest) vs longembed's batching by length under a token budget,
   alternated --repeats times (min of each).  Reported as a speed-up ratio; the vectors of both runs
   are compared too.
3. A mixed-length corpus: --per-length passkey and needle documents at each of --lengths, plus
   --qmsum-mixed QMSum meetings cut to the longest length, shuffled together; the same comparison.

Naive batching runs the encoder's own forward on each padded batch of --batch-size inputs in input
order (``encode`` itself would sort them and split them by length).

    python benchmarks/bench_throughput.py --data-dir ../shared/data
    python benchmarks/bench_throughput.py --parts 3 --per-length 6 --qmsum-mixed 12 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from longembed import load_encoder
from longembed.encoder import LongContextEncoder
from longembed.loading import default_model_path
from longembed.tasks import get_task


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
    parser.add_argument("--parts", default="1,2", help="which parts to run (default: 1,2; 3: the mixed corpus)")
    parser.add_argument("--model", default="default", help="model of parts 2 and 3 (default: packaged MiniLM)")
    parser.add_argument("--lengths", default="256,512,1024,2048,4096", help="part 3: passkey/needle lengths")
    parser.add_argument("--per-length", type=int, default=6, help="part 3: documents per task and length")
    parser.add_argument("--qmsum-mixed", type=int, default=12, help="part 3: QMSum meetings cut to the longest length")
    parser.add_argument("--naive-batch", type=int, default=8, help="parts 2 and 3: inputs per naive batch")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if "1" in args.parts.split(","):
        compare_with_sentence_transformers(args)
    if "2" in args.parts.split(","):
        compare_batching(args)
    if "3" in args.parts.split(","):
        compare_batching_mixed(args)


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


def naive_encode(encoder: LongContextEncoder, docs: list[str], batch: int) -> np.ndarray:
    """Fixed-size batches in input order, each padded to its longest input: the encoder's own
    forward, without its sorting and length batching."""
    prepared = encoder.runner.prepare(encoder.runner.tokenize(docs))
    out = []
    with torch.inference_mode():
        for start in range(0, len(prepared.sequences), batch):
            pooled = encoder.runner._pooled(prepared.sequences[start : start + batch])
            out.append(torch.nn.functional.normalize(pooled.float(), dim=-1) if encoder.normalize else pooled.float())
    return torch.cat(out).numpy()


def cut_to(encoder: LongContextEncoder, doc: str, tokens: int) -> str:
    ids = encoder.tokenizer(doc, add_special_tokens=False)["input_ids"][: tokens - 2]
    return encoder.tokenizer.decode(ids)


def race(encoder: LongContextEncoder, docs: list[str], batch: int, repeats: int, label: str) -> dict:
    """Naive vs length batching on ``docs``, alternated ``repeats`` times (min of each)."""
    lengths = [len(encoder.tokenizer(d)["input_ids"]) for d in docs]
    results, naive_times, sorted_times = {}, [], []
    for _ in range(repeats):  # alternate, so a change in machine load hits both alike
        naive_times.append(timed(lambda: results.__setitem__("naive", naive_encode(encoder, docs, batch))))
        sorted_times.append(timed(lambda: results.__setitem__("sorted", encoder.encode(docs, batch_size=batch))))
    naive_t, sorted_t = min(naive_times), min(sorted_times)
    padded = sum(max(lengths[i : i + batch]) * len(lengths[i : i + batch]) for i in range(0, len(docs), batch))
    difference = float(np.abs(results["naive"] - results["sorted"]).max())
    print(f"{label}: {len(docs)} documents, {min(lengths)}-{max(lengths)} tokens (sum {sum(lengths)}), batch {batch}")
    print(f"  naive fixed-size batches in input order: {naive_t:.1f}s min of {[round(t, 1) for t in naive_times]} "
          f"(padded tokens {padded})")
    print(f"  longembed length batching:               {sorted_t:.1f}s min of {[round(t, 1) for t in sorted_times]}")
    print(f"  speed-up = {naive_t / sorted_t:.2f}   (max |diff| between the two: {difference:.1e})")
    return {"documents": len(docs), "tokens": sum(lengths), "padded_tokens_naive": padded, "naive_s": naive_times,
            "sorted_s": sorted_times, "speedup": naive_t / sorted_t, "max_abs_diff": difference}


def compare_batching(args: argparse.Namespace) -> None:
    pi = load_encoder(args.model, method="pi", max_length=4096)
    docs = [cut_to(pi, doc, 4096) for doc in qmsum_documents(args.data_dir)[: args.qmsum_docs]]
    race(pi, docs, args.naive_batch, args.repeats, "part 2: QMSum cut to 4k")


def compare_batching_mixed(args: argparse.Namespace) -> None:
    lengths = [int(n) for n in args.lengths.split(",")]
    pi = load_encoder(args.model, method="pi", max_length=max(lengths))
    docs = []
    for task in ("passkey", "needle"):
        for length in lengths:
            corpus = get_task(task).load(args.data_dir, length).corpus
            docs += list(corpus.values())[: args.per_length]
    docs += [cut_to(pi, doc, max(lengths)) for doc in qmsum_documents(args.data_dir)[: args.qmsum_mixed]]
    random.Random(0).shuffle(docs)
    race(pi, docs, args.naive_batch, args.repeats, "part 3: passkey + needle + QMSum, shuffled")


if __name__ == "__main__":
    main()
