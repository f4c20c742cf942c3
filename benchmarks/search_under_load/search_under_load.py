"""``POST /search`` alone and under the fairness benchmark's load, per checkout (issue 50, item 3).

    OMP_NUM_THREADS=2 python benchmarks/search_under_load/search_under_load.py \\
        --checkout before=/tmp/longembed-before --checkout after=. \\
        --documents ../shared/data/paul_graham_essays/PaulGrahamEssays --rounds 2 \\
        --out benchmarks/results/search_under_load.json

(``README.md`` beside this file has the commands that make the checkouts and the short check run.)

Each ``--checkout NAME=PATH`` is a source tree of longembed (``PATH/src``); its server runs with
``PYTHONPATH=PATH/src``, so one session compares the code before and after a change, alternated round by
round (``--rounds``) so that both share the machine's conditions.  Per checkout, an index of
``--documents`` is built once by that checkout's ``longembed index`` (``--strategy``, the packaged MiniLM
with ``--method`` / ``--max-length``, the fairness benchmark's model) under ``--work``.  Then, per round and
checkout, ``longembed serve --index`` on 127.0.0.1 gets, in this order:

1. ``idle``: ``--idle-requests`` searches one after the other (a search's own cost, nothing else in
   flight), after one warm-up search and one warm-up long embedding request;
2. ``alone``: ``--search-clients`` clients each sending one search at a time, for ``--alone-seconds``;
3. ``load``: the fairness benchmark's load (``benchmarks/serve_fairness.py``: ``--long-clients`` clients
   sending ``--long-inputs`` inputs of ~``--long-tokens`` tokens, ``--short-clients`` clients sending one
   ~``--short-tokens``-token question to ``/v1/embeddings``) together with the same search clients, for
   ``--seconds``;
4. with ``--baseline``, ``load`` again without the search clients (the short requests' p99 with no
   search in flight, for reference).

A 429 or 503 is counted and retried after its Retry-After, as the fairness benchmark does; any other
status that is not 200 is an error.  Reported per run: search p50/p99 (idle, alone, under load), short
embedding p50/p99 under load, long throughput (the model's batch tokens less the short requests' and the
searches' tokens, per second of the load), model calls, refusals and errors per kind.  Timing is only
meaningful with nothing else running on the cores: record numbers from a quiet machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the fairness benchmark's parts
from serve_fairness import Tally, add_mix_arguments  # noqa: E402
from serve_fairness import client as embedding_client  # noqa: E402
from serve_load import free_port, percentile, text_of  # noqa: E402

from longembed import load_encoder  # noqa: E402

#: Questions about Paul Graham's essays (the README's --documents); any corpus works, the answers are not
#: checked, only their latency.  ``--queries`` gives others.
QUESTIONS = [
    "how do you get startup ideas", "why do most startups fail", "what makes a great hacker",
    "how to do great work", "what should a founder do first", "is it better to raise money early",
    "why are cities important for ambition", "what did Y Combinator learn from its first batch",
    "how should you pick a cofounder", "what is the best programming language", "why is Lisp powerful",
    "how to write a good essay", "what is a maker's schedule", "how do investors decide",
    "why do people procrastinate", "what makes a startup grow fast", "how to be an expert in a changing world",
    "what does it mean to be relentlessly resourceful", "why should you do things that don't scale",
    "how do you convince investors",
]
#: Seconds a server may take to start (the model, the index, the imports).
START_SECONDS = 300


@dataclass
class Checkout:
    name: str
    path: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.path / "src")}

    def describe(self) -> dict[str, str | None]:
        """Where its longembed is imported from, and its git commit (None: not a git checkout)."""
        where = subprocess.run([sys.executable, "-c", "import longembed; print(longembed.__file__)"], env=self.env,
                               capture_output=True, text=True, check=True).stdout.strip()
        def git(*command: str) -> str | None:
            done = subprocess.run(["git", "-C", str(self.path), *command], capture_output=True, text=True)
            return done.stdout.strip() if done.returncode == 0 else None

        commit = None
        if git("rev-parse", "--show-toplevel") == str(self.path):  # its own repository, not one it sits in
            commit = git("rev-parse", "--short", "HEAD")
            commit = commit and commit + (" (modified)" if git("status", "--porcelain", "--", "src") else "")
        return {"name": self.name, "path": str(self.path), "longembed": where, "commit": commit}


def parse_checkout(value: str) -> Checkout:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--checkout takes NAME=PATH, got {value!r}")
    folder = Path(path).resolve()
    if not (folder / "src" / "longembed" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"--checkout {value}: no src/longembed in {folder}")
    return Checkout(name, folder)


def build_index(args: argparse.Namespace, checkout: Checkout) -> Path:
    """The checkout's index of --documents (built once, kept under --work)."""
    index = args.work / checkout.name / "index"
    if index.exists():
        return index
    command = [sys.executable, "-m", "longembed.cli.main", "index", str(args.documents), "--index", str(index),
               "--model", args.model, "--method", args.method, "--max-length", str(args.max_length),
               "--strategy", args.strategy]
    print(f"[{checkout.name}] building {index}: {' '.join(command)}", flush=True)
    subprocess.run(command, env=checkout.env, check=True)
    return index


