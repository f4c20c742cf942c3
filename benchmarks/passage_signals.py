"""Passage choice signals (issue 54, fifth session): for every counted query, each candidate window's scores
by several signals, saved so that rules mixing them are compared without running the model again.

    python benchmarks/passage_signals.py --model ~/.cache/longembed/models/all-MiniLM-L6-v2 \\
        --task squad=/work/bench/p5/squad-task/task --cache /work/bench/p5/cache --out /work/bench/p5/squad.pkl

Documents are cut into naive chunks (``tokens:256``), each chunk's text run alone through the model once with
its token states kept (:meth:`~longembed.LongContextEncoder.encode_tokens`); a chunk's vector is the mean of
its token states (what ``encode`` gives it), and documents are ranked as eval ranks them (MaxSim).  For the
first answered document within the top 10, the windows of :func:`~longembed.retrieval.passages.choose_passages`
around its best chunks, each with: ``separate`` (the cosine of the word-weighted mean of its pieces' vectors,
each piece embedded as its own text: today's rule), ``late`` (the cosine of the mean of the window's token
states taken from its chunks' forward passes: pieces "late chunked"), ``bm25`` (the window's BM25 among the
document's windows), ``maxsim`` (the mean over the query's tokens of their best cosine with a token of the
window, the model's own token states) and ``chunk`` (the best cosine of a chunk the window overlaps), and
whether it overlaps the answer.  ``passage_rules.py`` scores rules over these files.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.evaluation.passage_hits import first_answered
from longembed.retrieval.passages import (
    PassageRequest,
    PassageRule,
    _candidates,
    best_chunk_rows,
    document_pieces,
    overlaps,
    window_bm25,
)
from longembed.retrieval.pipeline import exact_dense_scores, rank_documents, unit_rows
from longembed.search.piece_vectors import encode_pieces

sys.path.insert(0, str(Path(__file__).resolve().parent))
from passage_choice import cached, load_set  # noqa: E402


def token_states(encoder, texts: list[str], chunking: str, prompt: str) -> list[dict]:
    """Per document: its chunks' spans, and every chunk token's state (float16), global character offsets
    ((-1, -1) for special tokens) and chunk number, from one forward pass per chunk."""
    spans = encoder.chunk_spans(texts, chunking)
    flat = [t[s:e] for t, ss in zip(texts, spans, strict=True) for s, e in ss]
    started = time.perf_counter()
    tokens = encoder.encode_tokens(flat, batch_size=32, prompt=prompt)
    print(f"{len(flat)} chunks run for their token states ({time.perf_counter() - started:.0f} s)", flush=True)
    out, k = [], 0
    for ss in spans:
        states, offsets, chunk = [], [], []
        for c, (s, _) in enumerate(ss):
            t = tokens[k]
            k += 1
            shifted = np.where(t.offsets >= 0, t.offsets + s, -1)
            states.append(t.embeddings.astype(np.float16))
            offsets.append(shifted)
            chunk.append(np.full(len(t.offsets), c))
        out.append({"spans": np.asarray(ss, dtype=np.int64), "states": np.concatenate(states),
                    "offsets": np.concatenate(offsets), "chunk": np.concatenate(chunk)})
    return out


def chunk_vectors(doc: dict) -> np.ndarray:
    sums = np.zeros((len(doc["spans"]), doc["states"].shape[1]))
    np.add.at(sums, doc["chunk"], doc["states"].astype(np.float64))
    return unit_rows(sums / np.bincount(doc["chunk"])[:, None])


def piece_token_ranges(doc: dict, pieces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's text tokens, as a (start, stop) range into the document's text tokens (sorted by offset)."""
    text = doc["offsets"][:, 0] >= 0
    starts = doc["offsets"][text, 0]
    ends = doc["offsets"][text, 1]
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    lo = np.searchsorted(ends, pieces[:, 0], side="right")
    hi = np.searchsorted(starts, pieces[:, 1], side="left")
    return np.stack([lo, hi], axis=1), np.flatnonzero(text)[order]


