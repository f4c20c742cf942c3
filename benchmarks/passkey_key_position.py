"""Where in a passkey document does a model find the key?  Accuracy@1 by the key sentence's offset.

Passkey documents hide one key sentence at a random sentence boundary of the filler
(``longembed.tasks.passkey``).  A run's ``results.json`` keeps each query's score; this script rebuilds
the same documents (same task, seed and queries per length), finds where each query's key sentence
starts (in words from the document's start) and groups the scores by that offset.  It needs no
model: the scores are the run's.

    python benchmarks/passkey_key_position.py --data-dir ../shared/data \\
        results/runs/retrofit-minilm-alibi-600-syn-200 results/runs/minilm-truncate-200 \\
        --lengths 1024 2048 4096 --out benchmarks/results/passkey_key_position.json

A model that reads a whole document should not care where the key is; truncation to 512 tokens
finds keys only in its first ~380 words.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from longembed.results import RunResults
from longembed.results.files import write_json
from longembed.results.intervals import bootstrap_interval
from longembed.tasks.passkey import PasskeyTask, key_sentence_offset

#: Word offsets of the key sentence that the scores are grouped by: [0, 100), [100, 200), ...
OFFSET_EDGES = (0, 100, 200, 400, 800, 1600, 3200, 7000)


def key_offsets(task: PasskeyTask, data_dir: Path, length: int) -> dict[str, int]:
    """Query id -> the word offset of its key sentence in its relevant document, at ``length``."""
    data = task.load(data_dir, length)
    return {query: key_sentence_offset(data.corpus[next(iter(relevant))]) for query, relevant in data.qrels.items()}


def scores_by_offset(run: RunResults, data_dir: Path, lengths: list[int]) -> list[dict[str, object]]:
    """accuracy@1 of the run's passkey queries at ``lengths`` (pooled), per offset bin, with intervals."""
    unit_lengths = run.tasks["passkey"].lengths
    task = PasskeyTask(queries_per_length=run.config.task_options.get("queries_per_length", 50))
    pairs = []
    for length in lengths:
        if length not in unit_lengths:
            raise ValueError(f"the run has no passkey scores at length {length}")
        offsets = key_offsets(task, data_dir, length)
        pairs += [(offsets[q], score) for q, score in unit_lengths[length].per_query.items()]
    rows = []
    for low, high in zip(OFFSET_EDGES, OFFSET_EDGES[1:], strict=False):
        scores = [s for o, s in pairs if low <= o < high]  # per-query scores are in % already
        if scores:
            rows.append({"words": f"{low}-{high}", "queries": len(scores), "accuracy@1": str(bootstrap_interval(scores))})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (results.json with per-query scores)")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--lengths", nargs="+", type=int, required=True, help="passkey lengths to pool")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    out = []
    for folder in args.runs:
        run = RunResults.load(folder / "results.json")
        lengths = [n for n in args.lengths if n in run.tasks["passkey"].lengths]
        for row in scores_by_offset(run, args.data_dir, lengths):
            row = {"run": folder.name, "lengths": lengths, **row}
            print(json.dumps(row))
            out.append(row)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.out, out)


if __name__ == "__main__":
    main()
