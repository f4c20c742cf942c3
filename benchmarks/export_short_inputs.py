"""What an exported (plain) extended model does to short inputs, measured.

A plain model has one position map for every input, so an exported PI/GP model reads a short input
on interpolated rows, where longembed (``apply_to="long"``) keeps the original rows.  For each model
folder this exports the method, embeds short texts (SQuAD dev questions and paragraphs, <= Lo tokens)
with ``SentenceTransformer(exported)`` and with the original model, and prints the cosine between the
two vectors of each text (1.0 = unchanged), plus the check that long inputs match longembed.

    python benchmarks/export_short_inputs.py --models /work/models/all-MiniLM-L6-v2 \\
        /work/models/multilingual-e5-small --tuned runs/tuned/minilm-pi-4k --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from longembed import load_encoder
from longembed.export import export_model
from longembed.training.data import squad_pairs


def short_texts(data_dir: Path, n: int) -> list[str]:
    pairs = squad_pairs(data_dir).pairs
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(pairs), size=n, replace=False)
    texts = [pairs[i].query for i in chosen[: n // 2]] + [pairs[i].positive for i in chosen[n // 2 :]]
    return list(dict.fromkeys(texts))


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def measure(model: str, method: str | None, max_length: int | None, texts: list[str], long_text: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = export_model(model, method, max_length, Path(tmp) / "plain")
        plain = SentenceTransformer(str(folder), device="cpu")
        extended = load_encoder(model, method=method, max_length=max_length)
        original = load_encoder(model, method="truncate")  # a tuned folder: its original rows
        short_plain = plain.encode(texts, batch_size=32)
        short_original = original.encode(texts, batch_size=32)
        c = cosines(short_plain, short_original)
        long_gap = float(np.abs(plain.encode([long_text]) - extended.encode([long_text])).max())
        row = {}
        tuning = Path(model) / "longembed_tuning.json"
        if tuning.is_file():  # a tuned folder in longembed vs the model it was tuned from
            base = load_encoder(json.loads(tuning.read_text())["base_model"], method="truncate")
            row["longembed_tuned_vs_base_short_max_abs_diff"] = float(
                np.abs(extended.encode(texts, batch_size=32) - base.encode(texts, batch_size=32)).max()
            )
    return {
        "model": model,
        "method": extended.method,
        "max_length": extended.max_length,
        "short_texts": len(texts),
        "cosine_mean": round(float(c.mean()), 4),
        "cosine_min": round(float(c.min()), 4),
        "long_input_max_abs_diff_vs_longembed": long_gap,
        **row,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=[], help="original model folders (exported with --methods)")
    parser.add_argument("--methods", nargs="+", default=["pi", "gp", "rp"])
    parser.add_argument("--tuned", nargs="*", default=[], help="folders written by longembed tune")
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--texts", type=int, default=200)
    args = parser.parse_args()
    texts = short_texts(args.data_dir, args.texts)
    long_text = " ".join(squad_pairs(args.data_dir).pairs[i].positive for i in range(0, 400, 20))
    rows = [measure(m, method, args.max_length, texts, long_text) for m in args.models for method in args.methods]
    rows += [measure(t, None, None, texts, long_text) for t in args.tuned]
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
