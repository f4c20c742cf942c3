"""What opening an index costs (issue 53): open time, memory after opening and after 100 searches, and
search p50/p99, on synthetic indexes of 100k and 1M chunks, for one or more source trees (before/after).

Each index is written through the project's own store code (``IndexStore``, ``ChunkRows``, the
``complete`` tag, the saved snapshot) with synthetic unit vectors (384 dimensions, the packaged MiniLM's,
8 chunks per document) and synthetic texts (60 words per chunk from a 5,000-word vocabulary,
Zipf-distributed), for the hybrid strategy (MiniLM chunks + BM25, RRF): the model is loaded at open as
a real search loads it; the query vectors are synthetic (``embed_queries``), so the searches time the
index, not the encoder.  Every measurement runs in a fresh process, with each ``--src`` tree on
``PYTHONPATH``, the trees alternated round by round; a process reports its open time (the model's
loading included; torch and transformers imported before, timed apart), VmHWM (peak RSS)
and RssAnon (resident memory beyond the page cache: the memory-mapped vectors are not in it) after
opening and after the searches, and the searches' p50/p99.

Run it alone on the machine (other work inflates every number), before/after from one alternated run:

    python benchmarks/index_open.py --src new=src --src before=/work/main/src --rounds 3 \\
        --output benchmarks/results/index_open.json

Small, to check that it runs: ``--sizes 2000 --searches 10 --rounds 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

DIMENSIONS = 384
CHUNKS_PER_DOCUMENT = 8
WORDS_PER_CHUNK = 60
VOCABULARY = 5000
APPEND_ROWS = 50_000

#: the measurement, run in a fresh process with one source tree on PYTHONPATH
MEASURE = r"""
import json, sys, time
import numpy as np
path, searches, dimensions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
words = [f"w{i}" for i in range(5000)]

def memory():
    fields = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) * 1024
    return fields

rng = np.random.default_rng(1)
def embed_queries(queries):
    vectors = rng.standard_normal((len(queries), dimensions)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

start = time.perf_counter()
import torch, transformers  # a dense index needs them either way: imported apart, so open_s is the index's
from longembed.search import open_index
imported = time.perf_counter() - start
start = time.perf_counter()
index = open_index(path, embed_queries=embed_queries)
opened = time.perf_counter() - start
after_open = memory()
# the shown passage as the index stores it: the synthetic queries time the index, not the model's re-scoring
import inspect
chunk_passages = {"passages": "chunk"} if "passages" in inspect.signature(index.search).parameters else {}
latencies = []
for i in range(searches):
    query = " ".join(words[j] for j in rng.integers(0, 200, size=4))
    t = time.perf_counter()
    index.search(query, k=10, **chunk_passages)
    latencies.append(time.perf_counter() - t)
print(json.dumps({"import_s": imported, "open_s": opened, "after_open": after_open, "after_searches": memory(),
                  "p50_s": float(np.percentile(latencies, 50)), "p99_s": float(np.percentile(latencies, 99))}))
"""


def build_synthetic_index(path: Path, chunks: int, seed: int = 0) -> None:
    """A hybrid (MiniLM chunks + BM25) index of ``chunks`` synthetic chunks at ``path``, written through
    the project's store code, tagged complete and its snapshot saved (as ``longembed index`` leaves it)."""
    from longembed.retrieval.strategy import Strategy
    from longembed.search.build import index_metadata
    from longembed.search.store import ChunkRows, IndexStore, mark_complete
    from longembed.search.strategy_encoder import load_strategy_encoder
    from longembed.search.table_snapshot import save_snapshot
    from longembed.search.version_files import point_to

    strategy = Strategy("default", "truncate", None, granularity="chunks", chunking="tokens:256", late=False,
                        fuse="bm25")
    encoder = load_strategy_encoder(strategy)
    store = IndexStore(path)
    table = store.create(encoder.embedding_dim, index_metadata(strategy, encoder))
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, VOCABULARY + 1)
    zipf = (1 / ranks) / (1 / ranks).sum()
    documents = chunks // CHUNKS_PER_DOCUMENT
    for first in range(0, documents, APPEND_ROWS // CHUNKS_PER_DOCUMENT):
        batch = range(first, min(documents, first + APPEND_ROWS // CHUNKS_PER_DOCUMENT))
        rows = ChunkRows([], [], [], [], [], [], [], [], None)
        for d in batch:
            pieces = [" ".join(f"w{w}" for w in rng.choice(VOCABULARY, WORDS_PER_CHUNK, p=zipf))
                      for _ in range(CHUNKS_PER_DOCUMENT)]
            text = " ".join(pieces)
            offset = 0
            for c, piece in enumerate(pieces):
                rows.ids.append(f"doc{d:07d}")
                rows.sources.append(f"synthetic/doc{d:07d}.txt")
                rows.chunks.append(c)
                rows.starts.append(offset)
                rows.ends.append(offset + len(piece))
                rows.sha256s.append(f"{d:064x}")
                rows.texts.append(piece)
                rows.documents.append(text if c == 0 else None)
                offset += len(piece) + 1
        vectors = rng.standard_normal((len(rows.ids), encoder.embedding_dim)).astype(np.float32)
        rows.vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        table.add(rows.table(table.schema))
    table.checkout_latest()
    saved = save_snapshot(path, table)
    mark_complete(table)
    point_to(path, saved)


def measure(source: str, path: Path, searches: int) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(searches), str(DIMENSIONS)],
                          capture_output=True, text=True, env=environment, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="chunk counts, comma-separated")
    parser.add_argument("--src", action="append", default=None, metavar="LABEL=PATH",
                        help="a source tree to measure (repeat; default: new=src)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per tree and size")
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--work-dir", type=Path, default=None, help="where the indexes are built (default: a temp dir)")
    parser.add_argument("--output", type=Path, default=None, help="write every measurement here (JSON)")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in (args.src or ["new=src"]))
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="index_open-"))
    measurements = []
    for size in (int(s) for s in args.sizes.split(",")):
        path = work / f"index-{size}"
        if not path.exists():
            build_synthetic_index(path, size)
        for round_number in range(args.rounds):
            for label, source in trees.items():
                result = {"chunks": size, "tree": label, "round": round_number, **measure(source, path, args.searches)}
                measurements.append(result)
                print(json.dumps(result), flush=True)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(measurements, indent=1))
    print("\n| chunks | tree | open s (median) | peak RSS MiB | RssAnon after 100 searches MiB | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted({m["chunks"] for m in measurements}):
        for label in trees:
            rows = [m for m in measurements if m["chunks"] == size and m["tree"] == label]
            median = lambda key, rows=rows: float(np.median([key(m) for m in rows]))  # noqa: E731
            print(f"| {size:,} | {label} | {median(lambda m: m['open_s']):.2f} | "
                  f"{median(lambda m: m['after_searches']['VmHWM']) / 2**20:.0f} | "
                  f"{median(lambda m: m['after_searches']['RssAnon']) / 2**20:.0f} | "
                  f"{1000 * median(lambda m: m['p50_s']):.1f} | {1000 * median(lambda m: m['p99_s']):.1f} |")


if __name__ == "__main__":
    main()
