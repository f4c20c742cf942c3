"""Search latency and index build throughput (issue 42): how fast ``longembed search`` answers, and how
fast ``longembed index`` fills an index, on this machine.

What it measures (one JSON line per measurement, and a markdown table at the end):

1. **Query latency** (p50 and p99 over ``--queries`` queries, the query vector given: encoding a query
   is measured apart, in 3) of the three systems a search combines, at each ``--sizes`` chunk count:
   dense (every chunk's cosine, MaxSim per document, top 10), BM25 (bm25s over the documents) and
   hybrid (both, RRF with the tie-break, top 10): the very functions ``SearchIndex`` calls
   (:mod:`longembed.retrieval`).  Sizes above the model's demo use synthetic unit vectors (8 chunks
   per document) and synthetic documents of 60 words from a 5,000-word vocabulary (Zipf-distributed).
   Dense search is exact (a scan) up to ``--exact-below`` chunks; above it the script also builds a
   LanceDB IVF-PQ index on the chunk vectors and reports its latency and its recall@10 of documents
   against the exact scan (nprobes and refine_factor raised until recall@10 >= 0.98).
2. **Build throughput** (chunks/s) of ``build_index`` with the packaged MiniLM on ``--build-documents``
   documents cut from the Paul Graham essays (naive chunks of 256 tokens), locally and on Ray with 1
   and 2 actors.
3. **End to end**: one ``longembed search`` from the command line (a new process: imports, index and
   model loading, one query), and from Python (``open_index`` once, then one search: the first and the
   median of later ones).  Loading is paid once per process, so a server or a loop pays it once.

Run it alone on the machine (other work inflates every number):

    python benchmarks/search_latency.py --data-dir ../shared/data --output benchmarks/results/search_latency

Small, to check that it runs (seconds): ``--sizes 1000,20000 --queries 20 --build-documents 40 --engines local``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.rank_fusion import fuse_with_tie_break
from longembed.retrieval.ranking import max_over_rows, rank_order
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.ray_build import RayBuild
from longembed.search.sources import Document, read_sources

CHUNKS_PER_DOCUMENT = 8
DIMENSIONS = 384
TOP = 10


def percentiles(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p99_ms": round(float(np.percentile(values, 99)), 3)}


def synthetic(chunks: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """(unit chunk vectors, chunks per document, document ids, document texts)."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((chunks, DIMENSIONS), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    documents = chunks // CHUNKS_PER_DOCUMENT
    rows = np.full(documents, CHUNKS_PER_DOCUMENT)
    vocabulary = [f"w{i}" for i in range(5000)]
    weights = 1 / np.arange(1, 5001)
    weights /= weights.sum()
    words = rng.choice(len(vocabulary), size=(documents, 60), p=weights)
    texts = [" ".join(vocabulary[w] for w in row) for row in words]
    return vectors, rows, [f"d{i}" for i in range(documents)], texts


def query_latency(chunks: int, queries: int, exact_below: int) -> list[dict]:
    vectors, rows, ids, texts = synthetic(chunks)
    rng = np.random.default_rng(1)
    query_vectors = rng.standard_normal((queries, DIMENSIONS), dtype=np.float32)
    query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)
    query_texts = [" ".join(texts[rng.integers(len(texts))].split()[:5]) for _ in range(queries)]
    bm25 = BM25Model()
    began = time.perf_counter()
    index = bm25.index(texts)
    bm25_build = time.perf_counter() - began
    timings: dict[str, list[float]] = {"dense": [], "bm25": [], "hybrid": []}
    exact_top: list[set[str]] = []
    for q in range(queries):
        began = time.perf_counter()
        dense = max_over_rows((vectors @ query_vectors[q])[None, :], rows)
        top = rank_order(dense, ["q"], ids, top_k=TOP)
        timings["dense"].append(time.perf_counter() - began)
        exact_top.append({ids[d] for d in top[0]})
        began = time.perf_counter()
        lexical = bm25.query_scores(index, query_texts[q])[None, :].astype(np.float64)
        rank_order(lexical, ["q"], ids, top_k=TOP)
        timings["bm25"].append(time.perf_counter() - began)
        began = time.perf_counter()
        dense = max_over_rows((vectors @ query_vectors[q])[None, :], rows)
        lexical = bm25.query_scores(index, query_texts[q])[None, :].astype(np.float64)
        fused, key = fuse_with_tie_break(Fusion(), dense, lexical)
        rank_order(fused, ["q"], ids, top_k=TOP, tie_break=key)
        timings["hybrid"].append(time.perf_counter() - began)
    out = [{"measure": "query", "chunks": chunks, "system": name, "search": "exact scan" if name != "bm25" else
            "bm25s", **percentiles(values)} for name, values in timings.items()]
    out.append({"measure": "bm25_index", "chunks": chunks, "documents": len(ids), "seconds": round(bm25_build, 3)})
    if chunks >= exact_below:
        out.extend(ann_latency(vectors, rows, ids, query_vectors, exact_top))
    return out


