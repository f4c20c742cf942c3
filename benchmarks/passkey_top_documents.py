"""Which documents does a model rank first on passkey?  Hubs: a few documents that win most queries.

For each length: how many distinct documents are ranked first, the most frequent ones with the word
offset of their key sentence, and the median key offset of the first-ranked documents against that of
all documents.  A model that reads the whole document spreads its first ranks over many documents
with keys anywhere; one that reads a document's start ranks first the documents whose key sentence
comes early, whichever name was asked.

The first-ranked documents come from a run's results.json (``--run``: runs keep them since the hub
diagnostic; no model needed), or from the model (``--model``: documents and queries encoded through
the embedding cache, so an evaluated run costs nothing more):

    python benchmarks/passkey_top_documents.py --run results/runs/retrofit-minilm-alibi-600-syn-200 \
        --data-dir ../shared/data --lengths 1024 2048 4096
    python benchmarks/passkey_top_documents.py --model runs/retrofit/minilm-alibi --data-dir ../shared/data \
        --lengths 1024 4096 --queries-per-length 200
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.cache import CachedEncoder
from longembed.results import RunResults
from longembed.results.files import write_json
from longembed.tasks import RetrievalData
from longembed.tasks.passkey import PasskeyTask, key_sentence_offset


def first_ranked_by_model(encoder: CachedEncoder, data: RetrievalData, length: int) -> dict[str, str]:
    """Query id -> the document the model ranks first (cosine; ties: the first in corpus order)."""
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    prompts = encoder.retrieval_prompts()
    docs = encoder.encode([data.corpus[i] for i in doc_ids], shard=f"passkey/{length}/documents",
                          prompt=prompts["document"]).vectors
    queries = encoder.encode([data.queries[i] for i in query_ids], shard=f"passkey/{length}/queries",
                             prompt=prompts["query"]).vectors
    return {q: doc_ids[t] for q, t in zip(query_ids, (queries @ docs.T).argmax(axis=1).tolist(), strict=True)}


def first_ranked_by_run(run: RunResults, length: int) -> dict[str, str]:
    """Query id -> the document the run ranked first at ``length``, from its results.json."""
    unit = run.tasks["passkey"].lengths.get(length) if "passkey" in run.tasks else None
    if unit is None or unit.first_ranked is None:
        raise SystemExit(f"the run has no first-ranked passkey documents at {length} (not scored, or written "
                         "before runs kept them: rescore it with its `longembed eval` command, or use --model)")
    return unit.first_ranked


def top_documents(first: dict[str, str], data: RetrievalData, length: int) -> dict[str, object]:
    """The first-rank statistics of one length (module docstring)."""
    offsets = {doc: key_sentence_offset(text) for doc, text in data.corpus.items()}
    counts = collections.Counter(first.values())
    return {
        "length": length, "queries": len(first), "documents": len(data.corpus),
        "accuracy@1": round(100 * float(np.mean([doc in data.qrels[q] for q, doc in first.items()])), 2),
        "distinct top-1 documents": len(counts),
        "most frequent top-1 (queries won, key offset in words)": [(n, offsets[d]) for d, n in counts.most_common(5)],
        "median key offset, top-1 documents": float(np.median([offsets[d] for d in first.values()])),
        "median key offset, all documents": float(np.median(list(offsets.values()))),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="a run folder whose results.json kept first-ranked documents")
    source.add_argument("--model", help="model folder (its own method), as `eval --model`")
    parser.add_argument("--method", default=None, help="extension method (default: the folder's own)")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--lengths", nargs="+", type=int, required=True)
    parser.add_argument("--queries-per-length", type=int, default=None,
                        help="with --model (default 50); a run's own is read from its results.json")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.run is not None:
        run = RunResults.load(args.run)
        queries, source_row = run.config.task_options.get("queries_per_length", 50), {"run": str(args.run)}
    else:
        options = {k: v for k, v in (("method", args.method), ("max_length", args.max_length)) if v is not None}
        encoder = CachedEncoder(load_encoder(args.model, **options), log=None)
        queries, source_row = args.queries_per_length or 50, {"model": args.model, **options}
    task = PasskeyTask(queries_per_length=queries)
    rows = []
    for length in args.lengths:
        data = task.load(args.data_dir, length)
        first = first_ranked_by_run(run, length) if args.run is not None else first_ranked_by_model(encoder, data, length)
        row = {**source_row, **top_documents(first, data, length)}
        print(json.dumps(row))
        rows.append(row)
    if args.out is not None:
        write_json(args.out, rows)


if __name__ == "__main__":
    main()