def start_server(args: argparse.Namespace, checkout: Checkout, index: Path, port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--index", str(index), "--port", str(port),
               "--scheduler", args.scheduler, "--max-batch-tokens", str(args.max_batch_tokens), "--no-auth"]
    if args.queue_seconds is not None:
        command += ["--queue-seconds", str(args.queue_seconds)]
    if args.sub_batch_tokens is not None:
        command += ["--sub-batch-tokens", str(args.sub_batch_tokens)]
    log = (args.work / checkout.name / "server.log").open("a")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=checkout.env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError(f"[{checkout.name}] the server did not start (see {log.name}): {' '.join(command)}")
        time.sleep(0.5)


def stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@dataclass
class Searches:
    latencies: list[float] = field(default_factory=list)
    refused_429: int = 0
    refused_503: int = 0
    without_retry_after: int = 0  # refusals that did not say when to retry (issue 51: every one must)
    errors: list[str] = field(default_factory=list)


async def search_client(http: httpx.AsyncClient, url: str, queries: list[str], stop: float, tally: Searches) -> None:
    """Search ``queries`` in turn (cycling) until ``stop``; retry a 429/503 after its Retry-After."""
    turn = 0
    while time.monotonic() < stop:
        start = time.monotonic()
        try:
            response = await http.post(url, json={"query": queries[turn % len(queries)], "k": 10})
        except httpx.TransportError as exc:
            tally.errors.append(f"search: {type(exc).__name__}")
            continue
        if response.status_code == 200:
            tally.latencies.append(time.monotonic() - start)
            turn += 1
        elif response.status_code in (429, 503):
            if response.status_code == 429:
                tally.refused_429 += 1
            else:
                tally.refused_503 += 1
            tally.without_retry_after += "retry-after" not in response.headers
            wait = float(response.headers.get("retry-after", "1"))
            await asyncio.sleep(max(0.0, min(wait, stop - time.monotonic())))
        else:
            tally.errors.append(f"search: HTTP {response.status_code}: {response.text[:200]}")


async def mixed(base: str, args: argparse.Namespace, seconds: float, search_clients: int, long_clients: int,
                short_clients: int, queries: list[str], long_bodies, short_bodies) -> tuple[Searches, Tally, float]:
    """Search clients and the fairness benchmark's embedding clients together for ``seconds``, then the
    requests in flight finish; (searches, embedding requests, seconds until the last answer)."""
    clients = search_clients + long_clients + short_clients
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    searches, embeddings = Searches(), Tally()
    async with httpx.AsyncClient(limits=limits, timeout=seconds * 20 + 600) as http:
        origin = time.monotonic()
        stop = origin + seconds
        url = base + "/v1/embeddings"
        workers = [search_client(http, base + "/search", queries[i:] + queries[:i], stop, searches)
                   for i in range(search_clients)]
        workers += [embedding_client(http, url, "long", long_bodies[i::long_clients], stop, origin, embeddings)
                    for i in range(long_clients)]
        workers += [embedding_client(http, url, "short", [short_bodies[i]], stop, origin, embeddings)
                    for i in range(short_clients)]
        await asyncio.gather(*workers)
    return searches, embeddings, time.monotonic() - origin


def metrics(base: str) -> dict[str, float]:
    """Every sample of the server's /metrics, labels included in the name."""
    samples = {}
    for line in httpx.get(base + "/metrics", timeout=10).text.splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            samples[name] = float(value)
    return samples