def ann_latency(vectors: np.ndarray, rows: np.ndarray, ids: list[str], query_vectors: np.ndarray,
                exact_top: list[set[str]]) -> list[dict]:
    """LanceDB IVF-PQ on the chunk vectors: its build time, and latency and recall@10 of documents (a
    document's best chunk among the hits) at rising nprobes / refine_factor until recall >= 0.98."""
    owner = np.repeat(np.arange(len(ids)), rows)
    with tempfile.TemporaryDirectory() as folder:
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIMENSIONS)
        table = lancedb.connect(folder).create_table("chunks", data=pa.table({"row": np.arange(len(vectors)),
                                                                               "vector": column}))
        partitions = max(16, int(np.sqrt(len(vectors))))
        began = time.perf_counter()
        table.create_index(metric="cosine", num_partitions=partitions, num_sub_vectors=DIMENSIONS // 8,
                           vector_column_name="vector")
        built = time.perf_counter() - began
        out = [{"measure": "ann_index", "chunks": len(vectors), "partitions": partitions, "seconds": round(built, 2)}]
        for nprobes, refine in ((20, 10), (50, 20), (100, 50), (200, 100)):
            seconds, recalls = [], []
            for q, vector in enumerate(query_vectors):
                began = time.perf_counter()
                hits = (table.search(vector).metric("cosine").nprobes(nprobes).refine_factor(refine)
                        .limit(TOP * CHUNKS_PER_DOCUMENT).select(["row"]).to_arrow())
                found: list[str] = []
                for row in hits["row"].to_pylist():
                    document = ids[owner[row]]
                    if document not in found:
                        found.append(document)
                seconds.append(time.perf_counter() - began)
                recalls.append(len(set(found[:TOP]) & exact_top[q]) / TOP)
            recall = float(np.mean(recalls))
            out.append({"measure": "query", "chunks": len(vectors), "system": "dense", "search":
                        f"IVF-PQ nprobes={nprobes} refine={refine}", "recall@10": round(recall, 4), **percentiles(seconds)})
            if recall >= 0.98:
                break
        return out


def build_throughput(data_dir: Path, documents: int, engines: list[str], folder: Path) -> list[dict]:
    essays = read_sources([data_dir / "paul_graham_essays" / "PaulGrahamEssays"])
    text = " ".join(d.text for d in essays)
    size = len(text) // max(documents, 1)
    docs = [Document(f"d{i}", f"d{i}", text[i * size : (i + 1) * size]) for i in range(documents)]
    strategy = Strategy("default", "truncate", granularity="chunks", chunking="tokens:256", late=False)
    out = []
    for engine in engines:
        actors = {"local": 0, "ray1": 1, "ray2": 2}[engine]
        began = time.perf_counter()
        report = build_index(folder / engine, docs, strategy, engine=RayBuild(actors=actors) if actors else None,
                             show_progress=False, log=None)
        seconds = time.perf_counter() - began
        out.append({"measure": "build", "engine": engine, "documents": documents, "chunks": report.chunks,
                    "seconds": round(seconds, 2), "chunks_per_s": round(report.chunks / seconds, 2)})
    return out


def end_to_end(index: Path) -> list[dict]:
    question = "how do you start a startup"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "longembed.cli.main", "search", "--index", str(index), question, "--json"],
                   check=True, capture_output=True)
    cli = time.perf_counter() - began
    began = time.perf_counter()
    opened = open_index(index)
    opening = time.perf_counter() - began
    began = time.perf_counter()
    opened.search(question)
    first = time.perf_counter() - began
    later = []
    for i in range(20):
        began = time.perf_counter()
        opened.search(f"{question} {i}")
        later.append(time.perf_counter() - began)
    return [{"measure": "end_to_end", "cli_one_search_s": round(cli, 3), "python_open_index_s": round(opening, 3),
             "python_first_search_ms": round(first * 1000, 2), **{f"python_later_{k}": v
                                                                   for k, v in percentiles(later).items()}}]


def markdown(rows: list[dict]) -> str:
    lines = ["| measure | size | system / engine | search | p50 ms | p99 ms | recall@10 | other |",
             "|---|---:|---|---|---:|---:|---:|---|"]
    for r in rows:
        other = {k: v for k, v in r.items() if k not in ("measure", "chunks", "system", "engine", "search", "p50_ms",
                                                         "p99_ms", "recall@10")}
        lines.append(f"| {r['measure']} | {r.get('chunks', '')} | {r.get('system', r.get('engine', ''))} | "
                     f"{r.get('search', '')} | {r.get('p50_ms', '')} | {r.get('p99_ms', '')} | {r.get('recall@10', '')} | "
                     f"{json.dumps(other) if other else ''} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000,1000000", help="chunk counts (default 1k, 100k, 1M)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--exact-below", type=int, default=200_000,
                        help="chunk count from which the ANN index is measured too (exact scan below)")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("LONGEMBED_DATA_DIR", "../shared/data")))
    parser.add_argument("--build-documents", type=int, default=400)
    parser.add_argument("--engines", default="local,ray1,ray2")
    parser.add_argument("--output", type=Path, default=None, help="folder for results.jsonl and results.md")
    args = parser.parse_args()
    rows: list[dict] = []

    def record(found: list[dict]) -> None:
        for row in found:
            print(json.dumps(row), flush=True)
        rows.extend(found)

    for size in (int(s) for s in args.sizes.split(",")):
        record(query_latency(size, args.queries, args.exact_below))
    with tempfile.TemporaryDirectory() as scratch:
        record(build_throughput(args.data_dir, args.build_documents, args.engines.split(","), Path(scratch)))
        record(end_to_end(Path(scratch) / args.engines.split(",")[0]))
    table = markdown(rows)
    print(table)
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (args.output / "results.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
