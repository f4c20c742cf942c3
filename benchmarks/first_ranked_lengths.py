"""Are short documents ranked first too often?  First-ranked documents by document length, per run.

Length collapse (the third paper) says long texts' vectors crowd together; a short query then lies
nearer to the few documents that are short, whichever it asks for.  A run's ``results.json`` keeps
each query's first-ranked document (``first_ranked``, longembed >= the hub diagnostic); this script
reads the task's corpus, splits its documents into quintiles by length (words) and counts, per run,
how many queries rank a document of each quintile first, against how many queries *ask* for one
(the count perfect retrieval gives).  It needs no model: the rankings are the run's.

    python benchmarks/first_ranked_lengths.py --task qmsum --data-dir ../shared/data \\
        results/runs/minilm-pi-4k-real results/runs/retrofit-minilm-alibi-600-real-4k \\
        --out benchmarks/results/first_ranked_lengths_qmsum.json

A model whose vectors do not collapse puts about as many first documents in each quintile as the
queries ask for; one that collapses piles them into the shortest.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from longembed.results import RunResults
from longembed.results.files import write_json
from longembed.tasks import get_task

QUINTILES = 5


def length_quintiles(words: dict[str, int]) -> dict[str, int]:
    """Document id -> its length quintile (0: the shortest fifth), by words, ties by id."""
    ordered = sorted(words, key=lambda d: (words[d], d))
    return {doc: QUINTILES * i // len(ordered) for i, doc in enumerate(ordered)}


def first_ranked_by_quintile(run: RunResults, task: str, words: dict[str, int],
                             qrels: dict[str, dict[str, int]]) -> dict[str, object]:
    """Queries whose first document falls in each length quintile, against queries asking for one
    there (a query asking for several documents counts once, for its first judged one)."""
    unit = run.tasks[task]
    if unit.first_ranked is None:
        raise SystemExit(f"{task} in this run kept no first-ranked documents (written before longembed kept "
                         "them): rescore it with the same `longembed eval` command (cached, it takes seconds)")
    quintile = length_quintiles(words)
    first, asked = [0] * QUINTILES, [0] * QUINTILES
    for query, doc in unit.first_ranked.items():
        first[quintile[doc]] += 1
        asked[quintile[next(d for d, rel in qrels[query].items() if rel > 0)]] += 1
    return {
        "score": unit.score,
        "queries": len(unit.first_ranked),
        "first_ranked_by_quintile": first,
        "asked_by_quintile": asked,
        "median_words_first_ranked": statistics.median(words[d] for d in unit.first_ranked.values()),
        "median_words_asked": statistics.median(
            words[next(d for d, rel in qrels[q].items() if rel > 0)] for q in unit.first_ranked),
        "top": None if unit.first_ranked_stats is None else unit.first_ranked_stats.to_dict(),
        "top_document_words": None if unit.first_ranked_stats is None
        else words[unit.first_ranked_stats.top_document],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or results.json files)")
    parser.add_argument("--task", default="qmsum", help="a real task of the runs (default: qmsum)")
    parser.add_argument("--data-dir", type=Path, required=True, help="the data folder the runs read")
    parser.add_argument("--out", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args()
    data = get_task(args.task).load(args.data_dir)
    words = {doc: len(text.split()) for doc, text in data.corpus.items()}
    bounds = sorted(words.values())
    edges = [bounds[len(bounds) * i // QUINTILES] for i in range(QUINTILES)] + [bounds[-1]]
    print(f"{args.task}: {len(words)} documents; length quintiles (words): "
          + ", ".join(f"{edges[i]:,}..{edges[i + 1]:,}" for i in range(QUINTILES)))
    found = {}
    for path in args.runs:
        run = RunResults.load(path)
        found[str(path)] = row = first_ranked_by_quintile(run, args.task, words, data.qrels)
        shares = "  ".join(f"{f / row['queries']:4.0%}/{a / row['queries']:4.0%}"
                           for f, a in zip(row["first_ranked_by_quintile"], row["asked_by_quintile"], strict=True))
        print(f"{path.name:<40} score {row['score']:5.1f}  first/asked by quintile, shortest first: {shares}  "
              f"median words {row['median_words_first_ranked']:,.0f} / {row['median_words_asked']:,.0f}")
    if args.out is not None:
        write_json(args.out, {"task": args.task, "quintile_edges_words": edges, "runs": found})


if __name__ == "__main__":
    main()
