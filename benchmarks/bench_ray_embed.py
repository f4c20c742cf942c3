"""Benchmark ``longembed embed`` on a corpus of shards: the plain command, the local engine, Ray with 1 and 2 actors.

Cuts the Paul Graham essays into --docs documents of mixed lengths (32 to 1,536 words), written as
--shards jsonl shards (and as one jsonl file for the plain command), then embeds them with the same
model six ways, in one process, one after another:

  plain    ``longembed embed all.jsonl -o plain.npy`` (one encode call over every document)
  local    ``longembed embed shards -o out`` (the local engine: shard by shard, in this process)
  local 1 thread  the same with torch on one thread (what one Ray actor of 1 CPU gets)
  ray 1x1  ``--engine ray --actors 1 --cpus-per-actor 1``
  ray 1x2  ``--engine ray --actors 1 --cpus-per-actor 2``
  ray 2x1  ``--engine ray --actors 2 --cpus-per-actor 1``

Each wall time covers the model load (in each actor for Ray) and the embedding; the Ray start-up
(``ray.init``) is measured once, apart.  Every engine's vectors are compared with the plain command's.
Then a resumed run: the CLI (``--engine ray --actors 2``) in a subprocess is killed (SIGKILL) once
--kill-after shard files exist, and run again; the second run must embed only the missing shards,
leave the finished files untouched and give the same vectors.

    python benchmarks/bench_ray_embed.py                    # MiniLM, pi, 2048; about 10 minutes here
    python benchmarks/bench_ray_embed.py --docs 40 --shards 4 --kill-after 1   # a quick check

Exit status 1 if any engine's vectors differ from the plain command's by more than --tolerance, or
the resumed run embedded a finished shard again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch

from longembed.cli.main import main as longembed_main
from longembed.corpus import EmbedJob, RaySettings, embed_corpus, read_embeddings

REPO = Path(__file__).resolve().parents[1]
ESSAYS = REPO.parent / "shared" / "data" / "paul_graham_essays" / "PaulGrahamEssays"
#: Document lengths in words, cycled: mostly short and mid-length, a few near max_length.
LENGTHS = (32, 96, 256, 64, 512, 160, 1024, 48, 384, 1536)
ENGINES = (("ray 1x1", 1, 1.0), ("ray 1x2", 1, 2.0), ("ray 2x1", 2, 1.0))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="/work/models/all-MiniLM-L6-v2")
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--docs", type=int, default=160, help="documents in the corpus")
    parser.add_argument("--shards", type=int, default=8, help="jsonl shards they are split into")
    parser.add_argument("--kill-after", type=int, default=3, help="kill the first resume run at this many shards")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="largest accepted vector difference")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ray_embed.json")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    return parser.parse_args(argv)


def make_corpus(folder: Path, n_docs: int, n_shards: int) -> list[dict[str, str]]:
    """Cut the essays (one stream of words) into documents of LENGTHS words; write shards and all.jsonl."""
    words = " ".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(ESSAYS.glob("*.txt"))).split()
    docs, start = [], 0
    for i in range(n_docs):
        n = LENGTHS[i % len(LENGTHS)]
        if start + n > len(words):
            start = 0
        docs.append({"id": f"pg-{i:05d}", "text": " ".join(words[start : start + n])})
        start += n
    shards = folder / "shards"
    shards.mkdir(parents=True)
    per_shard = -(-n_docs // n_shards)
    for s in range(n_shards):
        part = docs[s * per_shard : (s + 1) * per_shard]
        (shards / f"part-{s:03d}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in part))
    (folder / "all.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    return docs


def encoder_flags(args: argparse.Namespace) -> list[str]:
    return ["--model", args.model, "--method", args.method, "--max-length", str(args.max_length)]


def run_plain(args: argparse.Namespace, folder: Path) -> tuple[float, np.ndarray]:
    """The plain single-file command, in this process."""
    start = time.perf_counter()
    code = longembed_main(["embed", str(folder / "all.jsonl"), "-o", str(folder / "plain.npy"), *encoder_flags(args)])
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"the plain embed command failed ({code})")
    return seconds, np.load(folder / "plain.npy")


def run_engine(job: EmbedJob, folder: Path, name: str, engine: str, settings: RaySettings | None) -> dict[str, Any]:
    out = folder / ("out-" + name.replace(" ", "-"))
    start = time.perf_counter()
    result = embed_corpus(folder / "shards", out, job, engine=engine, ray=settings)
    seconds = time.perf_counter() - start
    if result.failed:
        raise SystemExit(f"{name}: {result.failed[0].shard}: {result.failed[0].error}")
    ids, vectors = read_embeddings(out)
    busy: dict[str, float] = {}
    for report in result.reports:
        busy[report.worker] = busy.get(report.worker, 0.0) + report.seconds
    return {"name": name, "seconds": seconds, "documents": result.documents, "ids": ids, "vectors": vectors,
            "workers": len(busy), "busy_seconds": sorted(round(v, 1) for v in busy.values())}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def resume_run(args: argparse.Namespace, folder: Path, reference: np.ndarray) -> dict[str, Any]:
    """Kill the CLI after --kill-after shard files, rerun it, and check what the rerun embedded."""
    out = folder / "out-resume"
    command = [sys.executable, "-m", "longembed.cli.main", "embed", str(folder / "shards"), "-o", str(out),
               "--engine", "ray", "--actors", "2", *encoder_flags(args)]
    log = (folder / "first-run.log").open("w")
    first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    start = time.perf_counter()
    while len(list(out.glob("*.parquet"))) < args.kill_after:
        if first.poll() is not None:
            raise SystemExit(f"the first run ended before it was killed; see {folder / 'first-run.log'}")
        time.sleep(0.2)
    # a crash: the CLI and every process under it (Ray's raylet, GCS and actors, which Ray puts in
    # process groups of their own) killed at once, and gone before anything is counted
    victims: set[int] = set()
    while new := {first.pid, *descendants(first.pid)} - victims:  # freeze the tree first: no new children
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        victims |= new
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    first.wait()
    while any(alive(pid) for pid in victims):
        time.sleep(0.1)
    killed_after = time.perf_counter() - start
    finished = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("*.parquet")}
    partial = [p.name for p in out.glob(".tmp-*")]
    start = time.perf_counter()
    second = subprocess.run(command, capture_output=True, text=True)
    rerun_seconds = time.perf_counter() - start
    if second.returncode != 0:
        raise SystemExit(f"the resumed run failed:\n{second.stderr[-3000:]}")
    match = re.search(r"embedded (\d+) documents from (\d+) shard\(s\)", second.stdout)
    untouched = all((out / name).stat().st_ino == state[0] and (out / name).stat().st_mtime_ns == state[1]
                    for name, state in finished.items())
    _, vectors = read_embeddings(out)
    return {
        "killed_after_seconds": round(killed_after, 1),
        "shards_done_at_kill": len(finished),
        "partial_files_at_kill": partial,
        "rerun_embedded_shards": int(match.group(2)) if match else None,
        "rerun_embedded_documents": int(match.group(1)) if match else None,
        "rerun_seconds": round(rerun_seconds, 1),
        "finished_files_untouched": untouched,
        "partial_files_left": [p.name for p in out.glob(".tmp-*")],
        "max_abs_diff_vs_plain": float(np.abs(vectors - reference).max()),
        "rerun_summary": second.stdout.strip().splitlines(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-ray-embed-"))
    if args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    docs = make_corpus(folder, args.docs, args.shards)
    print(f"corpus: {len(docs)} documents, {sum(len(d['text'].split()) for d in docs)} words, {args.shards} "
          f"shards in {folder}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    job = EmbedJob(args.model, method=args.method, max_length=args.max_length)
    rows: list[dict[str, Any]] = []

    plain_seconds, plain = run_plain(args, folder)
    rows.append({"name": "plain", "seconds": plain_seconds, "documents": len(docs), "vectors": plain,
                 "ids": [d["id"] for d in docs], "workers": 1, "busy_seconds": []})
    print(f"plain: {plain_seconds:.1f} s", flush=True)
    rows.append(run_engine(job, folder, "local", "local", None))
    print(f"local: {rows[-1]['seconds']:.1f} s", flush=True)
    threads = torch.get_num_threads()
    rows.append(run_engine(replace(job, torch_threads=1), folder, "local 1 thread", "local", None))
    torch.set_num_threads(threads)
    print(f"local 1 thread: {rows[-1]['seconds']:.1f} s", flush=True)

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    ray_start = time.perf_counter() - start
    print(f"ray.init: {ray_start:.1f} s", flush=True)
    try:
        for name, actors, cpus in ENGINES:
            rows.append(run_engine(job, folder, name, "ray", RaySettings(actors=actors, cpus_per_actor=cpus)))
            print(f"{name}: {rows[-1]['seconds']:.1f} s on {rows[-1]['workers']} worker(s)", flush=True)
    finally:
        ray.shutdown()

    by_name = {r["name"]: r for r in rows}
    ok = True
    for row in rows:
        row["max_abs_diff_vs_plain"] = float(np.abs(row["vectors"] - plain).max())
        ok &= row["ids"] == by_name["plain"]["ids"] and row["max_abs_diff_vs_plain"] <= args.tolerance
        row["docs_per_s"] = row["documents"] / row["seconds"]
    resume = resume_run(args, folder, plain)
    ok &= resume["finished_files_untouched"] and resume["max_abs_diff_vs_plain"] <= args.tolerance
    ok &= resume["rerun_embedded_shards"] == args.shards - resume["shards_done_at_kill"]

    print("\n| engine | wall s | docs/s | vs plain | vs ray 1x1 | workers used | max abs diff vs plain |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['name']} | {row['seconds']:.1f} | {row['docs_per_s']:.2f} | "
              f"{plain_seconds / row['seconds']:.2f}x | {by_name['ray 1x1']['seconds'] / row['seconds']:.2f}x | "
              f"{row['workers']} | {row['max_abs_diff_vs_plain']:.1e} |")
    print(f"\nray.init (apart): {ray_start:.1f} s")
    print("resume:", json.dumps(resume, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "command": "python benchmarks/bench_ray_embed.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "corpus": {"documents": len(docs), "shards": args.shards, "lengths_words": LENGTHS},
        "model": args.model, "method": args.method, "max_length": args.max_length, "ray_init_seconds": ray_start,
        "engines": [{k: v for k, v in r.items() if k not in ("vectors", "ids")} for r in rows],
        "resume": resume, "ok": bool(ok),
    }, indent=2) + "\n")
    print(f"wrote {args.out}; {'OK' if ok else 'FAILED'}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
