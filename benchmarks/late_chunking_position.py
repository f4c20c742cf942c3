"""Where the planted sentence sits, and which documents win: position bias on passkey and needle.

    python benchmarks/late_chunking_position.py --model /work/models/nomic-embed-text-v1.5 --method truncate \\
        --data-dir ../shared/data --cache-dir /work/repro11/cache --tasks needle --lengths 512,1024,2048 \\
        --out results/late/nomic-2k/position

Passkey and needle documents are one filler text with one planted sentence (the key or the needle,
on its own line); the planted sentence is the only difference between documents.  For one vector,
naive chunks and late chunks (the same three variants as ``late_chunking.py``, read from the same
embedding cache, so after that benchmark this one costs only the query encoding) it reports:

* accuracy@1 and the median rank of the relevant document;
* the "hubs": how many of the queries each top-1 document wins, and where its planted sentence sits
  (fraction of the document's characters before it);
* accuracy@1 split by whether the relevant document's planted sentence is in its first chunk;
* for chunks, which chunk index wins, and the mean query-chunk cosine by chunk index over the chunks
  that do not hold the planted sentence (a score offset by position alone, independent of content
  when, as in needle, every document has the same filler there);
* whether that offset explains the result: accuracy@1 after subtracting, from each query's cosine with
  each chunk, that query's mean cosine over all chunks at the same index ("offset removed");
* the planted sentence's lift: a query's cosine with the chunk of its relevant document that holds the
  planted sentence, minus its mean cosine with the other documents' chunks at the same index (how much
  the fact moves a chunk vector, the signal that has to beat the offset).

A document's score over chunks is its best chunk (MaxSim), as in ``longembed eval --granularity chunks``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.encoder_protocol import retrieval_prompts
from longembed.evaluation.cache import CachedEncoder
from longembed.tasks import get_task
from longembed.tasks.needle import NeedleTask

PASSKEY_SENTENCE = re.compile(r"'s pass key is \d+\. Remember it\.")


def planted_position(text: str, planted_lines: set[str]) -> int:
    """Character offset of the document's planted line (the pass key sentence or the needle): it sits
    on its own line, so it is the line that is one of ``planted_lines`` (or, for passkey, that holds
    the key sentence)."""
    offset = 0
    for line in text.split("\n"):
        if line in planted_lines or PASSKEY_SENTENCE.search(line):
            return offset
        offset += len(line) + 1
    raise ValueError(f"no planted line in the document starting {text[:60]!r}")


def hub_summary(top: np.ndarray, relative: np.ndarray, keep: int = 5) -> list[dict]:
    """The documents that win most queries, with how many they win and where their planted line is."""
    return [
        {"document": int(doc), "queries_won": int(n), "planted_at": round(float(relative[doc]), 3)}
        for doc, n in collections.Counter(top.tolist()).most_common(keep)
    ]


def analyse(doc_scores: np.ndarray, gold: np.ndarray, relative: np.ndarray, early: np.ndarray) -> dict:
    """Accuracy, median rank of the relevant document, hubs, and accuracy by where the planted line is."""
    top = doc_scores.argmax(1)
    hit = top == gold
    ranks = (doc_scores > doc_scores[np.arange(len(gold)), gold][:, None]).sum(1)
    gold_early = early[gold]
    return {
        "accuracy@1": round(100 * float(hit.mean()), 1),
        "median_rank_of_relevant": float(np.median(ranks)),
        "hubs": hub_summary(top, relative),
        "accuracy@1_planted_in_first_chunk": round(100 * float(hit[gold_early].mean()), 1)
        if gold_early.any()
        else None,
        "queries_planted_in_first_chunk": int(gold_early.sum()),
        "accuracy@1_planted_elsewhere": round(100 * float(hit[~gold_early].mean()), 1)
        if (~gold_early).any()
        else None,
    }


def chunk_scores(queries: np.ndarray, chunks, n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(MaxSim document scores, winning chunk index per query and document, query-chunk cosines)."""
    return chunk_scores_from_cosines(queries @ chunks.vectors.T, chunks.owners(), n_docs)


