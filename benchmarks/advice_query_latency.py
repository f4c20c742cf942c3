"""Query latency as ``longembed advise`` reports it ("query ms") against a direct timing (issue 41).

advise once printed a median of 730 ms per query for MiniLM at PI-4096 and 24 ms for naive chunks,
where one short question takes about 25 ms with either encoder timed directly.  This script times,
for each encoder (MiniLM truncated, and PI at --max-length), first the issue's direct measurement
(one short question, --rounds alternated runs, after a warm-up) and then advise's own measurement
(:class:`longembed.advice.costs.CostMeter` on a cost sample of --documents long documents and
--queries questions: the uncached document encode, then warm-up searches, then the timed queries).
The two medians should agree within machine noise.  Run it alone on the machine:

    LONGEMBED_MODELS_DIR=/work/models OMP_NUM_THREADS=2 python benchmarks/advice_query_latency.py \\
        --data-dir /work/shared/data --max-length 4096 --documents 8 --queries 20 --rounds 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

from longembed.advice.costs import CostMeter, cost_sample
from longembed.advice.strategies import ModelFacts, plan_candidates
from longembed.encoder import load_encoder
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.scoring import Unit
from longembed.tasks import RetrievalData

QUESTION = "What did the author learn from his first startup?"


def essay_unit(data_dir: Path, n_documents: int, n_queries: int) -> Unit:
    """Long documents (essays) and short questions (ten words of one), as one retrieval unit."""
    files = sorted((data_dir / "paul_graham_essays" / "PaulGrahamEssays").glob("*.txt"))[:n_documents]
    if not files:
        raise SystemExit(f"no essays under {data_dir}/paul_graham_essays/PaulGrahamEssays: give --data-dir")
    corpus = {f.stem: f.read_text() for f in files}
    queries = {f"q{i}": " ".join(corpus[files[i % len(files)].stem].split()[i : i + 10]) for i in range(n_queries)}
    qrels = {q: {files[i % len(files)].stem: 1} for i, q in enumerate(queries)}
    return Unit("essays", None, RetrievalData(corpus, queries, qrels), 0.0)


def direct_ms(encoder: object, rounds: int) -> float:
    """The issue's measurement: one short question, ``rounds`` runs after one warm-up, the median."""
    encoder.encode([QUESTION], batch_size=1)  # type: ignore[attr-defined]
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        encoder.encode([QUESTION], batch_size=1)  # type: ignore[attr-defined]
        times.append(1000 * (time.perf_counter() - began))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("LONGEMBED_DATA_DIR", "../shared/data")))
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)
    unit = essay_unit(args.data_dir, args.documents, args.queries)
    sample = cost_sample([unit], args.documents, args.queries, seed=0)
    candidates, _ = plan_candidates(ModelFacts("ape", "mean", 512), args.max_length)
    print(f"{'strategy':<16}{'direct ms':>10}{'advise ms':>10}")
    for name in ("truncate", f"pi-{args.max_length}", "naive-chunks"):
        candidate = next(c for c in candidates if c.name == name)
        encoder = load_encoder(args.model, method=candidate.encoder,
                               max_length=None if candidate.encoder == "truncate" else args.max_length)
        meter = CostMeter(sample, 16, 1)
        measured = meter.dense(candidate, CachedEncoder(encoder, use_cache=False, show_progress=False),
                               {"query": "", "document": ""})
        print(f"{name:<16}{direct_ms(encoder, args.rounds):>10.1f}{statistics.median(measured.latencies_ms):>10.1f}")


if __name__ == "__main__":
    main()
