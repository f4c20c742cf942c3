"""How far from its teacher does a retrofit's student start, for each ALiBi slope scale? (issue 27)

``longembed retrofit`` builds the student from the teacher by removing its position table and adding
bidirectional ALiBi, -s * m_h |i - j| with Jina's slopes m_h times a scale s (``--slope-scale``).  At
step 0 every other weight is the teacher's, so the student's distance to the teacher is the price of
the position change alone: it is what distillation must recover.  This script measures it, before any
training, on text the retrofit never trains on (the held-out SQuAD articles' paragraphs, joined and cut
into windows of L tokens as training batches are):

* the cosine of the student's mean-pooled vector to the teacher's, per window (mean and min), for each
  scale, and for "no positions" (every slope 0: the teacher with its position table zeroed, the limit of
  a small scale);
* each scale's *reach*: the distance at which the steepest head's bias falls to -10 (its weights
  e^-10 of a neighbour's), 10 / (s * m_max); a head past its reach hardly reads anything.

    python benchmarks/retrofit_start.py --model /work/models/all-MiniLM-L6-v2 --data-dir ../shared/data \
        --scales 1 0.5 0.25 0.125 --lengths 64 256 512 --out benchmarks/results/retrofit_start.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from longembed.loading import resolve_model
from longembed.training.data import held_out_squad_articles
from longembed.training.retrofit.data import token_stream
from longembed.training.retrofit.student import build_student, load_teacher, teacher_window

REACH_BIAS = 10.0  # the bias at which a head's weight is e^-10 of its neighbour's


def windows(tokenizer, data_dir: Path, articles: int, length: int, count: int) -> torch.Tensor:
    """``count`` windows of ``length`` tokens ([CLS] body [SEP]) cut in order from the held-out paragraphs."""
    held = held_out_squad_articles(data_dir, articles)
    stream = token_stream([p["context"] for a in held for p in a["paragraphs"]], tokenizer)
    body = length - 2
    count = min(count, len(stream) // body)
    if count == 0:
        raise SystemExit(f"the held-out paragraphs hold {len(stream)} tokens: not one window of {length}")
    rows = torch.from_numpy(stream[: count * body].reshape(count, body))
    cls = torch.full((count, 1), tokenizer.cls_token_id)
    sep = torch.full((count, 1), tokenizer.sep_token_id)
    return torch.cat([cls, rows, sep], dim=1)


@torch.no_grad()
def pooled(model: torch.nn.Module, ids: torch.Tensor, batch_size: int = 8) -> torch.Tensor:
    """Mean-pooled last-layer states (no padding: every window has the same length)."""
    return torch.cat([model(ids[i : i + batch_size]).last_hidden_state.mean(1) for i in range(0, len(ids), batch_size)])


def cosines(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
    return {"cosine_mean": round(float(cos.mean()), 4), "cosine_min": round(float(cos.min()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the teacher: a BERT folder with a learned position table")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.5, 0.25, 0.125])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 512])
    parser.add_argument("--windows", type=int, default=24, help="windows per length")
    parser.add_argument("--held-out-articles", type=int, default=5, help="as retrofit's default")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    torch.manual_seed(0)
    source = resolve_model(args.model)
    teacher = load_teacher(source)
    tokenizer = AutoTokenizer.from_pretrained(str(source.transformer_path))  # as the retrofit plans its batches
    lo = teacher_window(teacher.config)
    students = {}
    for scale in args.scales:
        students[f"scale {scale:g}"] = build_student(teacher, lo, scale).eval()
    flat = build_student(teacher, lo).eval()
    for layer in flat.encoder.layer:
        layer.attention.self.alibi_slopes.zero_()
    students["no positions"] = flat

    rows = []
    for length in args.lengths:
        ids = windows(tokenizer, args.data_dir, args.held_out_articles, min(length, lo), args.windows)
        target = pooled(teacher, ids)
        for name, student in students.items():
            slopes = student.encoder.layer[0].attention.self.alibi_slopes
            steepest = float(slopes.max())
            reach = round(REACH_BIAS / steepest, 1) if steepest > 0 else None
            rows.append({"student": name, "length": ids.shape[1], "windows": len(ids), "reach_tokens": reach,
                         **cosines(pooled(student, ids), target)})
            print(json.dumps(rows[-1]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"model": str(args.model), "rows": rows}, indent=2))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
