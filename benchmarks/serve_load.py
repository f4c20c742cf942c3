"""A bounded load test of ``longembed serve`` on 127.0.0.1 (issue: serve it and plug it in).

    python benchmarks/serve_load.py --model /work/models/all-MiniLM-L6-v2 --method pi --max-length 4096 \\
        --clients 32 --short 192 --long 8 --out benchmarks/results/serve_load.json

Starts ``longembed serve`` as a subprocess (port 0 is not reported back, so a free port is picked),
then, in this order:

1. ``sequential``: one client sends every request (short ~50-token and long ~4k-token inputs,
   shuffled with a fixed seed) one after the other;
2. ``concurrent``: the same requests from ``--clients`` concurrent clients;
3. ``short only, sequential`` and ``short only``: the short requests alone, from one client and from
   ``--clients`` clients (their latency without long inputs in flight, to set beside their latency
   in ``concurrent``);
4. ``chunks``: ``--chunk-requests`` late-chunking requests of one ``--chunk-tokens``-token document each
   (default 2 x max-length: run as overlapping windows), alternately ``POST /embed_chunks`` (tokens:256)
   and ``/v1/embeddings`` with ``late_chunking`` (the document cut into five consecutive pieces), from
   ``--clients`` clients together with the short requests.

Every response is checked: status 200, one vector per input, in order, equal to this process's own
``encoder.encode`` of the same text (chunk requests: ``encoder.encode_chunks``, vectors and spans; max
abs difference reported; batch composition differs, so the bound is 1e-5, not bit equality).  Nothing
is retried: a lost or refused request is a failure.  Each phase must finish within ``--phase-seconds``.
Reported: requests/s and inputs/s per phase, the concurrent/sequential throughput ratio, p50/p99
latency of short requests with and without long ones in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from longembed import load_encoder

WORDS = ["the", "meeting", "turned", "to", "the", "budget", "and", "the", "schedule", "for", "the", "next", "quarter", "while", "the", "team", "argued", "about", "design", "choices", "testing", "plans", "and", "the", "release", "of", "the", "new", "product", "line", "in", "several", "markets"]


def text_of(tokenizer, n_tokens: int, seed: int) -> str:
    """A text of about ``n_tokens`` tokens (special tokens included)."""
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(n_tokens)]
    while len(tokenizer(" ".join(words))["input_ids"]) > n_tokens:
        words.pop()
    return " ".join(words)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(base: str, server: subprocess.Popen, seconds: float = 300) -> None:
    """Return once the server at ``base`` answers /health with 200; a RuntimeError when it exits or
    ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise RuntimeError("the server did not start")
        time.sleep(0.5)


def scrape(base: str) -> dict[str, float]:
    """The server's unlabelled metric samples (batch counts, sums, queue gauges)."""
    samples = {}
    for line in httpx.get(base + "/metrics", timeout=10).text.splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#") and "{" not in name:
            samples[name] = float(value)
    return samples


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


#: The chunking of /embed_chunks requests; the pieces of a late_chunking request.
CHUNKING, PIECES = "tokens:256", 5


def chunk_body(document: str, index: int) -> tuple[str, dict]:
    """The route and body of chunk request ``index``: /embed_chunks, or OpenAI's late_chunking."""
    if index % 2 == 0:
        return "/embed_chunks", {"inputs": [document], "chunking": CHUNKING}
    return "/v1/embeddings", {"model": "m", "input": pieces(document), "late_chunking": True, "encoding_format": "float"}


