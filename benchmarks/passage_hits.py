"""Passage hit@1, old choice vs new (issue 54 item 1): is the answer in the passage shown for the first
correctly ranked document?

    python benchmarks/passage_hits.py --model ~/.cache/longembed/models/all-MiniLM-L6-v2 \\
        --data-dir ../shared/data --meetings 12 --needle-lengths 1024,4096 --out runs/passage_hits.json

Documents with located answers (``RetrievalData.answers``): QMSum meetings (the annotated
``relevant_text_span`` turns; the queries are the task's, LongEmbed's answer summaries) and needle
documents (the planted sentence).  Documents are cut into chunks (``--chunking``, naive or ``--late``)
and ranked as eval ranks them (MaxSim, :func:`~longembed.retrieval.pipeline.rank_documents`).  For the
first answered document within the top 10 the benchmark compares the two passages a search could show:

* old: the chunk that gave the document its score (what ``search`` showed before issue 54);
* new: :func:`~longembed.retrieval.passages.choose_passages` over the windows of the sentences of the
  best chunks (``PASSAGE_RULE``: 4), a window scored by the word-weighted mean of its sentences' vectors
  mixed with its BM25 (``benchmarks/passage_choice.py`` compares the rules), read from the
  pieces' vectors as ``longembed index`` saves them (every document's pieces embedded once, up front:
  :func:`~longembed.search.piece_vectors.document_piece_vectors`, the build's encode call), as search does;
* centre: the rule tried against it: the best single sentence (by its own vector), shown with its
  neighbours (as many as fit in 3 sentences / 100 words).

Pieces: how many the documents have (what an index saves) and their tokens per document; the choice's
milliseconds are the scoring alone (no model call: the search path with saved piece vectors).

Nothing here is trained; the data are evaluation data only.  Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.passage_hits import passage_hit_interval, passage_hits
from longembed.retrieval.passages import (
    WINDOW_SENTENCES,
    WINDOW_WORDS,
    PassageQuery,
    PassageRequest,
    best_chunk_rows,
    choose_passages,
    covered_pieces,
)
from longembed.retrieval.pipeline import exact_dense_scores, rank_documents, unit_rows
from longembed.search.piece_vectors import document_piece_vectors
from longembed.tasks.base import RetrievalData
from longembed.tasks.needle import NeedleTask
from longembed.tasks.qmsum import load_qmsum


def qmsum_subset(data_dir: Path, meetings: int) -> RetrievalData:
    """The first ``meetings`` meetings (LongEmbed's order) that have located answers, with their queries."""
    full = load_qmsum(data_dir / "qmsum" / "data" / "ALL")
    assert full.answers is not None
    answered = {d for by_doc in full.answers.values() for d in by_doc}
    kept = [d for d in full.corpus if d in answered][:meetings]
    queries = {q: full.queries[q] for q, by_doc in full.answers.items() if set(by_doc) <= set(kept)}
    return RetrievalData(corpus={d: full.corpus[d] for d in kept}, queries=queries,
                         qrels={q: full.qrels[q] for q in queries},
                         answers={q: full.answers[q] for q in queries}).validate()


def first_queries(data: RetrievalData, n: int) -> RetrievalData:
    """The first ``n`` queries, their answered documents and as many other documents (distractors)."""
    assert data.answers is not None
    queries = list(data.answers)[:n]
    answered = [d for q in queries for d in data.answers[q]]
    others = [d for d in data.corpus if d not in answered][: len(answered)]
    kept = set(answered) | set(others)
    return RetrievalData(corpus={d: t for d, t in data.corpus.items() if d in kept},
                         queries={q: data.queries[q] for q in queries}, qrels={q: data.qrels[q] for q in queries},
                         answers={q: data.answers[q] for q in queries}).validate()


def measure(name: str, data: RetrievalData, encoder, chunking: str, late: bool) -> dict:
    began = time.perf_counter()
    prompts = encoder.retrieval_prompts()
    doc_ids, texts = list(data.corpus), list(data.corpus.values())
    encoded = encoder.encode_chunks(texts, chunking, late=late, prompt=prompts["document"], normalize_embeddings=True)
    print(f"{name}: {len(texts)} documents embedded ({time.perf_counter() - began:.0f} s)", flush=True)
    vectors = np.concatenate([v for v, _ in encoded]).astype(np.float32)
    spans = [s for _, ss in encoded for s in ss]
    rows = np.asarray([len(v) for v, _ in encoded])
    firsts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    query_ids = list(data.queries)
    query_vectors = unit_rows(encoder.encode([data.queries[q] for q in query_ids], prompt=prompts["query"],
                                             normalize_embeddings=True))
    dense = exact_dense_scores(query_vectors, vectors, rows)
    ranked = rank_documents(doc_ids, 10, dense=dense)
    ranking = {q: [doc_ids[d] for d in order] for q, order in zip(query_ids, ranked.order, strict=True)}
    position = {d: i for i, d in enumerate(doc_ids)}
    row_of = {q: i for i, q in enumerate(query_ids)}

    def old(qid: str, doc_id: str) -> tuple[int, int]:
        return spans[int(dense.best_chunk[row_of[qid], position[doc_id]])]

    # the pieces' vectors as `longembed index` saves them (longembed.search.piece_vectors), once per document
    began_pieces = time.perf_counter()
    saved = document_piece_vectors(encoder, texts, prompts["document"])
    pieces_seconds = time.perf_counter() - began_pieces
    print(f"{name}: {sum(len(s) for s, _ in saved)} pieces embedded ({pieces_seconds:.0f} s)", flush=True)
    choice_seconds: list[float] = []
    chunk_tokens: list[int] = []
    count = lambda ts: sum(len(ids) for ids in encoder.tokenizer(ts)["input_ids"])  # noqa: E731

    def refuse(_: list[str]) -> np.ndarray:
        raise AssertionError("a piece was embedded at search time")

    def request(qid: str, doc_id: str) -> tuple[PassageRequest, np.ndarray]:
        d, vector = position[doc_id], query_vectors[row_of[qid]]
        best = best_chunk_rows(vectors[firsts[d] : firsts[d] + rows[d]] @ vector, int(firsts[d]))
        return PassageRequest(texts[d], [spans[r] for r in best], *saved[d]), vector

    @functools.cache
    def new(qid: str, doc_id: str) -> tuple[int, int]:
        passage, vector = request(qid, doc_id)
        start = time.perf_counter()
        (span,) = choose_passages(PassageQuery(data.queries[qid], vector), [passage], refuse, lexical=False)
        choice_seconds.append(time.perf_counter() - start)
        chunk_tokens.append(count([passage.text[s:e] for s, e in passage.chunks]))
        return span

    def centre(qid: str, doc_id: str) -> tuple[int, int]:
        passage, vector = request(qid, doc_id)
        assert passage.pieces is not None and passage.vectors is not None
        runs = [[(int(passage.pieces[i][0]), int(passage.pieces[i][1])) for i in run]
                for run in covered_pieces(passage.pieces, passage.chunks)]
        row = {(int(s), int(e)): i for i, (s, e) in enumerate(passage.pieces)}
        scored = [(float(passage.vectors[row[p]] @ vector), -r, -i) for r, run in enumerate(runs)
                  for i, p in enumerate(run)]
        _, r, i = max(scored)
        return around(passage.text, runs[-r], -i)

    assert data.answers is not None
    print(f"{name}: {len(query_ids)} queries ranked ({time.perf_counter() - began:.0f} s)", flush=True)
    hits = {"old": passage_hits(data.answers, ranking, old), "new": passage_hits(data.answers, ranking, new),
            "centre": passage_hits(data.answers, ranking, centre)}
    shown_words = [len(data.corpus[d][slice(*new(q, d))].split()) for q, d in
                   ((q, next(x for x in ranking[q][:10] if x in data.answers[q])) for q in hits["new"])]
    top1 = sum(1 for q in query_ids if ranking[q] and ranking[q][0] in data.answers.get(q, {}))
    return {
        "set": name, "documents": len(doc_ids), "queries": len(query_ids), "answered_in_top10": len(hits["new"]),
        "answered_at_1": top1,
        "old": passage_hit_interval(hits["old"]).to_dict() if hits["old"] else None,
        "new": passage_hit_interval(hits["new"]).to_dict() if hits["new"] else None,
        "centre": passage_hit_interval(hits["centre"]).to_dict() if hits["centre"] else None,
        "new_passage_words_median": float(np.median(shown_words)) if shown_words else None,
        "pieces_saved": sum(len(s) for s, _ in saved),
        "piece_tokens_per_document_median": float(np.median([count([t[a:b] for a, b in s]) if len(s) else 0
                                                            for t, (s, _) in zip(texts, saved, strict=True)])),
        "pieces_seconds": round(pieces_seconds, 1),
        "best_chunk_tokens_per_document_median": float(np.median(chunk_tokens)) if chunk_tokens else None,
        "choice_ms_per_document_median": round(1000 * float(np.median(choice_seconds)), 2) if choice_seconds else None,
        "seconds": round(time.perf_counter() - began, 1),
    }


def around(text: str, run: list[tuple[int, int]], best: int) -> tuple[int, int]:
    """The piece ``best`` of ``run`` with its neighbours, one before then one after, while they fit."""
    first = last = best
    words = len(text[slice(*run[best])].split())
    for step in range(2 * WINDOW_SENTENCES):
        j = first - 1 if step % 2 == 0 else last + 1
        if last - first + 1 >= WINDOW_SENTENCES or not 0 <= j < len(run):
            continue
        more = len(text[slice(*run[j])].split())
        if words + more <= WINDOW_WORDS:
            first, last, words = min(first, j), max(last, j), words + more
    return run[first][0], run[last][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--meetings", type=int, default=12, help="QMSum meetings (0: none)")
    parser.add_argument("--needle-lengths", default="4096", help="comma-separated needle lengths ('': none)")
    parser.add_argument("--needle-queries", type=int, default=0,
                        help="only the first N needle queries, their documents and N distractors (0: all 50)")
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--late", action="store_true", help="late chunking (default: naive chunks)")
    parser.add_argument("--max-length", type=int, default=None, help="the encoder's max length (late chunking)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    options = {} if args.max_length is None else {"max_length": args.max_length}
    encoder = load_encoder(args.model, **options)
    sets = []
    if args.meetings:
        sets.append(("qmsum", qmsum_subset(args.data_dir, args.meetings)))
    for length in [int(x) for x in args.needle_lengths.split(",") if x]:
        needles = NeedleTask().load(args.data_dir, length)
        sets.append((f"needle/{length}", first_queries(needles, args.needle_queries) if args.needle_queries else needles))
    rows = [measure(name, data, encoder, args.chunking, args.late) for name, data in sets]
    print("| set | documents | queries | answered doc in top 10 | old passage hit@1 | new passage hit@1 | "
          "centre passage hit@1 | new passage words | pieces saved | piece tokens / document | "
          "choice ms / document | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cell = lambda i: "-" if i is None else f"{i['estimate']:.1f} [{i['low']:.1f}, {i['high']:.1f}]"  # noqa: E731
        print(f"| {r['set']} | {r['documents']} | {r['queries']} | {r['answered_in_top10']} | {cell(r['old'])} | "
              f"{cell(r['new'])} | {cell(r['centre'])} | {r['new_passage_words_median']} | "
              f"{r['pieces_saved']} | {r['piece_tokens_per_document_median']} | "
              f"{r['choice_ms_per_document_median']} | {r['seconds']} |")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
