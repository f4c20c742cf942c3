"""A new user's probes of ``longembed serve`` (issue 23): one huge request, a short one meanwhile, a
client that drops mid-body.  Run on a checkout's ``src`` (``--src``) to compare before and after.

For each server (a subprocess on 127.0.0.1, the packaged all-MiniLM-L6-v2 with PI to 2048):
- peak resident memory (VmHWM) while one request of ``--megabytes`` MB of text is in flight (one input,
  or ``--inputs N`` of equal size: each longer than Lt, so the request is refused at input 0), the
  seconds until that 413, then (one input) the same input with overflow=truncate, and the resident
  memory after;
- the latency of "hello world" sent while the huge request is being handled;
- what ``/metrics`` counts for a client that drops mid-body (requests by status, disconnects).

    python benchmarks/serve_probes.py --src /tmp/before/src --src src --megabytes 10
    python benchmarks/serve_probes.py --src /tmp/before/src --src src --megabytes 50 --inputs 500   # issue 40, 7
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

WORDS = ["the", "committee", "discussed", "the", "remote", "control", "design", "budget", "and", "the", "next", "meeting"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory_kib(pid: int, field: str) -> int:
    """VmRSS or VmHWM (peak) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def start_server(src: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "longembed.cli.main", "serve", "--model", "default", "--method", "pi",
               "--max-length", "2048", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.3)
    server.kill()
    raise RuntimeError("the server did not start")


def metric_lines(base: str, prefix: str) -> list[str]:
    text = httpx.get(base + "/metrics", timeout=30).text
    return [line for line in text.splitlines() if line.startswith(prefix) and not line.endswith(" 0.0")]


def drop_mid_body(base: str) -> None:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n{\"model\": \"m\", \"input\": \"half")
    time.sleep(1.0)


def probe(src: Path, megabytes: float, n_inputs: int = 1) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(src, port)
    try:
        httpx.post(base + "/embed", json={"inputs": "warm up"}, headers={"content-type": "application/json"},
                   timeout=60)
        rss_idle = memory_kib(server.pid, "VmRSS")
        n_words = int(megabytes * 1e6 / 8)
        huge = " ".join(WORDS[i % len(WORDS)] for i in range(n_words))
        size = len(huge) // n_inputs
        inputs = huge if n_inputs == 1 else [huge[k * size : (k + 1) * size] for k in range(n_inputs)]
        outcome: dict = {}

        def send_huge() -> None:
            start = time.perf_counter()
            try:
                response = httpx.post(base + "/v1/embeddings", json={"model": "m", "input": inputs}, timeout=300)
                outcome["status"] = response.status_code
            except httpx.TransportError as exc:
                outcome["status"] = type(exc).__name__
            outcome["seconds"] = time.perf_counter() - start

        thread = threading.Thread(target=send_huge)
        thread.start()
        time.sleep(1.0)  # the huge body is in: the server is counting its tokens
        start = time.perf_counter()
        short = httpx.post(base + "/embed", json={"inputs": "hello world"}, timeout=300)
        short_seconds = time.perf_counter() - start
        thread.join(320)
        start = time.perf_counter()
        cut = httpx.post(base + "/v1/embeddings", json={"model": "m", "input": huge, "overflow": "truncate"},
                         timeout=300) if n_inputs == 1 else None
        truncate_seconds = time.perf_counter() - start
        rss_after = memory_kib(server.pid, "VmRSS")
        drop_mid_body(base)
        return {
            "src": str(src),
            "huge_request_mb": megabytes,
            "huge_request_inputs": n_inputs,
            "huge_status": outcome.get("status"),
            "huge_seconds": round(outcome.get("seconds", float("nan")), 2),
            "huge_truncated_status": cut.status_code if cut is not None else None,
            "huge_truncated_seconds": round(truncate_seconds, 2) if cut is not None else None,
            "short_status": short.status_code,
            "short_seconds_while_huge_in_flight": round(short_seconds, 3),
            "rss_idle_mib": round(rss_idle / 1024),
            "peak_rss_mib": round(memory_kib(server.pid, "VmHWM") / 1024),
            "rss_after_mib": round(rss_after / 1024),
            "metrics_after_dropped_client": metric_lines(base, "longembed_requests_total")
            + metric_lines(base, "longembed_client_disconnects_total"),
        }
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, action="append", required=True, help="a checkout's src folder")
    parser.add_argument("--megabytes", type=float, default=10.0, help="size of the huge request (default 10)")
    parser.add_argument("--inputs", type=int, default=1, help="inputs the huge request is split into (default 1)")
    args = parser.parse_args()
    for src in args.src:
        print(json.dumps(probe(src.resolve(), args.megabytes, args.inputs), indent=2), flush=True)


if __name__ == "__main__":
    main()
