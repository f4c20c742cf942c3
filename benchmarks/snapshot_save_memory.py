"""Peak memory of saving a version's snapshot at the end of a build (issue 53): the vectors streamed in
blocks into ``vectors.npy`` and no chunk texts read, against a tree that reads the whole table.

Builds ``index_open.py``'s synthetic hybrid index (once, at ``--work-dir``), then in a fresh process per
tree and round opens its complete table and saves its snapshot to a temporary folder
(``version_snapshot`` + ``write_snapshot``, as ``save_snapshot`` does), reporting seconds and VmHWM.

    python benchmarks/snapshot_save_memory.py --chunks 100000 --src new=src --src before=/work/main/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from index_open import build_synthetic_index

#: one save, in a fresh process with one source tree on PYTHONPATH (either version_snapshot signature)
MEASURE = r"""
import inspect, json, sys, tempfile, time
from pathlib import Path
from longembed.search import table_snapshot
from longembed.search.snapshot import VECTORS, write_snapshot
from longembed.search.store import IndexStore
path = sys.argv[1]
table = IndexStore(path).complete_table()
folder = Path(tempfile.mkdtemp())
start = time.perf_counter()
streams = "vectors_file" in inspect.signature(table_snapshot.version_snapshot).parameters
snapshot = table_snapshot.version_snapshot(table, path, "x", *([folder / VECTORS] if streams else []))
write_snapshot(snapshot, folder)
seconds = time.perf_counter() - start
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "peak_mib": peak / 2**20}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--src", action="append", default=None, metavar="LABEL=PATH")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in (args.src or ["new=src"]))
    path = (args.work_dir or Path(tempfile.mkdtemp(prefix="snapshot_save-"))) / f"index-{args.chunks}"
    if not path.exists():
        build_synthetic_index(path, args.chunks)
    for round_number in range(args.rounds):
        for label, source in trees.items():
            environment = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
            done = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True,
                                  env=environment, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({"chunks": args.chunks, "tree": label, "round": round_number, **result}), flush=True)


if __name__ == "__main__":
    main()
