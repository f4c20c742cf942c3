"""The table of issue 45: trained late chunks against every other strategy, per task and length, from the runs
and the comparison that ``benchmarks/contextual/evaluate.sh`` writes.

    python benchmarks/contextual/summarize.py runs/contextual/eval --out results/contextual/summary.md

Two tables: each strategy's score with its 95% interval (percentile bootstrap over the queries), and
"trained late - X": the paired difference with its 95% interval and its p-value (the paired sign-flip test of
``longembed compare --baseline trained-late``), Holm-adjusted here over every test shown, bold when
significant.  The units of ``EVAL/squality-full`` (``evaluate_squality.sh``: SQuALITY on its whole corpus)
replace the sampled ones of the same task, in both tables and in the adjustment.  Reads only the files;
nothing is encoded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from longembed.results import RunResults
from longembed.results.paired import holm

BASELINE = "trained-late"
STRATEGIES = ("trained-late", "original-late", "original-naive", "bm25", "trained-late+bm25",
              "original-late+bm25", "original-naive+bm25")
LABELS = {
    "trained-late": "trained late",
    "original-late": "original late",
    "original-naive": "original naive",
    "bm25": "BM25",
    "trained-late+bm25": "trained late + BM25",
    "original-late+bm25": "original late + BM25",
    "original-naive+bm25": "original naive + BM25",
}


def unit_scores(run: Path) -> dict[tuple[str, int | None], tuple[float, float, float, int]]:
    """(task, length) -> (score, low, high, queries) of one run."""
    results = RunResults.load(run)
    return {(task, length): (unit.score, unit.interval.low, unit.interval.high, len(unit.per_query))
            for task, result in results.tasks.items() for length, unit in result.units().items()}


def where(task: str, length: int | None) -> str:
    return task if length is None else f"{task} {length // 1024}k"


def score_table(scores: dict[str, dict]) -> list[str]:
    names = [n for n in STRATEGIES if n in scores]
    units = list(scores[BASELINE])
    lines = ["| task | queries | " + " | ".join(LABELS[n] for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for unit in units:
        cells = []
        best = max(scores[n][unit][0] for n in names if unit in scores[n])
        for n in names:
            if unit not in scores[n]:
                cells.append("–")
                continue
            score, low, high, _ = scores[n][unit]
            text = f"{score:.1f} [{low:.1f}, {high:.1f}]"
            cells.append(f"**{text}**" if score == best else text)
        lines.append(f"| {where(*unit)} | {scores[BASELINE][unit][3]} | " + " | ".join(cells) + " |")
    return lines


def differences(comparison: dict) -> dict[tuple[str, int | None], dict[str, dict]]:
    """(task, length) -> other strategy -> the unit's difference record, turned to "trained late - X"."""
    out: dict[tuple[str, int | None], dict[str, dict]] = {}
    for pair in comparison["pairs"]:
        if BASELINE not in (pair["a"], pair["b"]):
            continue
        other, sign = (pair["b"], -1.0) if pair["a"] == BASELINE else (pair["a"], 1.0)
        for d in pair["differences"]:
            if d["level"] != "unit":
                continue
            diff = d["difference"]
            low, high = sorted((sign * diff["low"], sign * diff["high"]))
            out.setdefault((d["task"], d["length"]), {})[other] = {
                "estimate": sign * diff["estimate"], "low": low, "high": high, "p": d["p_value"]}
    return out


def difference_table(rows: dict[tuple[str, int | None], dict[str, dict]], alpha: float) -> list[str]:
    """The rows with every p-value Holm-adjusted together."""
    others = [n for n in STRATEGIES if n != BASELINE and any(n in r for r in rows.values())]
    tests = [(unit, other) for unit, r in rows.items() for other in others if other in r]
    adjusted = dict(zip(tests, holm([rows[u][o]["p"] for u, o in tests]), strict=True))
    lines = ["| task | " + " | ".join(f"trained late - {LABELS[o]}" for o in others) + " |",
             "|---|" + "---|" * len(others)]
    for unit, r in rows.items():
        cells = []
        for other in others:
            if other not in r:
                cells.append("–")
                continue
            d, p = r[other], adjusted[unit, other]
            text = f"{d['estimate']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}] p={p:.3f}"
            cells.append(f"**{text}**" if p < alpha else text)
        lines.append(f"| {where(*unit)} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("eval_dir", type=Path, help="the OUT folder of evaluate.sh")
    parser.add_argument("--out", type=Path, required=True, help="the markdown file to write")
    args = parser.parse_args(argv)
    scores = {n: unit_scores(args.eval_dir / n) for n in STRATEGIES if (args.eval_dir / n / "results.json").is_file()}
    comparison = json.loads((args.eval_dir / "comparison" / "comparison.json").read_text())
    rows = differences(comparison)
    full = args.eval_dir / "squality-full"
    if (full / "comparison" / "comparison.json").is_file():
        for name in scores:
            scores[name].pop(("squality", None), None)
            scores[name].update(unit_scores(full / name))
        rows.pop(("squality", None), None)
        rows.update(differences(json.loads((full / "comparison" / "comparison.json").read_text())))
    tests = sum(len(r) for r in rows.values())
    text = [f"Scores (main metric, %, 95% interval over the queries; best of a row in bold), from `{args.eval_dir}`:", "",
            *score_table(scores), "",
            f"Paired differences, trained late chunks minus each strategy (95% paired bootstrap interval; p: sign-flip "
            f"test, Holm-adjusted over all {tests} tests shown; bold: significant at {comparison['alpha']}):", "",
            *difference_table(rows, comparison["alpha"]), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
