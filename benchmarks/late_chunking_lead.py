"""Does pooling the lead tokens into the first late chunk change needle retrieval?

    python benchmarks/late_chunking_lead.py --model /work/models/nomic-embed-text-v1.5 --method truncate \\
        --data-dir ../shared/data --length 2048 --states runs/late/needle-2048-states.npz

longembed's late chunking pools the lead (opening special tokens and the prompt's tokens) into the
chunk that holds the text's first token, and the trail into the last chunk (``longembed.chunking.late``),
so that one chunk over the whole text is exactly the document embedding.  This benchmark runs the
model once per needle document (token states saved to ``--states``: a rerun is free) and scores the
late chunks three ways: that rule, text tokens only, and lead dropped but trail kept.  If the first
chunk wins because of the lead, the three differ.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from longembed import load_encoder
from longembed.chunking.late import chunk_token_indices
from longembed.chunking.tokens import TokenEmbeddings
from longembed.encoder_protocol import retrieval_prompts
from longembed.tasks.needle import NeedleTask


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="truncate")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--states", type=Path, required=True, help="npz of the documents' token states")
    args = parser.parse_args()

    options = {} if args.max_length is None else {"max_length": args.max_length}
    encoder = load_encoder(args.model, method=args.method, **options)
    data = NeedleTask().load(args.data_dir, args.length)
    prompts = retrieval_prompts(encoder.prompts)
    doc_ids, query_ids = list(data.corpus), list(data.queries)
    texts = [data.corpus[d] for d in doc_ids]
    if args.states.exists():
        stored = np.load(args.states, allow_pickle=True)
        states, offsets = list(stored["states"]), list(stored["offsets"])
    else:
        tokens = encoder.encode_tokens(
            texts, prompt=prompts["document"], show_progress_bar=True, batch_size=4
        )
        states, offsets = [t.embeddings for t in tokens], [t.offsets for t in tokens]
        args.states.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.states, states=np.array(states, dtype=object), offsets=np.array(offsets, dtype=object))
    queries = encoder.encode(
        [data.queries[q] for q in query_ids], prompt=prompts["query"], normalize_embeddings=True
    )
    gold = np.array([doc_ids.index(next(iter(data.qrels[q]))) for q in query_ids])

    variants: dict[str, list[np.ndarray]] = {
        "lead in chunk 0 (longembed)": [],
        "text tokens only": [],
        "lead dropped": [],
    }
    for s, o, spans in zip(states, offsets, encoder.chunk_spans(texts, args.chunking), strict=True):
        view = TokenEmbeddings(embeddings=s, offsets=o, input_ids=np.zeros(len(o), dtype=np.int64))
        in_text = o[:, 0] >= 0
        first = int(np.flatnonzero(in_text)[0])
        pooled = chunk_token_indices(view, spans)
        variants["lead in chunk 0 (longembed)"].append(unit(np.stack([s[i].mean(0) for i in pooled])))
        variants["text tokens only"].append(unit(np.stack([s[i[in_text[i]]].mean(0) for i in pooled])))
        variants["lead dropped"].append(unit(np.stack([s[i[i >= first]].mean(0) for i in pooled])))
    print(
        f"needle at {args.length}: {len(texts)} documents, {len(query_ids)} queries, {args.chunking}, MaxSim"
    )
    for name, chunks in variants.items():
        cosines = [queries @ c.T for c in chunks]
        scores = np.stack([c.max(1) for c in cosines], 1)
        winner = scores.argmax(1)
        chunk_index = [int(cosines[d][k].argmax()) for k, d in enumerate(winner)]
        print(
            f"{name}: accuracy@1 {100 * np.mean(winner == gold):.1f}; top-1 documents "
            f"{collections.Counter(winner.tolist()).most_common(3)}; winning chunk index "
            f"{collections.Counter(chunk_index).most_common(3)}"
        )


if __name__ == "__main__":
    main()
