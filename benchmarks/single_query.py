"""Warm single-query search (issue 54, item 3): one question at a time on an open index, with torch's
default threads and with ``OMP_NUM_THREADS=1``, for one or more source trees (before/after).

The script builds (once, in ``--work-dir``, with ``src/``) a MiniLM index of naive 256-token chunks over
the Paul Graham essays (``--data-dir``), then runs, round by round and alternated, one process per
(tree, threads) pair: it opens the index, warms up with 5 searches, then times ``--searches`` searches
(k=10) of distinct questions, one at a time, and prints the p50/p99 in milliseconds.  The goal: at
default settings within 1.5x of the one-thread figure.  Each tree is timed with its own default passage
choice, and trees that offer it also with ``passages="chunk"`` (the scoring chunk, no re-scoring); the
new tree also with its saved piece vectors set aside (``{"pieces": "unsaved"}``: the passage choice
embeds its results' sentences, as for an index built with ``--no-passage-vectors``), default threads
only.  ``--index`` times an index already built instead (e.g. a few essays, under load).  ``--server`` times
the same through ``longembed serve --index`` instead: one server process per (tree, threads) pair, the
searches sent one at a time to ``/search`` over loopback (the time a client waits, HTTP included).

Run it alone on the machine (other work inflates every number):

    python benchmarks/single_query.py --data-dir ../shared/data --src before=/work/main/src \\
        --output benchmarks/results/single_query.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from serve_load import free_port, wait_until_healthy

QUESTIONS = [
    "how to start a startup", "why do people procrastinate", "what makes a good programming language",
    "how investors decide", "the value of wealth", "essays about writing", "how to do great work",
    "what is taste", "why cities matter", "the hardest lessons for startups", "how to get new ideas",
    "what happened at Viaweb", "the role of luck", "how to be an expert", "lisp and macros",
    "design and research", "why nerds are unpopular", "how to raise money", "the age of the essay",
    "what you can't say",
]

PROBE = """
import json, statistics, sys, time
from longembed.search import open_index
index = open_index(sys.argv[1])
questions = json.loads(sys.argv[2]); searches = int(sys.argv[3]); options = json.loads(sys.argv[4])
if options.pop("pieces", None) == "unsaved":
    index._data.pieces = None  # the passage choice embeds its results' sentences
for q in questions[:5]:
    index.search(q, k=10, **options)
times = []
for i in range(searches):
    start = time.perf_counter()
    index.search(questions[i % len(questions)] + f" {i}", k=10, **options)
    times.append((time.perf_counter() - start) * 1000)
times.sort()
print(json.dumps({"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(0.99 * len(times)))]}))
"""


def build(work: Path, data_dir: Path) -> Path:
    """The benchmark's index (built once): MiniLM, naive 256-token chunks of the essays."""
    index = work / "essays-index"
    if not index.exists():
        essays = data_dir / "paul_graham_essays" / "PaulGrahamEssays"
        subprocess.run([sys.executable, "-m", "longembed.cli.main", "index", str(essays), "--index", str(index),
                        "--granularity", "chunks", "--chunking", "tokens:256", "--naive", "--no-estimate"],
                       check=True, env={**os.environ, "PYTHONPATH": str(Path("src").resolve())})
    return index


def probe(index: Path, source: str, threads: int | None, searches: int, options: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", PROBE, str(index), json.dumps(QUESTIONS), str(searches),
                          json.dumps(options)], check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def probe_server(index: Path, source: str, threads: int | None, searches: int, options: dict) -> dict:
    """:func:`probe` through ``longembed serve --index``: the time each ``/search`` takes for a client."""
    env = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
    env.pop("OMP_NUM_THREADS", None)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "longembed.cli.main", "serve", "--index", str(index),
                               "--port", str(port), "--no-auth"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, server)
        with httpx.Client(base_url=base, timeout=120) as client:
            for q in QUESTIONS[:5]:
                client.post("/search", json={"query": q, "k": 10, **options}).raise_for_status()
            times = []
            for i in range(searches):
                start = time.perf_counter()
                client.post("/search", json={"query": QUESTIONS[i % len(QUESTIONS)] + f" {i}", "k": 10,
                                             **options}).raise_for_status()
                times.append((time.perf_counter() - start) * 1000)
    finally:
        server.terminate()
        server.wait(60)
    times.sort()
    return {"p50": statistics.median(times), "p99": times[min(len(times) - 1, int(0.99 * len(times)))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--src", action="append", default=[], metavar="LABEL=PATH", help="another tree (repeat)")
    parser.add_argument("--searches", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--index", type=Path, default=None, help="an index already built (default: build the essays')")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--server", action="store_true", help="time /search of `longembed serve --index`")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="single-query-"))
    work.mkdir(parents=True, exist_ok=True)
    index = args.index or build(work, args.data_dir)
    trees = [("new", "src"), *(tuple(s.split("=", 1)) for s in args.src)]
    cases = [(label, path, threads, options) for label, path in trees for threads in (None, 1)
             for options in ([{}, {"passages": "chunk"}] if label == "new" else [{}])]
    if not args.server:
        cases.append(("new", "src", None, {"pieces": "unsaved"}))
    timer = probe_server if args.server else probe
    results: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        for label, path, threads, options in (cases if round_ % 2 == 0 else cases[::-1]):
            key = f"{label} threads={'default' if threads is None else threads} {json.dumps(options)}"
            results.setdefault(key, []).append(timer(index, path, threads, args.searches, options))
            print(key, results[key][-1], flush=True)
    summary = {key: {"p50_ms": statistics.median(r["p50"] for r in runs), "p99_ms": statistics.median(r["p99"] for r in runs)}
               for key, runs in results.items()}
    print("| case | p50 ms | p99 ms |\n|---|---:|---:|")
    for key, row in summary.items():
        print(f"| {key} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} |")
    if args.output:
        args.output.write_text(json.dumps({"server": args.server, "rounds": args.rounds, "searches": args.searches, "results": results,
                                           "summary": summary}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