def sequential_searches(base: str, queries: list[str], n: int) -> list[float]:
    latencies = []
    with httpx.Client(timeout=120) as http:
        for i in range(n):
            start = time.monotonic()
            http.post(base + "/search", json={"query": queries[i % len(queries)], "k": 10}).raise_for_status()
            latencies.append(time.monotonic() - start)
    return latencies


def seconds(values: list[float], q: float) -> float | None:
    """The ``q`` percentile of ``values``, rounded (None: no values, e.g. the load without searches)."""
    return round(percentile(values, q), 3) if values else None


def load_phase(base: str, args: argparse.Namespace, search_clients: int, queries, long_bodies, short_bodies) -> dict:
    """The fairness load (with ``search_clients`` search clients), and what it measured."""
    before = metrics(base)
    searches, embeddings, wall = asyncio.run(mixed(base, args, args.seconds, search_clients, args.long_clients,
                                                   args.short_clients, queries, long_bodies, short_bodies))
    after = metrics(base)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    short = [d.latency for d in embeddings.done if d.kind == "short"]
    short_tokens = sum(d.tokens for d in embeddings.done if d.kind == "short")
    search_tokens = delta('longembed_tokens_total{route="search"}')  # 0 where searches bypass the batcher
    long_tokens = delta("longembed_batch_tokens_sum") - short_tokens - search_tokens
    calls = delta("longembed_model_call_seconds_count")
    return {
        "search_clients": search_clients,
        "searches": len(searches.latencies),
        "search_p50_s": seconds(searches.latencies, 50),
        "search_p99_s": seconds(searches.latencies, 99),
        "search_429": searches.refused_429,
        "search_503": searches.refused_503,
        "refused_without_retry_after": searches.without_retry_after + embeddings.without_retry_after,
        "search_tokens_in_batches": int(search_tokens),
        "short_requests": len(short),
        "short_p50_s": seconds(short, 50),
        "short_p99_s": seconds(short, 99),
        "long_requests": sum(d.kind == "long" for d in embeddings.done),
        "long_tokens_per_s": round(long_tokens / wall, 1),
        "short_429": embeddings.refusals(429, "short"),
        "long_429": embeddings.refusals(429, "long"),
        "embedding_503": embeddings.refusals(503),
        "load_seconds": round(wall, 1),
        "model_calls": int(calls),
        "call_seconds_mean": round(delta("longembed_model_call_seconds_sum") / max(calls, 1), 3),
        "call_seconds_max": round(after.get("longembed_model_call_seconds_max", float("nan")), 3),
        "errors": len(searches.errors) + len(embeddings.errors),
        "first_errors": (searches.errors + embeddings.errors)[:5],
    }


def one_run(args: argparse.Namespace, checkout: Checkout, index: Path, queries, long_bodies, short_bodies) -> dict:
    port = free_port()
    server = start_server(args, checkout, index, port)
    base = f"http://127.0.0.1:{port}"
    try:
        sequential_searches(base, queries, 1)  # warm up the search path once, and the long path:
        httpx.post(base + "/v1/embeddings", json={"model": "m", "input": long_bodies[0][:1]}, timeout=300)
        idle = sequential_searches(base, queries, args.idle_requests)
        alone, _, alone_wall = asyncio.run(mixed(base, args, args.alone_seconds, args.search_clients, 0, 0, queries,
                                                 long_bodies, short_bodies))
        result = {
            "checkout": checkout.name,
            "search_idle_p50_s": seconds(idle, 50),
            "search_alone": {"searches": len(alone.latencies), "p50_s": seconds(alone.latencies, 50),
                             "p99_s": seconds(alone.latencies, 99), "per_s": round(len(alone.latencies) / alone_wall, 1),
                             "429": alone.refused_429, "503": alone.refused_503, "errors": alone.errors[:5]},
            "load": load_phase(base, args, args.search_clients, queries, long_bodies, short_bodies),
        }
        if args.baseline:
            result["load_without_searches"] = load_phase(base, args, 0, queries, long_bodies, short_bodies)
    finally:
        stop_server(server)
    return result


