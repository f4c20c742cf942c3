"""How much of the machine's matmul peak the plain path uses (issue: speed and scale).

    python benchmarks/bench_gemm_utilisation.py --models-dir /work/models --lengths 2048,8192

For each (model, plain method, length): one document of n tokens cut from the Paul Graham essays,
forward time (median of --repeats, after a warm-up), its FLOPs by the README's formula, and the
fraction of the peak float32 matmul rate measured on this machine in the same run (a square matmul
of --peak-size, timed between the documents so a change in load hits both alike).

FLOPs of one forward of n tokens through L layers of width d, feed-forward width f (gated
feed-forwards such as nomic's SwiGLU have three f x d matrices instead of two):

    L x [ 2n(4d^2) + 2n(k d f) + 4 n^2 d ]       k = 2 (GELU MLP) or 3 (gated)

(Q, K, V and output projections; the feed-forward; QK^T and AV).  Embeddings, norms, softmax and
pooling are left out: they are linear in n and small.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from longembed import load_encoder

#: Model types whose feed-forward is gated (SwiGLU / GEGLU: three f x d matrices).
GATED_MODEL_TYPES = {"nomic_bert", "jina_bert"}


def forward_flops(config, n: int) -> float:
    """The README's formula: matmul FLOPs of one forward of n tokens."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    k = 3 if config.model_type in GATED_MODEL_TYPES else 2
    return layers * (2 * n * 4 * d * d + 2 * n * k * d * f + 4 * n * n * d)


def peak_matmul(size: int, repeats: int = 3) -> float:
    """FLOP/s of a square float32 matmul on this machine (best of ``repeats``)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def essay_text(data_dir: Path, tokenizer, n: int) -> str:
    files = sorted((data_dir / "paul_graham_essays" / "PaulGrahamEssays").glob("*.txt"))
    ids = tokenizer(" ".join(f.read_text() for f in files), add_special_tokens=False)["input_ids"][: n - 2]
    return tokenizer.decode(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--runs", default="all-MiniLM-L6-v2:pi,nomic-embed-text-v1.5:ntk", help="model:method,...")
    parser.add_argument("--lengths", default="2048,8192")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peak-size", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    rows = []
    for run in args.runs.split(","):
        name, method = run.split(":")
        for n in (int(x) for x in args.lengths.split(",")):
            encoder = load_encoder(args.models_dir / name, method, max_length=n)
            text = essay_text(args.data_dir, encoder.tokenizer, n)
            encoder.encode([text])  # warm-up
            times, peaks = [], []
            for _ in range(args.repeats):
                peaks.append(peak_matmul(args.peak_size))
                start = time.perf_counter()
                encoder.encode([text])
                times.append(time.perf_counter() - start)
            seconds, peak = statistics.median(times), statistics.median(peaks)
            flops = forward_flops(encoder.runner.model_config, n)
            row = {"model": name, "method": method, "tokens": n, "seconds": round(seconds, 3),
                   "gflops": round(flops / 1e9, 1), "achieved_gflops_s": round(flops / seconds / 1e9, 1),
                   "peak_gflops_s": round(peak / 1e9, 1), "utilisation": round(flops / seconds / peak, 3)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| model | method | tokens | s / doc | GFLOP | GFLOP/s | matmul peak GFLOP/s | utilisation |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['method']} | {r['tokens']} | {r['seconds']} | {r['gflops']} | "
              f"{r['achieved_gflops_s']} | {r['peak_gflops_s']} | {r['utilisation']:.0%} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
