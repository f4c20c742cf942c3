"""How many torch threads a forward of a given size should use (issue 54, item 3): one forward of B
texts of T tokens timed with torch's default threads and with one thread, alternated, per size.

A one-sentence query is too small to share across threads: waking a sleeping second thread (or waiting
for a busy core) costs more than it saves.  A 512-token text is not: two threads nearly halve it.  The
encoder runs forwards of at most :data:`longembed.threads.SMALL_INPUT_TOKENS` padded tokens on one thread;
this script is where that threshold comes from.  Each size is timed in rounds, each round one call per
setting in alternating order, so a change in the machine's load hits both settings alike; it reports the
median milliseconds per setting and their ratio (one JSON line per size, then a markdown table).

``one-thread`` sets ``torch.set_num_threads(1)`` around the forward and restores it after (what the
encoder does), so it pays the switch both ways; ``rule`` is the encoder as shipped (whichever the rule
picks).  Run it alone on the machine (other work inflates every number):

    python benchmarks/small_input_threads.py --output benchmarks/results/small_input_threads

Small, to check that it runs: ``--tokens 8,128 --rounds 5``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from longembed.encoder import load_encoder
from longembed.threads import SMALL_INPUT_TOKENS, forced_threads

WORD = "retrieval "


def text_of(encoder, tokens: int) -> str:
    """A text of exactly ``tokens`` tokens with its special tokens (MiniLM: one token per repeated word)."""
    words = max(tokens - 2, 1)
    text = (WORD * words).strip()
    n = len(encoder.runner.tokenize(text)[0].ids)
    if n != tokens:
        raise SystemExit(f"the filler text has {n} tokens, wanted {tokens}")
    return text


def timed_ms(call: Callable[[], object]) -> float:
    began = time.perf_counter()
    call()
    return 1000 * (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--tokens", default="8,16,32,64,96,128,192,256,384,512", help="text lengths (tokens)")
    parser.add_argument("--batch", default="1", help="texts per forward, comma-separated")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--output", type=Path, default=None, help="folder for results.jsonl and table.md")
    args = parser.parse_args()

    encoder = load_encoder(args.model)
    default = torch.get_num_threads()
    settings: dict[str, Callable[[Callable[[], object]], float]] = {
        f"default ({default})": lambda call: _with_threads(None, call),
        "one-thread": lambda call: _with_threads(1, call),
        "rule": lambda call: timed_ms(call),
    }
    rows = []
    for batch in [int(b) for b in args.batch.split(",")]:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            texts = [text_of(encoder, tokens)] * batch

            def forward(texts: list[str] = texts, batch: int = batch) -> object:
                return encoder.encode(texts, batch_size=batch)

            for _ in range(3):
                forward()
            times: dict[str, list[float]] = {name: [] for name in settings}
            names = list(settings)
            for r in range(args.rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    times[name].append(settings[name](forward))
            row = {"batch": batch, "tokens": tokens, "padded_tokens": batch * tokens, "torch_threads": default,
                   "rounds": args.rounds, "rule_threshold": SMALL_INPUT_TOKENS}
            row.update({f"{name} ms": round(statistics.median(t), 2) for name, t in times.items()})
            d, one = row[f"default ({default}) ms"], row["one-thread ms"]
            row["one/default"] = round(one / d, 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = _table(rows, default)
    print(table)
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (args.output / "table.md").write_text(table)


def _with_threads(threads: int | None, call: Callable[[], object]) -> float:
    """``call`` timed with the rule switched off: torch's own threads (None) or ``threads`` set around it."""
    with forced_threads(threads):
        return timed_ms(call)


def _table(rows: list[dict], default: int) -> str:
    lines = [f"| batch | tokens | default ({default}) ms | one thread ms | one/default | rule ms |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['tokens']} | {r[f'default ({default}) ms']} | {r['one-thread ms']} | "
                     f"{r['one/default']} | {r['rule ms']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
