"""What a command costs before it does anything: ``--help`` and a fully cached ``eval`` rerun, as ratios.

Each command runs in a fresh interpreter, alternated round by round with the baselines measured in
the same run (``python -c "import torch"`` and ``python -c "import torch, transformers"``), so the
ratios hold on a noisy shared machine.  With ``--before-src`` the same commands also run on another
checkout's ``src`` folder (e.g. main before a change), alternated too.

    git clone -q . /tmp/before && git -C /tmp/before checkout -q <commit>
    python benchmarks/bench_startup.py --before-src /tmp/before/src --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
EVAL_ARGS = ["eval", "--model", "default", "--method", "pi", "--max-length", "1024", "--tasks", "passkey",
             "--lengths", "256,1024", "--no-estimate"]


def timed(argv: list[str], src: Path | None) -> float:
    """Wall seconds of one command; ``src`` first on PYTHONPATH (None: the installed longembed)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def commands(versions: dict[str, Path], work: Path) -> dict[str, tuple[list[str], Path | None]]:
    """name -> (argv, src): the baselines and, per version, help and a cached eval rerun."""
    python = sys.executable
    out: dict[str, tuple[list[str], Path | None]] = {
        "import torch": ([python, "-c", "import torch"], None),
        "import torch, transformers": ([python, "-c", "import torch, transformers"], None),
    }
    for version, src in versions.items():
        cli = [python, "-m", "longembed.cli.main"]
        cache = ["--cache-dir", str(work / f"cache-{version}"), "--output", str(work / f"run-{version}")]
        out[f"{version}: longembed --help"] = ([*cli, "--help"], src)
        out[f"{version}: longembed eval --help"] = ([*cli, "eval", "--help"], src)
        out[f"{version}: cached eval rerun"] = ([*cli, *EVAL_ARGS, *cache], src)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before-src", type=Path, default=None, help="another checkout's src folder")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    versions = {"after": SRC} if args.before_src is None else {"before": args.before_src, "after": SRC}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs = commands(versions, work)
        for name, (argv, src) in runs.items():  # warm the caches (the first eval run embeds everything)
            if "eval rerun" in name:
                print(f"warming {name} ...", flush=True)
                timed(argv, src)
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for round_ in range(args.rounds):
            for name, (argv, src) in runs.items():
                seconds[name].append(timed(argv, src))
            print(f"round {round_ + 1}/{args.rounds} done", flush=True)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    torch_s, both_s = median["import torch"], median["import torch, transformers"]
    print(f"\n{'command':42s} {'median s':>9s} {'min s':>7s} {'/ import torch':>15s} {'/ torch+transformers':>21s}")
    for name, values in seconds.items():
        print(f"{name:42s} {median[name]:9.2f} {min(values):7.2f} {median[name] / torch_s:15.2f} "
              f"{median[name] / both_s:21.2f}")


if __name__ == "__main__":
    main()