def chunk_scores_from_cosines(
    cosines: np.ndarray, owners: np.ndarray, n_docs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MaxSim over given query-chunk scores: (document scores, winning chunk index, the scores)."""
    first = np.searchsorted(owners, np.arange(n_docs))
    scores = np.full((len(cosines), n_docs), -np.inf)
    best = np.zeros((len(cosines), n_docs), dtype=np.int64)
    for column, owner in enumerate(owners):
        better = cosines[:, column] > scores[:, owner]
        scores[better, owner] = cosines[better, column]
        best[better, owner] = column - first[owner]
    return scores, best, cosines


def offset_removed(cosines: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Query-chunk cosines minus each query's mean cosine over all chunks at the same chunk index."""
    centred = cosines.copy()
    for k in np.unique(index):
        at_k = index == k
        centred[:, at_k] -= cosines[:, at_k].mean(1, keepdims=True)
    return centred


def planted_lift(
    cosines: np.ndarray, owners: np.ndarray, index: np.ndarray, gold: np.ndarray, planted_chunk: np.ndarray
) -> float:
    """Mean over queries of cos(query, the relevant document's planted chunk) minus the query's mean
    cosine with the other documents' chunks at that index."""
    lifts = []
    for row, doc in enumerate(gold):
        k = planted_chunk[doc]
        own = (owners == doc) & (index == k)
        others = (owners != doc) & (index == k)
        lifts.append(cosines[row, own][0] - cosines[row, others].mean())
    return float(np.mean(lifts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="truncate")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--tasks", default="needle", help="passkey and/or needle, comma separated")
    parser.add_argument("--lengths", default="512,1024,2048")
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--out", type=Path, required=True, help="OUT.json and OUT.md are written")
    parser.add_argument("--variants", default="single,naive,late",
                        help="which of single, naive, late to analyse (e.g. 'late' for a model whose other "
                             "variants are not needed: each variant not in the cache is encoded)")
    args = parser.parse_args()
    variants = [v for v in ("single", "naive", "late") if v in args.variants.split(",")]

    options = {} if args.max_length is None else {"max_length": args.max_length}
    encoder = load_encoder(args.model, method=args.method, **options)
    cached = CachedEncoder(encoder, args.cache_dir)
    prompts = retrieval_prompts(encoder.prompts)
    report: dict = {"model": args.model, "method": args.method, "chunking": args.chunking, "runs": []}
    lines = [
        f"# Position bias on passkey and needle: {Path(args.model).name} ({args.method}), {args.chunking}",
        "",
    ]
    facts = {needle.fact for needle in NeedleTask().needles}
    for task_name in args.tasks.split(","):
        task = get_task(task_name)
        for length in [int(n) for n in args.lengths.split(",")]:
            data = task.load(args.data_dir, length)
            doc_ids, query_ids = list(data.corpus), list(data.queries)
            texts = [data.corpus[d] for d in doc_ids]
            gold = np.array([doc_ids.index(next(iter(data.qrels[q]))) for q in query_ids])
            shard = f"{task_name}/{length}"
            queries = cached.encode(
                [data.queries[q] for q in query_ids], shard=f"{shard}/queries", prompt=prompts["query"]
            ).vectors
            planted = np.array([planted_position(t, facts) for t in texts])
            relative = planted / np.array([len(t) for t in texts])
            # the chunk (index within its document) that holds the planted line's first character
            planted_chunk = np.array(
                [
                    next(k for k, (start, end) in enumerate(spans) if start <= at < end)
                    for at, spans in zip(planted, encoder.chunk_spans(texts, args.chunking), strict=True)
                ]
            )
            early = planted_chunk == 0
            run = {
                "task": task_name,
                "length": length,
                "documents": len(texts),
                "queries": len(query_ids),
            }
            if "single" in variants:
                single = cached.encode(texts, shard=f"{shard}/documents", prompt=prompts["document"])
                run["single"] = analyse(queries @ single.vectors.T, gold, relative, early)
            for variant, late in (("naive", False), ("late", True)):
                if variant not in variants:
                    continue
                chunks = cached.encode_chunks(
                    texts,
                    shard=f"{shard}/documents",
                    chunking=args.chunking,
                    late=late,
                    prompt=prompts["document"],
                )
                scores, best, cosines = chunk_scores(queries, chunks, len(texts))
                result = analyse(scores, gold, relative, early)
                top = scores.argmax(1)
                result["winning_chunk_index"] = dict(
                    collections.Counter(best[np.arange(len(top)), top].tolist()).most_common()
                )
                owners = chunks.owners()
                index = np.arange(len(owners)) - np.searchsorted(owners, owners)
                holds_planted = index == planted_chunk[owners]
                result["mean_cosine_by_chunk_index"] = {
                    int(k): round(float(cosines[:, (index == k) & ~holds_planted].mean()), 4)
                    for k in np.unique(index)
                    if ((index == k) & ~holds_planted).any()
                }
                centred_scores, _, _ = chunk_scores_from_cosines(
                    offset_removed(cosines, index), owners, len(texts)
                )
                result["accuracy@1_offset_removed"] = round(
                    100 * float((centred_scores.argmax(1) == gold).mean()), 1
                )
                result["planted_lift"] = round(planted_lift(cosines, owners, index, gold, planted_chunk), 4)
                run[variant] = result
            report["runs"].append(run)
            lines += [
                f"## {task_name} at {length} ({len(texts)} documents, {len(query_ids)} queries)",
                "",
                "| | accuracy@1 | median rank of relevant | top hubs (queries won, planted at) "
                "| acc@1, planted in chunk 0 | acc@1, planted later |",
                "|---|---|---|---|---|---|",
            ]
            for variant in variants:
                r = run[variant]
                hubs = ", ".join(f"{h['queries_won']} @ {h['planted_at']:.2f}" for h in r["hubs"][:3])
                lines.append(
                    f"| {variant} | {r['accuracy@1']} | {r['median_rank_of_relevant']:g} | {hubs} | "
                    f"{r['accuracy@1_planted_in_first_chunk']} ({r['queries_planted_in_first_chunk']} q) | "
                    f"{r['accuracy@1_planted_elsewhere']} |"
                )
            for variant in [v for v in variants if v != "single"]:
                cos = run[variant]["mean_cosine_by_chunk_index"]
                lines.append("")
                lines.append(
                    f"{variant}: winning chunk index {run[variant]['winning_chunk_index']}; mean query-chunk "
                    "cosine by chunk index (chunks without the planted line): "
                    + ", ".join(f"{k}: {v:.3f}" for k, v in cos.items())
                    + f"; accuracy@1 with that offset removed: {run[variant]['accuracy@1_offset_removed']}"
                    + f"; the planted sentence's lift: {run[variant]['planted_lift']:.4f}"
                )
            lines.append("")
            print("\n".join(lines[-8:]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
