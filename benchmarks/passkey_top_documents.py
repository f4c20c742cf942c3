"""Which documents does a model rank first on passkey?  Hubs: a few documents that win most queries.

For each length, encode the passkey documents and queries (through the embedding cache, so an
evaluated run costs nothing more), rank, and report how many distinct documents are ranked first,
the most frequent ones with the word offset of their key sentence, and the median key offset of
the top-1 documents against that of all documents.  A model that reads the whole document spreads
its top-1 over many documents with keys anywhere; one that reads a document's start ranks first
the documents whose key sentence comes early, whichever name was asked.

    python benchmarks/passkey_top_documents.py --model runs/retrofit/minilm-alibi --data-dir ../shared/data \\
        --lengths 1024 4096 --queries-per-length 200
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.cached_encoder import CachedEncoder
from longembed.results import write_json
from longembed.tasks.passkey import PasskeyTask, key_sentence_offset


def top_documents(encoder: CachedEncoder, task: PasskeyTask, data_dir: Path, length: int) -> dict[str, object]:
    """The top-1 statistics of one length (module docstring)."""
    data = task.load(data_dir, length)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    prompts = encoder.retrieval_prompts()
    docs = encoder.encode([data.corpus[i] for i in doc_ids], shard=f"passkey/{length}/documents",
                          prompt=prompts["document"]).vectors
    queries = encoder.encode([data.queries[i] for i in query_ids], shard=f"passkey/{length}/queries",
                             prompt=prompts["query"]).vectors
    top = (queries @ docs.T).argmax(axis=1)
    offsets = np.array([key_sentence_offset(data.corpus[i]) for i in doc_ids])
    counts = collections.Counter(top.tolist())
    return {
        "length": length, "queries": len(query_ids), "documents": len(doc_ids),
        "accuracy@1": round(100 * float(np.mean([doc_ids[t] in data.qrels[q] for q, t in zip(query_ids, top, strict=True)])), 2),
        "distinct top-1 documents": len(counts),
        "most frequent top-1 (queries won, key offset in words)": [(n, int(offsets[k])) for k, n in counts.most_common(5)],
        "median key offset, top-1 documents": float(np.median(offsets[top])),
        "median key offset, all documents": float(np.median(offsets)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="model folder (its own method), as `eval --model`")
    parser.add_argument("--method", default=None, help="extension method (default: the folder's own)")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--lengths", nargs="+", type=int, required=True)
    parser.add_argument("--queries-per-length", type=int, default=50)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    options = {k: v for k, v in (("method", args.method), ("max_length", args.max_length)) if v is not None}
    encoder = CachedEncoder(load_encoder(args.model, **options), log=None)
    task = PasskeyTask(queries_per_length=args.queries_per_length)
    rows = []
    for length in args.lengths:
        row = {"model": args.model, **options, **top_documents(encoder, task, args.data_dir, length)}
        print(json.dumps(row))
        rows.append(row)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, rows)


if __name__ == "__main__":
    main()
