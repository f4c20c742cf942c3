"""Single vector vs naive chunking vs late chunking, same model, same run (issue: late chunking).

    python benchmarks/late_chunking.py --model /work/models/all-MiniLM-L6-v2 --method pi --max-length 4096 \\
        --data-dir ../shared/data --out runs/late/minilm-pi-4k --tasks passkey,needle --lengths 256,512,1024,2048,4096
    python benchmarks/late_chunking.py ... --tasks qmsum_passages          # the passage-level task
    python benchmarks/late_chunking.py ... --tasks qmsum_passages --qmsum-splits val   # its 35 val meetings
    python benchmarks/late_chunking.py ... --cost-only                      # seconds: one 4k pass vs 16 chunks

Each variant is one ``longembed eval`` run (the same as the command line: ``--granularity document``,
``--granularity chunks --chunking tokens:256 --naive``, ``... --late``) written to OUT/<variant>, through
the embedding cache, so a killed run resumes.  OUT/comparison.md puts the three side by side.  On a
passage task (qmsum_passages) the corpus is already passages: "single" and "naive" are the same run
(each passage embedded alone), "late" embeds each passage inside its whole meeting.

``cost``: late chunking of an N-token document is one N-token forward; naive chunking is N/256
forwards of 256 tokens.  Timed alternately on the same documents (Paul Graham essays cut to N tokens),
median of the repeats, as seconds and a ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from longembed import load_encoder
from longembed.evaluation.runner import evaluate_model
from longembed.results import RunResults
from longembed.tasks.needle import ESSAY_SUBDIR, build_haystack
from longembed.tasks.qmsum_passages import QMSumPassagesTask

VARIANTS = {
    "single": {"granularity": "document"},
    "naive": {"granularity": "chunks", "late": False},
    "late": {"granularity": "chunks", "late": True},
}


def run_variants(args: argparse.Namespace, encoder) -> dict[str, RunResults]:
    names = [t for t in args.tasks.split(",") if t]
    tasks = [
        QMSumPassagesTask(splits=args.qmsum_splits.split(",")) if name == "qmsum_passages" and args.qmsum_splits
        else name
        for name in names
    ]
    lengths = [int(n) for n in args.lengths.split(",")] if args.lengths else None
    runs = {}
    for name, options in VARIANTS.items():
        if name == "naive" and names == ["qmsum_passages"]:
            continue  # the same run as "single" on a passage task
        print(f"== {name}", flush=True)
        runs[name] = evaluate_model(
            encoder, tasks, data_dir=args.data_dir, lengths=lengths, output_dir=args.out / name,
            batch_size=args.batch_size, chunking=args.chunking, cache_dir=args.cache_dir, **options,
        )
    return runs


def comparison(runs: dict[str, RunResults]) -> str:
    names = list(runs)
    first = runs[names[0]]
    lines = ["| task | length | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for task, result in first.tasks.items():
        rows = [(length, "") for length in (result.by_length or {})] or [(None, "")]
        for length, _ in rows:
            cells = []
            for name in names:
                other = runs[name].tasks.get(task)
                value = None if other is None else (other.score if length is None else other.by_length.get(length))
                cells.append("-" if value is None else f"{value:.1f}")
            lines.append(f"| {task} | {length or 'all'} | " + " | ".join(cells) + " |")
        if result.by_length:
            cells = [f"{runs[n].tasks[task].score:.1f}" if task in runs[n].tasks else "-" for n in names]
            lines.append(f"| {task} | mean | " + " | ".join(cells) + " |")
    times = [f"{sum(t.encode_time_s for t in runs[n].tasks.values()):.0f}" for n in names]
    lines.append("| encode seconds | | " + " | ".join(times) + " |")
    return "\n".join(lines) + "\n"


def cost(encoder, data_dir: Path, length: int, documents: int, repeats: int) -> dict:
    tokenizer = encoder.tokenizer
    ids = tokenizer(build_haystack(data_dir / ESSAY_SUBDIR)[: 40 * length], add_special_tokens=False)["input_ids"]
    size = length - 2
    texts = [tokenizer.decode(ids[i * size : (i + 1) * size]) for i in range(documents)]
    timings = {"late": [], "naive": []}
    encoder.encode_chunks(texts[:1], "tokens:256")  # warm-up
    for _ in range(repeats):
        for late in (True, False):
            began = time.perf_counter()
            encoder.encode_chunks(texts, "tokens:256", late=late)
            timings["late" if late else "naive"].append((time.perf_counter() - began) / documents)
    late, naive = statistics.median(timings["late"]), statistics.median(timings["naive"])
    return {"tokens": length, "documents": documents, "repeats": repeats, "late_s_per_doc": round(late, 3),
            "naive_s_per_doc": round(naive, 3), "late_over_naive": round(late / naive, 3), "timings": timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default=None)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", default="passkey,needle")
    parser.add_argument("--lengths", default="256,512,1024,2048,4096")
    parser.add_argument("--chunking", default="tokens:256")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--cost-only", action="store_true")
    parser.add_argument("--cost-length", type=int, default=4096)
    parser.add_argument("--no-cost", action="store_true", help="skip the cost measurement")
    parser.add_argument("--qmsum-splits", default=None,
                        help="qmsum_passages on these QMSum splits only, e.g. 'val' (35 of the 197 meetings)")
    args = parser.parse_args()
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length)
    print(repr(encoder))
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.cost_only:
        runs = run_variants(args, encoder)
        table = comparison(runs)
        name = "comparison-" + args.tasks.replace(",", "-") + ".md"
        (args.out / name).write_text(table)
        print(table)
    if args.no_cost:
        return
    result = cost(encoder, args.data_dir, args.cost_length, documents=4, repeats=3)
    (args.out / "cost.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "timings"}))


if __name__ == "__main__":
    main()
