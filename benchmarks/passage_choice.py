"""Passage hit@1 under passage rules (issue 54, fourth session): which pieces, how many chunks, how large a
window and how much BM25 choose the passage that holds the answer.

    python benchmarks/passage_choice.py --model ~/.cache/longembed/models/all-MiniLM-L6-v2 \\
        --task squad=runs/squad-task/task --rules old,new --chunks 2,3,4,0 --weights 0,0.1,0.2,0.3,0.5 \\
        --windows 3x100 --cache runs/passage-cache --out runs/passage_choice_squad.json

``--task NAME=DIR`` is a task folder with located answers (``answers.jsonl``: ``benchmarks/squad_task.py``,
``benchmarks/essays/build_task.py``); ``--task qmsum=N`` is the first N QMSum meetings with located answers
(``benchmarks/passage_hits.py``'s subset).  Documents are cut into naive chunks (``--chunking``; ``--late``
for late chunks) and ranked as eval ranks them (MaxSim).  For the first answered document within the top 10
(what eval's passage metric judges) every rule of the grid chooses a passage with
:func:`~longembed.retrieval.passages.choose_passages` from the document's saved piece vectors (every piece
embedded once, as ``longembed index`` saves them), and the passage counts when it overlaps the answer.

Rules: ``--rules`` the piece rule (``new``: :func:`~longembed.retrieval.passages.document_pieces`, a line
break inside a paragraph does not end a piece; ``old``: every line break does, the rule of
``longembed-pieces/1``), ``--chunks`` the best chunks searched (0: every piece), ``--weights`` the BM25
weight for this dense-only strategy, ``--windows`` SENTENCESxWORDS.  Vectors are cached in ``--cache`` (a
rerun with other rules embeds nothing).  Tune only on SQuAD (``../shared/data/README.md``); QMSum and the
essays are held out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.chunking.spans import sentence_spans
from longembed.evaluation.passage_hits import first_answered, passage_hit_interval
from longembed.retrieval.passages import (
    WINDOW_WORDS,
    PassageQuery,
    PassageRequest,
    PassageRule,
    best_chunk_rows,
    choose_passages,
    document_pieces,
    overlaps,
)
from longembed.retrieval.pipeline import exact_dense_scores, rank_documents, unit_rows
from longembed.search.piece_vectors import encode_pieces
from longembed.tasks.base import RetrievalData
from longembed.tasks.task_dir import TaskDirTask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from passage_hits import qmsum_subset  # noqa: E402

_WORDS = re.compile(r"\S+")


def old_pieces(text: str, max_words: int = WINDOW_WORDS) -> list[tuple[int, int]]:
    """The pieces of ``longembed-pieces/1``: every line break ends a sentence, a sentence cut at
    ``max_words`` words."""
    out = []
    for s, e in sentence_spans(text):
        words = [(s + m.start(), s + m.end()) for m in _WORDS.finditer(text[s:e])]
        out += [(words[i][0], words[min(i + max_words, len(words)) - 1][1]) for i in range(0, len(words), max_words)]
    return out


PIECE_RULES = {"old": old_pieces, "new": document_pieces}


def load_set(spec: str, data_dir: Path) -> tuple[str, RetrievalData]:
    name, _, where = spec.partition("=")
    if name == "qmsum":
        return name, qmsum_subset(data_dir, int(where))
    return name, TaskDirTask(Path(where)).load()


def cached(path: Path, make):
    if path.exists():
        return dict(np.load(path, allow_pickle=False))
    made = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **made)
    return made


def measure(name: str, data: RetrievalData, encoder, args: argparse.Namespace) -> list[dict]:
    """Every rule of the grid on one set (see the module docstring)."""
    assert data.answers is not None
    prompts = encoder.retrieval_prompts()
    doc_ids, texts = list(data.corpus), list(data.corpus.values())
    key = f"{name}-{len(doc_ids)}-{args.chunking}-{'late' if args.late else 'naive'}"

    def chunks() -> dict:
        encoded = encoder.encode_chunks(texts, args.chunking, late=args.late, prompt=prompts["document"],
                                        normalize_embeddings=True)
        return {"vectors": np.concatenate([v for v, _ in encoded]).astype(np.float32),
                "spans": np.asarray([s for _, ss in encoded for s in ss], dtype=np.int64),
                "rows": np.asarray([len(v) for v, _ in encoded], dtype=np.int64)}

    began = time.perf_counter()
    chunked = cached(args.cache / f"{key}-chunks.npz", chunks)
    query_ids = list(data.queries)
    queries = cached(args.cache / f"{name}-{len(query_ids)}-queries.npz", lambda: {"vectors": unit_rows(
        encoder.encode([data.queries[q] for q in query_ids], prompt=prompts["query"], normalize_embeddings=True))})
    rows = chunked["rows"]
    firsts = np.concatenate([[0], np.cumsum(rows)[:-1]])
    dense = exact_dense_scores(queries["vectors"], chunked["vectors"], rows)
    ranked = rank_documents(doc_ids, 10, dense=dense)
    position = {d: i for i, d in enumerate(doc_ids)}
    pairs = [(qi, q, doc) for qi, (q, order) in enumerate(zip(query_ids, ranked.order, strict=True))
             if q in data.answers and (doc := first_answered([doc_ids[d] for d in order], data.answers[q]))]
    wanted = sorted({position[doc] for _, _, doc in pairs})
    print(f"{name}: {len(pairs)} queries counted, {len(wanted)} documents ({time.perf_counter() - began:.0f} s)",
          flush=True)
    saved = {}
    for rule_name in args.rules.split(","):
        def pieces(rule_name: str = rule_name) -> dict:
            rule = PIECE_RULES[rule_name]
            spans = [np.asarray(rule(texts[d]), dtype=np.int64).reshape(-1, 2) for d in wanted]
            flat = [texts[d][s:e] for d, ss in zip(wanted, spans, strict=True) for s, e in ss]
            start = time.perf_counter()
            vectors = encode_pieces(encoder, flat, prompts["document"], 128)
            print(f"{name}/{rule_name}: {len(flat)} pieces embedded ({time.perf_counter() - start:.0f} s)", flush=True)
            return {"spans": np.concatenate(spans), "counts": np.asarray([len(s) for s in spans]), "vectors": vectors}
        got = cached(args.cache / f"{key}-pieces-{rule_name}.npz", pieces)
        offsets = np.concatenate([[0], np.cumsum(got["counts"])])
        saved[rule_name] = {d: (got["spans"][offsets[i] : offsets[i + 1]], got["vectors"][offsets[i] : offsets[i + 1]])
                            for i, d in enumerate(wanted)}
    chunk_counts = [int(rows[d]) for d in wanted]
    out = []
    windows = [tuple(int(x) for x in w.split("x")) for w in args.windows.split(",")]
    grid = itertools.product(args.rules.split(","), [int(c) for c in args.chunks.split(",")],
                             [float(w) for w in args.weights.split(",")], windows)
    for rule_name, chunk_n, weight, (sentences, words) in grid:
        rule = PassageRule(sentences=sentences, words=words, chunks=chunk_n, lexical_weight=weight)
        hits, shown_words, seconds = {}, [], []
        for qi, q, doc in pairs:
            d = position[doc]
            order = best_chunk_rows(chunked["vectors"][firsts[d] : firsts[d] + rows[d]] @ queries["vectors"][qi], 0,
                                    n=rule.chunk_count(int(rows[d])))
            spans = chunked["spans"][firsts[d] : firsts[d] + rows[d]]
            request = PassageRequest(texts[d], [(int(spans[r][0]), int(spans[r][1])) for r in order],
                                     *saved[rule_name][d])
            start = time.perf_counter()
            (span,) = choose_passages(PassageQuery(data.queries[q], queries["vectors"][qi]), [request], None,
                                      lexical=False, rule=rule)
            seconds.append(time.perf_counter() - start)
            hits[q] = 100.0 if overlaps(span, data.answers[q][doc]) else 0.0
            shown_words.append(len(texts[d][span[0] : span[1]].split()))
        interval = passage_hit_interval(hits)
        row = {"set": name, "pieces": rule_name, "chunks": chunk_n, "lexical_weight": weight, "window": f"{sentences}x{words}",
               "queries": len(hits), "hit": interval.to_dict() if interval else None,
               "passage_words_median": float(np.median(shown_words)) if shown_words else None,
               "choice_ms_median": round(1000 * float(np.median(seconds)), 2) if seconds else None,
               "pieces_per_chunk": round(sum(len(saved[rule_name][d][0]) for d in wanted) / sum(chunk_counts), 2)}
        out.append(row)
        print(table_row(row), flush=True)
    return out


def table_row(r: dict) -> str:
    h = r["hit"]
    cell = "-" if h is None else f"{h['estimate']:.1f} [{h['low']:.1f}, {h['high']:.1f}]"
    return (f"| {r['set']} | {r['pieces']} | {r['chunks'] or 'all'} | {r['lexical_weight']:g} | {r['window']} | "
            f"{r['queries']} | {cell} | {r['passage_words_median']} | {r['pieces_per_chunk']} | {r['choice_ms_median']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--task", action="append", required=True, help="NAME=TASK_DIR, or qmsum=MEETINGS")
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--late", action="store_true")
    parser.add_argument("--rules", default="old,new")
    parser.add_argument("--chunks", default="2")
    parser.add_argument("--weights", default="0")
    parser.add_argument("--windows", default="3x100")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    encoder = load_encoder(args.model)
    print("| set | pieces | chunks | BM25 weight | window | queries | passage hit@1 [95%] | passage words (median) | "
          "pieces / chunk | choice ms (median) |\n|---|---|---|---|---|---:|---:|---:|---:|---:|", flush=True)
    rows = [r for spec in args.task for r in measure(*load_set(spec, args.data_dir), encoder, args)]
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
