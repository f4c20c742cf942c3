"""A cold ``longembed search`` (issue 53): one question from the command line, a whole new process, against
``python -c "import torch, transformers"`` on the same machine; on a dense MiniLM index and a BM25-only one.

The script builds (once, in ``--work-dir``) two indexes of ``--documents`` short synthetic documents
with ``longembed index``: the packaged MiniLM (one vector per document) and BM25 only.  Then, for
``--runs`` rounds, it runs alternately: the import of torch and transformers; ``longembed search`` on
the dense index; on the BM25-only index (and the same two searches with every other ``--src`` tree on
``PYTHONPATH``, e.g. ``before=/work/main/src``); and ``import torch, transformers.modeling_utils``, what
any model loaded through transformers imports first (the floor of a dense search).  It prints each run's
wall time, the medians and the ratios to the import (the goals: dense at most 1.5x, BM25-only at most 0.5x).

Run it alone on the machine (other work inflates every number):

    python benchmarks/cold_search.py --src before=/work/main/src --output benchmarks/results/cold_search.json

Small, to check that it runs: ``--documents 200 --runs 1``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WORDS = ["river", "mountain", "harvest", "apple", "engine", "library", "window", "garden", "winter", "market", "letter", "music", "ocean", "bridge", "doctor", "student", "forest", "island", "castle", "planet"]
QUESTION = "apple harvest by the river"
#: what loading any model through transformers imports before its weights (transformers' modeling stack)
MODELING_FLOOR = "import torch, transformers.modeling_utils"


def write_corpus(path: Path, documents: int, seed: int = 0) -> None:
    """``documents`` short documents (40 words each) as a JSONL corpus."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for d in range(documents):
            out.write(json.dumps({"_id": f"doc{d:06d}", "text": " ".join(rng.choice(WORDS) for _ in range(40))}) + "\n")


def longembed(*args: str, source: str) -> list[str]:
    """The command line of ``longembed`` run from the tree ``source``."""
    code = "import sys; from longembed.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return ["env", f"PYTHONPATH={Path(source).resolve()}", sys.executable, "-c", code, *args]


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--src", action="append", default=[], metavar="LABEL=PATH",
                        help="another source tree to time too (repeat); the indexes are built with src/")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="cold_search-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    if not corpus.exists():
        write_corpus(corpus, args.documents)
    here = str(Path(__file__).resolve().parents[1] / "src")
    indexes = {"dense": ["--model", "default"], "bm25": ["--model", "bm25"]}
    for name, flags in indexes.items():
        if not (work / name).exists():
            subprocess.run(longembed("index", str(corpus), "--index", str(work / name), *flags, "--no-estimate",
                                     source=here), check=True)
    trees = {"new": here, **dict(item.split("=", 1) for item in args.src)}
    commands = {"import torch, transformers": [sys.executable, "-c", "import torch, transformers"],
                # the floor of any search whose model loads through transformers: its modeling stack
                MODELING_FLOOR: [sys.executable, "-c", "import torch, transformers.modeling_utils"]}
    for label, source in trees.items():
        for name in indexes:
            commands[f"{label}: search {name}"] = longembed("search", "--index", str(work / name), QUESTION, "-k", "5",
                                                           source=source)
    times: dict[str, list[float]] = {what: [] for what in commands}
    for run in range(args.runs):
        for what, command in commands.items():
            times[what].append(wall(command))
            print(json.dumps({"run": run, "what": what, "seconds": times[what][-1]}), flush=True)
    baseline = float(np.median(times["import torch, transformers"]))
    print(f"\n{args.documents:,} documents, {args.runs} alternated runs each (median wall seconds, ratio to the import)")
    print("| process | median s | ratio |\n|---|---|---|")
    for what, seconds in times.items():
        print(f"| {what} | {np.median(seconds):.2f} | {np.median(seconds) / baseline:.2f}x |")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"documents": args.documents, "times": times}, indent=1))


if __name__ == "__main__":
    main()
