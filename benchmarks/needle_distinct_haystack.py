"""Does a model win needle by reading the needle, or because every candidate shares its haystack?

LongEmbed's needle documents of one length are one haystack prefix with a needle inserted: the
needle is the only difference between candidates (``longembed.tasks.needle``, as the paper's data).
A model whose token states are local (ALiBi with steep slopes) then embeds every document as the
same shared part plus a needle-local part, and the ranking is decided by the needle alone; a model
that mixes the whole text does not get that for free.  Real retrieval has no shared haystack.

This script scores the same queries and needles twice per model: the benchmark's documents
(``shared``), and documents whose haystacks all differ (``distinct``: document i is a window of the
essays starting i x stride words in, the needle at a random sentence boundary of its window;
``longembed.tasks.needle.distinct_documents``, which ``longembed eval --needle-haystacks distinct``
runs through the benchmark itself, with its cache, intervals and ``compare``).  accuracy@1 with a
bootstrap interval over the queries, and the paired difference.

    python benchmarks/needle_distinct_haystack.py --data-dir ../shared/data --lengths 1024 2048 \\
        --model runs/retrofit/minilm-alibi --model /work/models/all-MiniLM-L6-v2:pi:4096
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.metrics import per_query_scores
from longembed.results.files import write_json
from longembed.results.intervals import bootstrap_interval
from longembed.results.paired import difference_interval, mean_terms, sign_flip_test
from longembed.tasks.base import RetrievalData
from longembed.tasks.needle import ESSAY_SUBDIR, NeedleTask, build_haystack, distinct_documents


def benchmark_documents(length: int, haystack: str, facts: list[str], seed: int = 0) -> list[str]:
    """The distinct-haystack documents of this benchmark: ``longembed.tasks.needle.distinct_documents``
    (what ``longembed eval --needle-haystacks distinct`` builds) with the benchmark's own random stream,
    ``random.Random(f"distinct-haystack:{seed}:{length}")``, from which the published numbers (seed 0)
    came; the eval task draws from ``longembed-needle-distinct:{task seed}:{length}`` instead."""
    return distinct_documents(length, haystack, facts, random.Random(f"distinct-haystack:{seed}:{length}"))


def accuracy_at_1(encoder, documents: dict[str, str], data: RetrievalData) -> np.ndarray:
    """Per query (in ``data.queries`` order) 100 if its relevant document ranks first, else 0: the
    benchmark's own ranking and metric (``evaluation.metrics``; ties broken by document id)."""
    prompts = encoder.retrieval_prompts()  # the model's query/document prompts, as eval uses them
    d = encoder.encode(list(documents.values()), batch_size=4, normalize_embeddings=True, show_progress_bar=True,
                       prompt=prompts["document"])
    q = encoder.encode(list(data.queries.values()), batch_size=32, normalize_embeddings=True, prompt=prompts["query"])
    scores = per_query_scores(q @ d.T, list(data.queries), list(documents), data.qrels)["accuracy@1"]
    return np.asarray([scores[query] for query in data.queries]) * 100


def open_model(spec: str):
    """``PATH`` (its own method) or ``PATH:METHOD:MAX_LENGTH``."""
    path, *rest = spec.split(":")
    if rest:
        return load_encoder(path, method=rest[0], max_length=int(rest[1]))
    return load_encoder(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--model", action="append", required=True, help="PATH or PATH:METHOD:MAX_LENGTH (repeatable)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[1024, 2048])
    parser.add_argument("--out", type=Path, default=None, help="write the scores as JSON here")
    args = parser.parse_args(argv)
    haystack = build_haystack(args.data_dir / ESSAY_SUBDIR)
    task = NeedleTask()
    out = []
    for spec in args.model:
        encoder = open_model(spec)
        for length in args.lengths:
            data = task.load(args.data_dir, length)
            doc_ids = list(data.corpus)
            facts = [n.fact for n in task.needles[: len(doc_ids)]]
            assert all(f in data.corpus[i] for f, i in zip(facts, doc_ids, strict=True)), "document i holds needle i"
            shared = accuracy_at_1(encoder, data.corpus, data)
            distinct = accuracy_at_1(encoder, dict(zip(doc_ids, benchmark_documents(length, haystack, facts), strict=True)), data)
            diff = difference_interval({"q": list(distinct - shared)})
            p = sign_flip_test(mean_terms({"q": list(distinct - shared)})).p_value
            row = {"model": spec, "length": length, "queries": len(data.queries),
                   "shared": str(bootstrap_interval(list(shared))), "distinct": str(bootstrap_interval(list(distinct))),
                   "distinct - shared": f"{diff.estimate:+.1f} [{diff.low:+.1f}, {diff.high:+.1f}], p = {p:.2g}"}
            print(json.dumps(row))
            out.append(row)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, out)


if __name__ == "__main__":
    main()
