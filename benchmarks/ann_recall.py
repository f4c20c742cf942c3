"""ANN recall against the exact scan (issue 42): which LanceDB index types and settings keep the
top 10 *documents* of a dense search at recall@10 >= 0.98, at which build time and latency.

What a search does with an ANN index (:mod:`longembed.search.ann`, the very function called here): ask
the index for candidate chunks, then score every chunk of each candidate document exactly (MaxSim, as
eval).  Recall@10 = |ANN top 10 documents & exact top 10 documents| / 10, averaged over the queries.

Two vector sets, 8 chunks per document, at each ``--sizes`` chunk count:

* ``squad-mixture`` (realistic): the packaged MiniLM embeds the 1,204 SQuAD 2.0 dev paragraphs, their
  sentences and held-out questions.  Each synthetic document takes one paragraph's vector as its topic,
  and each of its chunks is that vector plus Gaussian noise, renormalised, with the noise scale set so
  that a chunk's cosine to its topic equals the mean cosine of a real sentence to its own paragraph
  (measured and printed).  So the set keeps real embeddings' geometry (their anisotropy and topic
  clusters, from real vectors) and a document's chunks scatter around its topic as real sentences do
  around their paragraph.  The queries are real question vectors (MiniLM, not in the set).
* ``random`` (worst case): uniform random unit vectors and random unit queries: no clusters at all.

For IVF_FLAT (what ``longembed index`` builds) it also runs the build's calibration (probes doubled
until recall@10 >= 0.98 on queries made from the set's own chunks) and measures the real queries at
the probes it picked.

Recall is not a timing, so it holds under load; the build seconds and latency milliseconds only count
when the script runs alone on the machine.  The full run (about 15 minutes on 2 cores, alone: at
100k chunks three index types on both sets, at 1M IVF_FLAT on squad-mixture):

    OMP_NUM_THREADS=1 python benchmarks/ann_recall.py --data-dir ../shared/data \\
        --output benchmarks/results/ann_recall

Small, to check that it runs (a minute): ``--sizes 20000 --queries 50 --types IVF_FLAT``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import HnswSq, IvfFlat, IvfPq

from longembed.encoder import load_encoder
from longembed.retrieval.ranking import max_over_rows
from longembed.search.ann import AnnState, calibrated_probes, document_scores, partitions_for, probes_for

CHUNKS_PER_DOCUMENT = 8
TOP = 10
#: (index type, search settings tried): probe fractions of the partitions, and PQ's refine factors
SETTINGS = {
    "IVF_FLAT": [{"probe_fraction": f} for f in (0.05, 0.1, 0.2, 0.5)],
    "IVF_PQ": [{"probe_fraction": f, "refine_factor": r} for f, r in ((0.1, None), (0.1, 10), (0.2, 10))],
    "IVF_HNSW_SQ": [{"probe_fraction": f, "ef": e} for f, e in ((0.1, 500), (0.2, 500))],
}


def squad_vectors(data_dir: Path, queries: int, cache: Path) -> dict[str, np.ndarray]:
    """MiniLM vectors of the SQuAD dev paragraphs, their sentences (with each one's paragraph) and
    ``queries`` questions (cached in ``cache``)."""
    if cache.is_file():
        with np.load(cache) as saved:
            if len(saved["questions"]) >= queries:
                return {name: saved[name] for name in saved.files}
    squad = json.loads((data_dir / "squad" / "dev-v2.0.json").read_text())
    paragraphs = [p for article in squad["data"] for p in article["paragraphs"]]
    texts = [p["context"] for p in paragraphs]
    sentences, owners = [], []
    for number, text in enumerate(texts):
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if len(sentence.split()) >= 5:
                sentences.append(sentence)
                owners.append(number)
    rng = np.random.default_rng(0)
    questions = [q["question"] for p in paragraphs for q in p["qas"]]
    questions = [questions[i] for i in rng.choice(len(questions), size=queries, replace=False)]
    encoder = load_encoder("default", max_length=512)
    print(f"embedding {len(texts)} paragraphs, {len(sentences)} sentences, {len(questions)} questions",
          file=sys.stderr)
    out = {name: np.asarray(encoder.encode(items, batch_size=32, normalize_embeddings=True), dtype=np.float32)
           for name, items in (("paragraphs", texts), ("sentences", sentences), ("questions", questions))}
    out["owners"] = np.asarray(owners)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **out)
    return out


def structure(vectors: dict[str, np.ndarray]) -> dict[str, float]:
    """The real embeddings' geometry the mixture copies: a sentence's cosine to its paragraph, and two
    random paragraphs' cosine."""
    paragraphs = vectors["paragraphs"]
    own = np.einsum("ij,ij->i", vectors["sentences"], paragraphs[vectors["owners"]])
    rng = np.random.default_rng(0)
    a, b = rng.integers(len(paragraphs), size=(2, 5000))
    keep = a != b
    pairs = np.einsum("ij,ij->i", paragraphs[a[keep]], paragraphs[b[keep]])
    return {"sentence_to_paragraph_cos": float(own.mean()), "paragraph_pair_cos": float(pairs.mean())}


def noise_scale(target_cos: float, dimensions: int) -> float:
    """The per-dimension Gaussian sigma at which normalise(c + noise) has cosine ``target_cos`` to a
    unit c: cos = 1 / sqrt(1 + d sigma^2)."""
    return float(np.sqrt((1 / target_cos**2 - 1) / dimensions))


def mixture(centres: np.ndarray, sigma: float, chunks: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    topics = rng.integers(len(centres), size=chunks // CHUNKS_PER_DOCUMENT)
    vectors = np.repeat(centres[topics], CHUNKS_PER_DOCUMENT, axis=0)
    vectors += sigma * rng.standard_normal(vectors.shape, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def random_unit(count: int, dimensions: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dimensions), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def exact_top(vectors: np.ndarray, rows: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """Each query's exact top 10 documents (MaxSim over the chunks)."""
    top = []
    for start in range(0, len(queries), 16):
        dense = max_over_rows(queries[start : start + 16] @ vectors.T, rows)
        top.extend(set(np.argsort(-row, kind="stable")[:TOP].tolist()) for row in dense)
    return top


def index_config(kind: str, partitions: int, dimensions: int):
    if kind == "IVF_FLAT":
        return IvfFlat(distance_type="cosine", num_partitions=partitions)
    if kind == "IVF_PQ":
        return IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=dimensions // 8)
    return HnswSq(distance_type="cosine", num_partitions=partitions)


def measure(table, kind: str, vectors: np.ndarray, rows: np.ndarray, queries: np.ndarray,
            truth: list[set[int]], position: dict[str, int]) -> list[dict]:
    partitions = partitions_for(len(vectors))
    began = time.perf_counter()
    table.create_index("vector", config=index_config(kind, partitions, vectors.shape[1]), replace=True)
    out = [{"measure": "ann_build", "type": kind, "partitions": partitions,
            "seconds": round(time.perf_counter() - began, 1)}]
    name = table.list_indices()[0].name
    settings = [dict(s) for s in SETTINGS[kind]]
    if kind == "IVF_FLAT":  # what longembed index picks: probes calibrated on its own chunks
        began = time.perf_counter()
        calibrated, sample_recall = calibrated_probes(table, AnnState(name, partitions, probes_for(partitions)))
        out.append({"measure": "ann_calibration", "type": kind, "probes": calibrated,
                    "sample_recall@10": round(sample_recall, 4), "seconds": round(time.perf_counter() - began, 1)})
        settings.append({"probe_fraction": calibrated / partitions, "calibrated": True})
    for setting in settings:
        probes = min(partitions, max(1, round(setting["probe_fraction"] * partitions)))
        state = AnnState(name, partitions, probes, setting.get("refine_factor"), setting.get("ef"))
        recalls, seconds = [], []
        for q, query in enumerate(queries):
            began = time.perf_counter()
            dense, _ = document_scores(table, state, query, TOP, vectors, rows, position)
            found = np.argsort(-dense, kind="stable")[:TOP]
            seconds.append(time.perf_counter() - began)
            recalls.append(len(truth[q] & set(found.tolist())) / TOP)
        ms = np.asarray(seconds) * 1000
        out.append({"measure": "ann_search", "type": kind, "partitions": partitions, "probes": probes, **setting,
                    "recall@10": round(float(np.mean(recalls)), 4), "min_recall@10": float(np.min(recalls)),
                    "p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2)})
    return out


def run_set(name: str, vectors: np.ndarray, queries: np.ndarray, types: list[str]) -> list[dict]:
    rows = np.full(len(vectors) // CHUNKS_PER_DOCUMENT, CHUNKS_PER_DOCUMENT)
    ids = [f"d{i}" for i in range(len(rows))]
    position = {d: p for p, d in enumerate(ids)}
    began = time.perf_counter()
    truth = exact_top(vectors, rows, queries)
    out = [{"measure": "exact", "set": name, "chunks": len(vectors),
            "ms_per_query": round((time.perf_counter() - began) * 1000 / len(queries), 2)}]
    with tempfile.TemporaryDirectory() as folder:
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        table = lancedb.connect(folder).create_table("chunks", data=pa.table({
            "id": np.repeat(ids, CHUNKS_PER_DOCUMENT), "chunk": np.tile(np.arange(CHUNKS_PER_DOCUMENT, dtype=np.int32),
                                                                       len(rows)), "vector": column}))
        for kind in types:
            for line in measure(table, kind, vectors, rows, queries, truth, position):
                out.append({"set": name, "chunks": len(vectors), **line})
                print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def markdown(lines: list[dict], shape: dict[str, float]) -> str:
    text = [f"Real MiniLM structure: a sentence's cosine to its paragraph {shape['sentence_to_paragraph_cos']:.3f}, "
            f"two random paragraphs {shape['paragraph_pair_cos']:.3f}.", "",
            "| set | chunks | index | partitions | probes | refine / ef | recall@10 | min | p50 ms | build s |",
            "|---|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    builds = {(x["set"], x["chunks"], x["type"]): x["seconds"] for x in lines if x["measure"] == "ann_build"}
    for x in lines:
        if x["measure"] == "exact":
            text.append(f"| {x['set']} | {x['chunks']:,} | exact scan | | | | 1.0 | 1.0 | {x['ms_per_query']} | |")
        elif x["measure"] == "ann_search":
            tuning = x.get("refine_factor") or x.get("ef") or ("calibrated by the build" if x.get("calibrated") else "")
            text.append(f"| {x['set']} | {x['chunks']:,} | {x['type']} | {x['partitions']} | {x['probes']} | {tuning} "
                        f"| {x['recall@10']} | {x['min_recall@10']} | {x['p50_ms']} | "
                        f"{builds[(x['set'], x['chunks'], x['type'])]} |")
    return "\n".join(text) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--sizes", default="100000,1000000", help="chunk counts, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sets", default="squad-mixture,random")
    parser.add_argument("--types", default="IVF_FLAT,IVF_PQ,IVF_HNSW_SQ",
                        help="index types up to 200k chunks")
    parser.add_argument("--types-large", default="IVF_FLAT", help="index types above 200k chunks")
    parser.add_argument("--sets-large", default="squad-mixture", help="sets above 200k chunks")
    parser.add_argument("--output", type=Path, default=None, help="folder for results.jsonl and results.md")
    args = parser.parse_args()
    cache = (args.output or Path(tempfile.gettempdir())) / "squad_minilm.npz"
    real = squad_vectors(args.data_dir, args.queries, cache)
    shape = structure(real)
    sigma = noise_scale(shape["sentence_to_paragraph_cos"], real["paragraphs"].shape[1])
    print(json.dumps({**shape, "sigma": sigma}), file=sys.stderr)
    lines: list[dict] = []
    for size in (int(s) for s in args.sizes.split(",")):
        types = (args.types if size <= 200_000 else args.types_large).split(",")
        for name in (args.sets if size <= 200_000 else args.sets_large).split(","):
            if name == "squad-mixture":
                vectors, queries = mixture(real["paragraphs"], sigma, size, seed=size), real["questions"][: args.queries]
            else:
                dimensions = real["paragraphs"].shape[1]
                vectors, queries = random_unit(size, dimensions, seed=size), random_unit(args.queries, dimensions, 1)
            lines.extend(run_set(name, vectors, queries, types))
    table = markdown(lines, shape)
    print(table)
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in
                                                           [{"measure": "structure", **shape, "sigma": sigma}, *lines]))
        (args.output / "results.md").write_text(table)


if __name__ == "__main__":
    main()