def table(runs: list[dict]) -> str:
    """The runs as a markdown table (the columns RESULTS.md reports)."""
    lines = ["| round | checkout | search idle p50 s | search alone p50 / p99 s | search under load p50 / p99 s | "
             "short under load p50 / p99 s | long tokens/s | searches under load | search 429s | errors |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in runs:
        a, lo = r["search_alone"], r["load"]
        lines.append(f"| {r['round']} | {r['checkout']} | {r['search_idle_p50_s']} | {a['p50_s']} / {a['p99_s']} | "
                     f"{lo['search_p50_s']} / {lo['search_p99_s']} | {lo['short_p50_s']} / {lo['short_p99_s']} | "
                     f"{lo['long_tokens_per_s']:,} | {lo['searches']} | {lo['search_429']} | {lo['errors']} |")
        if "load_without_searches" in r:
            b = r["load_without_searches"]
            lines.append(f"| {r['round']} | {r['checkout']}, no searches | | | | {b['short_p50_s']} / {b['short_p99_s']} | "
                         f"{b['long_tokens_per_s']:,} | | | {b['errors']} |")
    return "\n".join(lines)


def read_queries(path: Path | None) -> list[str]:
    if path is None:
        return QUESTIONS
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".jsonl":
        return [json.loads(line)["text"] for line in lines]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=parse_checkout, action="append", required=True, metavar="NAME=PATH",
                        help="a longembed source tree to serve (its src/ first on PYTHONPATH); give several to "
                             "compare them, alternated each round")
    parser.add_argument("--documents", type=Path, required=True, help="what to index (a folder or a .jsonl file)")
    parser.add_argument("--queries", type=Path, default=None,
                        help="questions, one per line, or a .jsonl with 'text' (default: questions about Paul "
                             "Graham's essays)")
    parser.add_argument("--work", type=Path, default=Path("runs/search_under_load"),
                        help="where the indexes and the server logs go (an index is built once per checkout)")
    parser.add_argument("--model", default="default", help="the index's model (default: the packaged MiniLM)")
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--strategy", default="late-chunks+bm25")
    parser.add_argument("--scheduler", default="fair")
    parser.add_argument("--max-batch-tokens", type=int, default=16384)
    parser.add_argument("--queue-seconds", type=float, default=None, help="the server's --queue-seconds (default: its own)")
    parser.add_argument("--sub-batch-tokens", type=int, default=None, help="the server's --sub-batch-tokens (default: its own)")
    parser.add_argument("--search-clients", type=int, default=4)
    parser.add_argument("--idle-requests", type=int, default=20)
    parser.add_argument("--alone-seconds", type=float, default=30, help="length of the searches-only phase")
    parser.add_argument("--seconds", type=float, default=120, help="length of the load phase")
    add_mix_arguments(parser)
    parser.add_argument("--baseline", action="store_true", help="also run the load without the search clients")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of all checkouts (alternated)")
    parser.add_argument("--out", type=Path, default=None, help="a JSON file for the results")
    args = parser.parse_args()
    if args.long_tokens > args.max_length:
        parser.error(f"--long-tokens {args.long_tokens} is longer than --max-length {args.max_length}")
    if len({c.name for c in args.checkout}) != len(args.checkout):
        parser.error("each --checkout needs a name of its own")

    tokenizer = load_encoder(args.model, "truncate").tokenizer
    long_texts = [text_of(tokenizer, args.long_tokens, 10_000 + i) for i in range(2 * max(args.long_clients, 1))]
    long_bodies = [[long_texts[(i + j) % len(long_texts)] for j in range(args.long_inputs)]
                   for i in range(len(long_texts))]
    short_bodies = [[text_of(tokenizer, args.short_tokens, i)] for i in range(max(args.short_clients, 1))]
    queries = read_queries(args.queries)
    indexes = {c.name: build_index(args, c) for c in args.checkout}
    runs = []
    for round_index in range(args.rounds):
        for checkout in args.checkout:
            result = {"round": round_index, **one_run(args, checkout, indexes[checkout.name], queries, long_bodies,
                                                      short_bodies)}
            print(json.dumps(result), flush=True)
            runs.append(result)
    summary = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                     if k not in ("out", "checkout")},
        "checkouts": [c.describe() for c in args.checkout],
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "load_average_at_end": os.getloadavg(),
        "runs": runs,
    }
    print(json.dumps(summary, indent=2))
    print(table(runs))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
