"""Peak memory over the model's baseline when embedding one document of 2k, 8k, 16k tokens.

Each (model, method, length) runs in a fresh process: load the encoder, warm up on a short text,
read the peak RSS (the baseline), embed one document of exactly N tokens cut from the Paul Graham
essays, read the peak RSS again.  The difference is what the method needs for that length; it
should grow linearly with N (no n x n matrix per head).

    python benchmarks/bench_memory.py --models-dir DIR --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ("all-MiniLM-L6-v2", "pi"),
    ("nomic-embed-text-v1.5", "ntk"),
    ("nomic-embed-text-v1.5", "selfextend"),
]
LENGTHS = (2048, 8192, 16384)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def essays_text(data_dir: Path) -> str:
    files = sorted((data_dir / "paul_graham_essays" / "PaulGrahamEssays").glob("*.txt"))
    return " ".join(f.read_text() for f in files)


def measure(model: str, method: str, length: int, data_dir: Path) -> dict:
    """Run in the child process."""
    import torch

    from longembed import load_encoder

    torch.set_grad_enabled(False)
    encoder = load_encoder(model, method=method, max_length=length)
    text = essays_text(data_dir)
    ids = encoder.tokenizer(text, add_special_tokens=False)["input_ids"][: length - 2]
    doc = encoder.tokenizer.decode(ids)
    encoder.encode(["warm up on a short text"])
    baseline = peak_rss_mib()
    start = time.perf_counter()
    _, stats = encoder.encode([doc], return_stats=True)
    seconds = time.perf_counter() - start
    return {
        "model": Path(model).name,
        "method": method,
        "tokens": stats.longest_input_tokens,
        "baseline_mib": round(baseline, 1),
        "peak_mib": round(peak_rss_mib(), 1),
        "extra_mib": round(peak_rss_mib() - baseline, 1),
        "seconds": round(seconds, 2),
        "torch_threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, required=True)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--methods", default=None, help="only these methods, e.g. selfextend")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "METHOD", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, method, length = args.child
        print(json.dumps(measure(model, method, int(length), args.data_dir)))
        return
    rows = []
    for name, method in CASES:
        if args.methods and method not in args.methods.split(","):
            continue
        for length in map(int, args.lengths.split(",")):
            cmd = [
                sys.executable,
                __file__,
                "--models-dir",
                str(args.models_dir),
                "--data-dir",
                str(args.data_dir),
            ]
            cmd += ["--child", str(args.models_dir / name), method, str(length)]
            out = (
                subprocess.run(cmd, capture_output=True, text=True, check=True)
                .stdout.strip()
                .splitlines()[-1]
            )
            row = json.loads(out)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| model | method | tokens | baseline MiB | extra MiB | seconds |\n|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['method']} | {r['tokens']} | {r['baseline_mib']} | {r['extra_mib']} | {r['seconds']} |"
        )


if __name__ == "__main__":
    main()