def pieces(document: str) -> list[str]:
    """The document in PIECES consecutive pieces (late_chunking joins them with nothing)."""
    size = -(-len(document) // PIECES)
    return [document[i : i + size] for i in range(0, len(document), size)]


def chunk_reference(encoder, document: str, index: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """What chunk request ``index`` must answer: ``encode_chunks`` of the document (unit vectors for
    /embed_chunks, whose ``normalize`` defaults to true; the model's own choice on the OpenAI route)."""
    if index % 2 == 0:
        ((vectors, spans),) = encoder.encode_chunks([document], chunking=CHUNKING, normalize_embeddings=True)
        return vectors, spans
    bounds = np.cumsum([0] + [len(p) for p in pieces(document)]).tolist()
    spans = [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    ((vectors, _),) = encoder.encode_chunks([document], chunking=[spans])
    return vectors, spans


def answer_of(route: str, response: httpx.Response, n_expected: int) -> tuple[list, list]:
    """(vectors, spans) of a 200 answer; spans are None on the OpenAI route (the pieces are the chunks)."""
    if route == "/embed_chunks":
        chunks = response.json()[0]
        return [c["vector"] for c in chunks], [(c["start"], c["end"]) for c in chunks]
    data = response.json()["data"]
    if [d["index"] for d in data] != list(range(n_expected)):
        raise RuntimeError("chunk vectors missing or out of order")
    return [d["embedding"] for d in data], None


async def run_chunk_phase(base: str, documents: list[str], short: list[list[str]], clients: int) -> tuple[float, dict]:
    """The chunk requests and the short ones from ``clients`` workers; (seconds, {index: (vectors, spans)})."""
    work = [("chunk", i) for i in range(len(documents))] + [("short", i) for i in range(len(short))]
    random.Random(1).shuffle(work)
    queue: asyncio.Queue = asyncio.Queue()
    for item in work:
        queue.put_nowait(item)
    answers: dict[int, tuple[list, list]] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=600) as http:

        async def worker() -> None:
            while not queue.empty():
                kind, index = queue.get_nowait()
                if kind == "short":
                    route, body = "/v1/embeddings", {"model": "m", "input": short[index], "encoding_format": "float"}
                else:
                    route, body = chunk_body(documents[index], index)
                response = await http.post(base + route, json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"{kind} request {index}: HTTP {response.status_code}: {response.text[:300]}")
                if kind == "chunk":
                    answers[index] = answer_of(route, response, len(body.get("input", [])))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - start, answers


async def run_phase(url: str, requests: list[list[str]], clients: int) -> tuple[float, list[tuple[int, float, list]]]:
    """Send ``requests`` with ``clients`` concurrent workers; (seconds, [(index, latency, vectors)])."""
    queue: asyncio.Queue = asyncio.Queue()
    for item in enumerate(requests):
        queue.put_nowait(item)
    results: list[tuple[int, float, list]] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=600) as http:

        async def worker() -> None:
            while not queue.empty():
                index, inputs = queue.get_nowait()
                start = time.perf_counter()
                response = await http.post(url, json={"model": "m", "input": inputs, "encoding_format": "float"})
                latency = time.perf_counter() - start
                if response.status_code != 200:
                    raise RuntimeError(f"request {index}: HTTP {response.status_code}: {response.text[:300]}")
                data = response.json()["data"]
                if [d["index"] for d in data] != list(range(len(inputs))):
                    raise RuntimeError(f"request {index}: vectors missing or out of order")
                results.append((index, latency, [d["embedding"] for d in data]))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - start, results


def chunk_phase(encoder, base: str, short: list[list[str]], args: argparse.Namespace) -> tuple[dict, float]:
    """Phase 4: the chunk requests among the short ones, each answer checked against ``encode_chunks``;
    (the phase's summary, the largest difference from the references)."""
    n_tokens = args.chunk_tokens or 2 * args.max_length
    documents = [text_of(encoder.tokenizer, n_tokens, 20_000 + i) for i in range(args.chunk_requests)]
    print(f"references: encode_chunks of {len(documents)} documents of ~{n_tokens} tokens", flush=True)
    references = [chunk_reference(encoder, d, i) for i, d in enumerate(documents)]
    before = scrape(base)
    seconds, answers = asyncio.run(asyncio.wait_for(run_chunk_phase(base, documents, short, args.clients),
                                                    args.phase_seconds))
    after = scrape(base)
    assert len(answers) == len(documents), f"chunks: {len(documents) - len(answers)} requests lost"
    worst = 0.0
    for index, (vectors, spans) in answers.items():
        expected, expected_spans = references[index]
        if spans is not None and spans != expected_spans:
            raise RuntimeError(f"chunk request {index}: spans differ from encode_chunks'")
        worst = max(worst, float(np.abs(np.asarray(vectors) - expected).max()))
    summary = {
        "chunk_requests": len(documents), "document_tokens": n_tokens, "short_requests": len(short),
        "clients": args.clients, "seconds": round(seconds, 2),
        "batches": int(after["longembed_batch_inputs_count"] - before["longembed_batch_inputs_count"]),
        "max_abs_diff_vs_encode_chunks": worst,
    }
    return summary, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--method", default="pi")
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--short", type=int, default=192, help="short requests (one ~50-token input each)")
    parser.add_argument("--long", type=int, default=8, help="long requests (one ~max-length input each)")
    parser.add_argument("--short-tokens", type=int, default=50)
    parser.add_argument("--max-batch-tokens", type=int, default=16384)
    parser.add_argument("--chunk-requests", type=int, default=8, help="late-chunking requests (phase 4)")
    parser.add_argument("--chunk-tokens", type=int, default=None,
                        help="tokens of each chunked document (default: 2 x max-length, so windows)")
    parser.add_argument("--phase-seconds", type=float, default=600, help="each phase must finish within this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="a JSON file for the summary")
    args = parser.parse_args()

    encoder = load_encoder(args.model, args.method, max_length=args.max_length)
    short = [[text_of(encoder.tokenizer, args.short_tokens, i)] for i in range(args.short)]
    long = [[text_of(encoder.tokenizer, args.max_length, 10_000 + i)] for i in range(args.long)]
    mixed = short + long
    random.Random(args.seed).shuffle(mixed)
    print(f"references: encoding {len(mixed)} inputs directly", flush=True)
    reference = {texts[0]: vector for texts, vector in zip(mixed, encoder.encode([r[0] for r in mixed]), strict=True)}

    port = free_port()
    command = [
        sys.executable, "-m", "longembed.cli.main", "serve", "--model", args.model, "--method", args.method,
        "--max-length", str(args.max_length), "--port", str(port), "--max-batch-tokens", str(args.max_batch_tokens),
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, server)
        url = base + "/v1/embeddings"
        phases = {}
        worst = 0.0
        for name, requests, clients in (
            ("sequential", mixed, 1), ("concurrent", mixed, args.clients),
            ("short only, sequential", short, 1), ("short only", short, args.clients),
        ):
            before = scrape(base)
            seconds, results = asyncio.run(asyncio.wait_for(run_phase(url, requests, clients), args.phase_seconds))
            after = scrape(base)
            assert len(results) == len(requests), f"{name}: {len(requests) - len(results)} requests lost"
            short_latency = []
            for index, latency, vectors in results:
                text = requests[index][0]
                worst = max(worst, float(np.abs(np.asarray(vectors[0]) - reference[text]).max()))
                if len(encoder.tokenizer(text)["input_ids"]) <= args.short_tokens:
                    short_latency.append(latency)
            phases[name] = {
                "requests": len(requests), "clients": clients, "seconds": round(seconds, 2),
                "requests_per_s": round(len(requests) / seconds, 2),
                "short_p50_s": round(percentile(short_latency, 50), 3),
                "short_p99_s": round(percentile(short_latency, 99), 3),
                "batches": int(after["longembed_batch_inputs_count"] - before["longembed_batch_inputs_count"]),
                "model_seconds": round(after["longembed_batch_seconds_sum"] - before["longembed_batch_seconds_sum"], 2),
            }
            print(name, phases[name], flush=True)
        phases["chunks"], chunk_diff = chunk_phase(encoder, base, short, args)
        print("chunks", phases["chunks"], flush=True)
        worst = max(worst, chunk_diff)
    finally:
        server.terminate()
        server.wait(120)
    summary = {
        "model": args.model, "method": args.method, "max_length": args.max_length,
        "max_batch_tokens": args.max_batch_tokens, "clients": args.clients, "short_requests": args.short, "long_requests": args.long, "phases": phases,
        "throughput_ratio_concurrent_over_sequential": round(
            phases["concurrent"]["requests_per_s"] / phases["sequential"]["requests_per_s"], 2
        ),
        "short_only_throughput_ratio": round(
            phases["short only"]["requests_per_s"] / phases["short only, sequential"]["requests_per_s"], 2
        ),
        "max_abs_diff_vs_encode": worst,
    }
    print(json.dumps(summary, indent=2))
    if worst > 1e-5:
        print(f"FAIL: a served vector differs from encode by {worst}", file=sys.stderr)
        return 1
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
