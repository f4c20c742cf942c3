"""Reduced precision on CPU: bfloat16 and int8 against float32, speed, vectors and benchmark scores.

For one model and method, three encoders in one process (``float32``, ``bfloat16`` through
``dtype``, ``int8`` through ``quantization``):

1. Speed: one document of exactly n tokens (cut from the Paul Graham essays) embedded by each in
   turn, round after round; each precision's median seconds and the median over rounds of its
   per-round ratio to float32 (load changes between rounds hit both sides alike).
2. Vectors: the max abs difference and the minimum cosine of unit vectors against float32, over
   those documents.
3. Scores: passkey and needle at the given lengths (accuracy@1, percent), every precision through
   the same benchmark code, with the embedding cache keeping precisions apart.

``--compare-torch-ao`` adds, to the speed and vector rows only, PyTorch's older dynamic int8
(``torch.ao.quantization.quantize_dynamic``, activations scaled per tensor), which longembed does
not use: its rows show why (``longembed.quantization``).

    python benchmarks/bench_precision.py --model /work/models/all-MiniLM-L6-v2 --method pi \\
        --max-length 2048 --speed-lengths 2048 --score-lengths 1024,2048 --data-dir ../shared/data \\
        --out benchmarks/results/precision_minilm.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from longembed import load_encoder
from longembed.evaluation.runner import evaluate_model
from longembed.tasks.needle import ESSAY_SUBDIR, build_haystack

PRECISIONS = {"float32": {}, "bfloat16": {"dtype": "bfloat16"}, "int8": {"quantization": "int8"}}
# torch.ao's dynamic int8 (comparison only): its default per-tensor weights, and per-channel weights
TORCH_AO = {
    "torch.ao int8": {torch.nn.Linear},
    "torch.ao int8 per-channel": {torch.nn.Linear: per_channel_dynamic_qconfig},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--speed-lengths", default="2048", help="document lengths for the timings")
    parser.add_argument("--score-lengths", default="1024,2048", help="passkey/needle lengths ('' for none)")
    parser.add_argument("--tasks", default="passkey,needle")
    parser.add_argument("--repeats", type=int, default=4, help="timing rounds over the precisions")
    parser.add_argument("--documents", type=int, default=4, help="documents per length for the vectors")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--compare-torch-ao", action="store_true", help="also time torch.ao's dynamic int8")
    parser.add_argument("--out", type=Path, default=None, help="also write the measurements as JSON")
    args = parser.parse_args()
    torch.set_grad_enabled(False)

    encoders = {
        name: load_encoder(args.model, method=args.method, max_length=args.max_length, **options)
        for name, options in PRECISIONS.items()
    }
    speed_encoders = dict(encoders)
    if args.compare_torch_ao:
        for name, spec in TORCH_AO.items():
            encoder = load_encoder(args.model, method=args.method, max_length=args.max_length)
            quantize_dynamic(encoder.model, spec, dtype=torch.qint8, inplace=True)
            speed_encoders[name] = encoder
    report: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "speed": [], "scores": {}}
    haystack = build_haystack(args.data_dir / ESSAY_SUBDIR)
    for n in [int(x) for x in args.speed_lengths.split(",") if x]:
        texts = documents(encoders["float32"].tokenizer, haystack, n, args.documents)
        vectors = {name: e.encode(texts, normalize_embeddings=True) for name, e in speed_encoders.items()}
        times = time_rounds(speed_encoders, texts[0], args.repeats)
        for name in speed_encoders:
            row = {
                "tokens": n,
                "precision": name,
                "median_s": round(statistics.median(times[name]), 3),
                "runs_s": [round(t, 3) for t in times[name]],
                "x_float32": round(statistics.median(a / b for a, b in zip(times[name], times["float32"], strict=True)), 3),
                "max_abs_diff": float(np.abs(vectors[name] - vectors["float32"]).max()),
                "min_cosine": float((vectors[name] * vectors["float32"]).sum(1).min()),
            }
            report["speed"].append(row)
            print(row, flush=True)
    lengths = [int(x) for x in args.score_lengths.split(",") if x]
    if lengths:
        for name, encoder in encoders.items():
            run = evaluate_model(
                encoder, args.tasks.split(","), data_dir=args.data_dir, lengths=lengths, cache_dir=args.cache_dir
            )
            report["scores"][name] = {task: r.by_length for task, r in run.tasks.items()}
            print(name, report["scores"][name], flush=True)
    print(table(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))


def documents(tokenizer, haystack: str, n: int, count: int) -> list[str]:
    """``count`` consecutive pieces of the essays, each exactly n tokens with the special tokens."""
    ids = tokenizer(haystack[: 8 * n * (count + 1)], add_special_tokens=False)["input_ids"]
    size = n - 2
    texts = [tokenizer.decode(ids[i * size : (i + 1) * size]) for i in range(count)]
    got = [len(tokenizer(t)["input_ids"]) for t in texts]
    if any(g > n for g in got):
        raise RuntimeError(f"documents of {got} tokens, longer than {n}")
    return texts


def time_rounds(encoders: dict, text: str, repeats: int) -> dict[str, list[float]]:
    for encoder in encoders.values():
        encoder.encode([text])  # warm-up: first-call costs out of the timings
    times: dict[str, list[float]] = {name: [] for name in encoders}
    for _ in range(repeats):
        for name, encoder in encoders.items():
            start = time.perf_counter()
            encoder.encode([text])
            times[name].append(time.perf_counter() - start)
    return times


def table(report: dict) -> str:
    lines = ["| tokens | precision | median s | x float32 | max abs diff | min cosine |", "|---|---|---|---|---|---|"]
    for r in report["speed"]:
        lines.append(
            f"| {r['tokens']} | {r['precision']} | {r['median_s']:.2f} | {r['x_float32']:.3f} | "
            f"{r['max_abs_diff']:.2e} | {r['min_cosine']:.5f} |"
        )
    if report["scores"]:
        names = list(report["scores"])
        lines += ["", "| task | length | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
        first = report["scores"][names[0]]
        for task, by_length in first.items():
            for length in by_length:
                cells = [f"{report['scores'][n][task][length]:.1f}" for n in names]
                lines.append(f"| {task} | {length} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
