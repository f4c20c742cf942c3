"""What decides nomic-embed-text-v1.5's passkey score inside its own 2k window (issue 25, item 7)?

Three runs of the same model on LEMBPasskeyRetrieval disagree wildly at 256/512/1k/2k tokens, where no
extension method acts:

* longembed (this repository, `--method truncate`):                          82 / 64 / 46 / 30
* mteb's official run of nomic-embed-text-v1.5:                             72 / 16 /  8 / 22
* the LongEmbed authors' run of nomic-embed-text-v1 (their code, F = 16): 100 / 98 / 100 / 96
  (their code, dwzhu-pku/LongEmbed src/utils.py: queries "search_query: ", documents "nomic: ")

This script varies one thing at a time on the same generated passkey data and the same vectors (read
through the embedding cache, so each variant costs only its new encodes):

* ``prompts``: the model's ``search_query: `` / ``search_document: `` (what longembed and mteb use), none,
  or one side only (what a prompt lost on one side would give);
* ``postprocess``: the vectors as sentence-transformers returns them (mean pooling, unit length), or
  mteb's v1.5 wrapper's extra step, ``F.layer_norm`` over the 768 dimensions then unit length
  (``mteb/models/nomic_models.py``: "v1.5 has a non-trainable layer norm ... the outputs are similar
  to if we just normalized");
* ``seed``: the generator's seed (the default is the one every published number here uses): how much
  one draw of names, keys and key positions moves the score, against the gap between the three runs.

Every score is accuracy@1 with its 95% bootstrap interval over queries.

    python benchmarks/nomic_gap.py --model /work/models/nomic-embed-text-v1.5 --lengths 256 512 1024 2048 \
        --out benchmarks/results/nomic_gap.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from longembed import load_encoder
from longembed.evaluation.metrics import per_query_scores
from longembed.evaluation.runner import cached_encoder
from longembed.evaluation.spec import EvalSpec
from longembed.results.intervals import bootstrap_interval
from longembed.results.paired import sign_flip_test
from longembed.tasks import RetrievalData, get_task
from longembed.tasks.passkey import DEFAULT_SEED

#: (query prompt, document prompt): the model's pair, none, and each side alone (a prompt lost on one side)
PROMPTS = {
    "model": ("search_query: ", "search_document: "),
    "none": ("", ""),
    "query_only": ("search_query: ", ""),
    "document_only": ("", "search_document: "),
    # the LongEmbed authors' code (src/utils.py, src/encoder_model.py, prefix_type "nomic"): queries get
    # "search_query: ", documents "nomic: " (not a prefix nomic was trained with)
    "longembed_code": ("search_query: ", "nomic: "),
}


def layer_norm(vectors: np.ndarray) -> np.ndarray:
    """mteb's nomic-embed-text-v1.5 post-processing: layer norm over the dimensions, then unit length."""
    tensor = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
    return F.normalize(F.layer_norm(tensor, normalized_shape=(tensor.shape[1],)), p=2, dim=1).numpy()


POSTPROCESS = {"none": lambda v: v, "layer_norm": layer_norm}


def score(queries: np.ndarray, documents: np.ndarray, data: RetrievalData) -> dict[str, float]:
    """Per-query accuracy@1 (percent) of cosine ranking."""
    per_query = per_query_scores(queries @ documents.T, list(data.queries), list(data.corpus), data.qrels)
    return {q: 100.0 * v for q, v in per_query["accuracy@1"].items()}


def run(args: argparse.Namespace) -> dict:
    encoder = load_encoder(args.model, method="truncate")
    cached = cached_encoder(encoder, EvalSpec(cache_dir=args.cache_dir, batch_size=args.batch_size, log=print))
    rows = []
    for seed, length in [(seed, length) for seed in args.seeds for length in args.lengths]:
        data = get_task("passkey", seed=seed).load(None, length)
        for prompt_name in args.prompts:
            query_prompt, document_prompt = PROMPTS[prompt_name]
            docs = cached.encode(list(data.corpus.values()), shard=f"passkey/{length}/documents",
                                 prompt=document_prompt, desc=f"{length} documents ({prompt_name} prompt)").vectors
            queries = cached.encode(list(data.queries.values()), shard=f"passkey/{length}/queries",
                                    prompt=query_prompt, desc=f"{length} queries ({prompt_name} prompt)").vectors
            for post_name, post in POSTPROCESS.items():
                per_query = score(post(queries), post(docs), data)
                rows.append(_row(seed, length, prompt_name, post_name, per_query, rows))
    return {"model": args.model, "rows": rows}


def _row(seed: int, length: int, prompts: str, post: str, per_query: dict[str, float], rows: list[dict]) -> dict:
    """One variant's score, its interval, and its paired difference from the baseline variant (the model's
    prompts, no post-processing) on the same data, with the sign-flip p-value."""
    interval = bootstrap_interval(list(per_query.values()))
    row = {"seed": seed, "length": length, "prompts": prompts, "postprocess": post,
           "accuracy@1": interval.estimate, "low": interval.low, "high": interval.high,
           "queries": len(per_query), "per_query": per_query}
    base = next((r for r in rows if (r["seed"], r["length"], r["prompts"], r["postprocess"])
                 == (seed, length, "model", "none")), None)
    if base is not None:
        differences = [per_query[q] - base["per_query"][q] for q in per_query]
        row["minus_baseline"] = float(np.mean(differences))
        row["p_vs_baseline"] = sign_flip_test(differences).p_value
    print(f"seed={seed} {length:>5} prompts={prompts:<14} post={post:<10} {interval}"
          + (f"  vs model prompts: {row['minus_baseline']:+.1f} (p={row['p_vs_baseline']:.4f})" if base else ""))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--prompts", nargs="+", choices=sorted(PROMPTS), default=list(PROMPTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[DEFAULT_SEED])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
