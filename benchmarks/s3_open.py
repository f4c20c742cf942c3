"""Open time of an index on S3 (issue 53): the same synthetic index as ``index_open.py`` written to a
local S3 API server (``moto_server`` on 127.0.0.1), opened in fresh processes by each source tree.

A tree that reads the version's saved files from S3 is timed twice per round: with an empty download
cache (``cold``: the pointer read, the files downloaded, then memory-mapped) and with the cache that
open left (``warm``: the pointer read, the sizes checked).  Each is timed twice, in fresh processes:
the index alone (``index open``: its files or rows, no model), then a whole open with the model.  A tree without them reads every row of the
table from the store and indexes BM25 at each open.  Open times include loading the model (torch and
transformers imported before, apart), as ``index_open.py`` times them; the trees alternate per round.

    python benchmarks/s3_open.py --chunks 10000 --src new=src --src before=/work/main/src --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import boto3
import numpy as np
from index_open import build_synthetic_index, measure

#: the index's own part of an open (no model): its version's files, or its table's rows and BM25
OPEN_INDEX_ONLY = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from longembed.search.index import _open_snapshot
start = time.perf_counter()
snapshot, folder = _open_snapshot(sys.argv[1])
print(json.dumps({"index_open_s": time.perf_counter() - start, "saved_files": folder is not None}))
"""

S3_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
                  "AWS_ALLOW_HTTP": "true"}


def start_moto() -> tuple[subprocess.Popen, str]:
    """A moto_server on a free port of 127.0.0.1 and its endpoint, once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2)  # noqa: S310 - our own server
            return server, endpoint
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.2)


def index_only(source: str, uri: str) -> dict:
    """:data:`OPEN_INDEX_ONLY` in a fresh process with ``source`` on PYTHONPATH."""
    environment = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
    done = subprocess.run([sys.executable, "-c", OPEN_INDEX_ONLY, uri], capture_output=True, text=True,
                          env=environment, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--src", action="append", default=None, metavar="LABEL=PATH",
                        help="a source tree to measure (repeat; default: new=src)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--output", type=Path, default=None, help="write every measurement here (JSON)")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in (args.src or ["new=src"]))
    server, endpoint = start_moto()
    work = Path(tempfile.mkdtemp(prefix="s3_open-"))
    try:
        os.environ.update({**S3_ENVIRONMENT, "AWS_ENDPOINT_URL": endpoint})
        boto3.client("s3").create_bucket(Bucket="bench")
        uri = f"s3://bench/index-{args.chunks}"
        start = time.perf_counter()
        build_synthetic_index(uri, args.chunks)  # type: ignore[arg-type]  # a URI, as IndexStore takes
        print(f"built {uri} in {time.perf_counter() - start:.1f} s", flush=True)
        measurements = []
        for round_number in range(args.rounds):
            for label, source in trees.items():
                cache = work / f"cache-{label}-{round_number}"
                os.environ["LONGEMBED_INDEX_CACHE"] = str(cache)
                for cache_state in ("cold", "warm"):  # cold: each of the two opens starts with an empty cache
                    if cache_state == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    alone = index_only(source, uri)
                    if cache_state == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    result = {"tree": label, "round": round_number, "cache": cache_state, **alone,
                              **measure(source, uri, args.searches)}  # type: ignore[arg-type]
                    measurements.append(result)
                    print(json.dumps(result), flush=True)
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(measurements, indent=1))
    print("\n| chunks | tree | cache | index open s (median; all) | open with model s (median; all) | peak RSS MiB "
          "| p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for label in trees:
        for cache_state in ("cold", "warm"):
            rows = [m for m in measurements if m["tree"] == label and m["cache"] == cache_state]
            print(f"| {args.chunks:,} | {label} | {cache_state} | {spread([m['index_open_s'] for m in rows])} | "
                  f"{spread([m['open_s'] for m in rows])} | "
                  f"{np.median([m['after_searches']['VmHWM'] for m in rows]) / 2**20:.0f} | "
                  f"{1000 * np.median([m['p50_s'] for m in rows]):.1f} |")


def spread(values: list[float]) -> str:
    """"1.23 (1.20, 1.23, 1.40)": the median, then every value."""
    return f"{np.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"


if __name__ == "__main__":
    main()