def measure(name: str, data, encoder, args: argparse.Namespace) -> dict:
    prompts = encoder.retrieval_prompts()
    doc_ids, texts = list(data.corpus), list(data.corpus.values())
    key = args.cache / f"{name}-{len(doc_ids)}-{args.chunking}"
    began = time.perf_counter()
    path = Path(f"{key}-tokens.pkl")
    if path.exists():
        docs = pickle.loads(path.read_bytes())
    else:
        docs = token_states(encoder, texts, args.chunking, prompts["document"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(docs))
    build_s = time.perf_counter() - began
    query_ids = list(data.queries)
    qpath = Path(f"{key}-queries{args.query_prompt or ''}.pkl")
    if qpath.exists():
        qtokens = pickle.loads(qpath.read_bytes())
    else:
        qtokens = encoder.encode_tokens([data.queries[q] for q in query_ids], prompt=args.query_prompt or prompts["query"])
        qpath.write_bytes(pickle.dumps(qtokens))
    qvectors = unit_rows(np.stack([t.embeddings.mean(axis=0) for t in qtokens]))
    cvectors = [chunk_vectors(d) for d in docs]
    rows = np.asarray([len(v) for v in cvectors])
    dense = exact_dense_scores(qvectors, np.concatenate(cvectors).astype(np.float32), rows)
    ranked = rank_documents(doc_ids, 10, dense=dense)
    position = {d: i for i, d in enumerate(doc_ids)}
    pairs = [(qi, q, position[doc]) for qi, (q, order) in enumerate(zip(query_ids, ranked.order, strict=True))
             if q in data.answers and (doc := first_answered([doc_ids[d] for d in order], data.answers[q]))]
    wanted = sorted({d for _, _, d in pairs})
    pieces = {d: np.asarray(document_pieces(texts[d]), dtype=np.int64).reshape(-1, 2) for d in wanted}

    def separate() -> dict:
        flat = [texts[d][s:e] for d in wanted for s, e in pieces[d]]
        started = time.perf_counter()
        vectors = encode_pieces(encoder, flat, prompts["document"], 128)
        return {"vectors": vectors, "seconds": np.asarray(time.perf_counter() - started)}
    sep = cached(Path(f"{key}-separate.npz"), separate)
    offsets = np.concatenate([[0], np.cumsum([len(pieces[d]) for d in wanted])])
    sep_by_doc = {d: sep["vectors"][offsets[i] : offsets[i + 1]] for i, d in enumerate(wanted)}
    print(f"{name}: {len(pairs)} queries counted, {len(wanted)} documents; chunks' token states "
          f"{build_s:.0f} s (cached: 0), separate pieces {float(sep['seconds']):.0f} s", flush=True)
    late_cache = {}
    for d in wanted:
        ranges, text_rows = piece_token_ranges(docs[d], pieces[d])
        states = docs[d]["states"][text_rows].astype(np.float32)
        prefix = np.concatenate([np.zeros((1, states.shape[1])), np.cumsum(states, axis=0, dtype=np.float64)])
        late_cache[d] = (ranges, states, prefix)
    records = []
    windows = [tuple(int(x) for x in w.split("x")) for w in args.windows.split(",")]
    for qi, q, d in pairs:
        text = texts[d]
        qstates = qtokens[qi]
        qtext = unit_rows(qstates.embeddings[qstates.offsets[:, 0] >= 0].astype(np.float64))
        chunk_cos = cvectors[d] @ qvectors[qi]
        order = best_chunk_rows(chunk_cos, 0, n=min(args.chunks, len(chunk_cos)) if args.chunks else len(chunk_cos))
        spans = docs[d]["spans"]
        request = PassageRequest(text, [(int(spans[r][0]), int(spans[r][1])) for r in order], pieces[d], sep_by_doc[d])
        ranges, states, prefix = late_cache[d]
        unit_states = unit_rows(states.astype(np.float64))
        record = {"set": name, "query": q, "doc": doc_ids[d], "by_window": {}}
        for sentences, words in windows:
            c = _candidates(request, PassageRule(sentences=sentences, words=words, chunks=args.chunks))
            if not c.windows:
                continue
            wspans = [(c.pieces[a][0], c.pieces[b][1]) for a, b in c.windows]
            rows_ = np.asarray(c.rows)
            wcounts = np.asarray([len(text[s:e].split()) for s, e in c.pieces], dtype=np.float64)
            sv = sep_by_doc[d][rows_].astype(np.float64) * wcounts[:, None]
            sep_scores = np.asarray([unit_rows(sv[a : b + 1].sum(axis=0, keepdims=True))[0] @ qvectors[qi]
                                     for a, b in c.windows])
            late, maxsim = [], []
            for a, b in c.windows:
                lo, hi = ranges[rows_[a]][0], ranges[rows_[b]][1]
                if hi <= lo:
                    late.append(-1.0)
                    maxsim.append(0.0)
                    continue
                late.append(float(unit_rows((prefix[hi] - prefix[lo])[None])[0] @ qvectors[qi]))
                maxsim.append(float((qtext @ unit_states[lo:hi].T).max(axis=1).mean()))
            bm25 = window_bm25(data.queries[q], text, c.pieces, c.windows)
            chunk_prior = np.asarray([max((chunk_cos[k] for k, (s, e) in enumerate(spans) if s < we and ws < e),
                                          default=-1.0) for ws, we in wspans])
            record["by_window"][f"{sentences}x{words}"] = {
                "spans": wspans, "hit": [overlaps(w, data.answers[q][doc_ids[d]]) for w in wspans],
                "words": [len(text[s:e].split()) for s, e in wspans],
                "separate": sep_scores, "late": np.asarray(late), "bm25": np.asarray(bm25),
                "maxsim": np.asarray(maxsim), "chunk": chunk_prior}
        records.append(record)
    return {"records": records, "queries_counted": len(pairs), "documents": len(wanted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--task", required=True, help="NAME=TASK_DIR, or qmsum=MEETINGS")
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--windows", default="3x100,2x100,1x100")
    parser.add_argument("--query-prompt", default=None)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    encoder = load_encoder(args.model)
    name, data = load_set(args.task, args.data_dir)
    result = measure(name, data, encoder, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps(result))
    print(f"wrote {args.out}: {len(result['records'])} records", flush=True)


if __name__ == "__main__":
    main()
