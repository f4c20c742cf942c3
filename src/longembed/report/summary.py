"""The decision table (``longembed report --summary RUNS...``): per model, task and length, the best
strategy with its interval, the strategies about as good, and what each costs.

    >>> from longembed.report.table import load_table
    >>> from longembed.report.summary import decision_table, summary_markdown
    >>> print(summary_markdown(decision_table(load_table(["results/runs"]))))

**Cells.** The main score of every unit (a real task, or a synthetic task at one length) of every run,
grouped by model, task, length and data fingerprint: only runs that scored the same documents, queries
and judgements share a cell (a passkey at 200 queries per length and the same queries among blocks of
50 documents are two cells).  A BM25 run has no model; it joins every model's cell on the same data.

**The rule** (:mod:`longembed.results.noninferiority`, the one ``longembed advise`` applies): the best
is the highest score; every other strategy of the cell is compared with it query by query (the paired
percentile bootstrap of :func:`longembed.results.paired.difference_interval`, the numbers
``longembed compare`` prints) at the Bonferroni-adjusted confidence 1 - 0.05 / m for the m strategies
compared with the best; **tied** ("within") when the lower end is above -margin (default 2 points),
**worse** when the upper end is below -margin, else **undecided**.

**Cost**: the tokens of a document the model reads (min(the documents' mean tokens, Lt); BM25 reads
none), what the committed runs record for every strategy (their encode seconds are 0 when rescored from
the embedding cache, and were measured under shared load otherwise: ``longembed advise`` measures
seconds alone).  **Use**: the cheapest by that cost of the best and the strategies tied with it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from longembed.errors import UserError
from longembed.report.formatting import MISSING, length_title, md_table
from longembed.report.table import BM25_STRATEGY, ScoreRow, ScoreTable
from longembed.results.comparison import UNIT
from longembed.results.noninferiority import (
    CONFIDENCE,
    MARGIN,
    RULE,
    UNDECIDED,
    WITHIN,
    WORSE,
    judge,
    simultaneous_confidence,
)
from longembed.results.paired import difference_interval
from longembed.results.run_results import Interval


@dataclass
class Contender:
    """One strategy in a cell: its run, score and interval, its cost, and (all but the best) its paired
    difference to the best with the 95% interval, the simultaneous bound and the verdict."""

    strategy: str
    run: str
    score: float
    interval: Interval | None
    tokens_per_document: float | None
    encode_time_s: float | None
    difference: Interval | None = None
    bound: Interval | None = None
    verdict: str | None = None  # WITHIN, WORSE, UNDECIDED; None: no per-query scores to compare


@dataclass
class DecisionCell:
    """The strategies that scored one model's task at one length on the same data, the best first."""

    model: str
    task: str
    length: int | None
    data: str
    data_sha256: str | None
    queries: int | None
    metric: str
    best: Contender
    others: list[Contender]

    def verdict(self, verdict: str) -> list[Contender]:
        return [c for c in self.others if c.verdict == verdict]

    @property
    def use(self) -> Contender:
        """The cheapest (fewest tokens read per document) of the best and the strategies tied with it."""
        return min([self.best, *self.verdict(WITHIN)], key=lambda c: (_tokens(c), -c.score))


@dataclass
class DecisionTable:
    cells: list[DecisionCell]
    margin: float
    rule: str
    confidence: float
    #: cells with one strategy (nothing to decide), named "model task length data: strategy"
    single: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cells": [{**asdict(c), "use": c.use.strategy} for c in self.cells]}


def decision_table(table: ScoreTable, margin: float = MARGIN, seed: int = 0) -> DecisionTable:
    """The decision table of ``table``'s runs (see the module docstring for the cells and the rule)."""
    if margin <= 0:
        raise UserError(f"the margin must be positive (points of the score), got {margin}")
    cells, single = [], []
    for key, rows in sorted(group_cells(table).items(), key=lambda item: _order(item[0])):
        if len(rows) < 2:
            single.append(f"{_cell_name(key)}: {rows[0].strategy}")
            continue
        cells.append(decide(key, rows, table, margin, seed))
    return DecisionTable(cells, margin, RULE, CONFIDENCE, single)


CellKey = tuple[str, str, "int | None", str, "str | None"]  # model, task, length, data, data fingerprint


def group_cells(table: ScoreTable) -> dict[CellKey, list[ScoreRow]]:
    """Main unit scores grouped by (model, task, length, data, fingerprint); BM25's rows join every
    model's cell on the same data (a cell of BM25 alone when no model scored that data)."""
    units = [r for r in table.rows if r.level == UNIT and r.main]
    cells: dict[CellKey, list[ScoreRow]] = defaultdict(list)
    for row in units:
        if row.strategy != BM25_STRATEGY:
            cells[(row.model, row.task, row.length, row.data, row.data_sha256)].append(row)
    for row in (r for r in units if r.strategy == BM25_STRATEGY):
        joined = [k for k in cells if (k[1], k[2], k[4]) == (row.task, row.length, row.data_sha256) and k[0] != row.model]
        for key in joined or [(row.model, row.task, row.length, row.data, row.data_sha256)]:
            cells[key].append(row)
    return cells


def decide(key: CellKey, rows: list[ScoreRow], table: ScoreTable, margin: float, seed: int) -> DecisionCell:
    """One cell: the best, each other strategy against it (paired, simultaneous bounds), the verdicts."""
    model, task, length, data, sha = key
    names = _strategy_names(rows)
    ordered = sorted(rows, key=lambda r: (-r.score, names[r.run]))
    best_row = ordered[0]
    best_scores = table.per_query(best_row.run, task, length)
    comparable = [r for r in ordered[1:] if best_scores is not None and table.per_query(r.run, task, length) is not None]
    level = simultaneous_confidence(len(comparable))
    others = []
    for row in ordered[1:]:
        contender = _contender(row, names)
        if row in comparable:
            differences = paired_differences(best_scores, table.per_query(row.run, task, length), row.run)  # type: ignore[arg-type]
            contender.difference = difference_interval({"queries": differences}, confidence=CONFIDENCE, seed=seed)
            contender.bound = difference_interval({"queries": differences}, confidence=level, seed=seed)
            contender.verdict = judge(contender.bound, margin)
        others.append(contender)
    return DecisionCell(model, task, length, data, sha, best_row.queries, best_row.metric,
                        _contender(best_row, names), others)


def paired_differences(best: dict[str, float], other: dict[str, float], run: str) -> list[float]:
    """other - best per query, in the best run's query order; the same queries or a ValueError."""
    if set(best) != set(other):
        raise UserError(f"{run}: scored other queries than the best run on the same data fingerprint")
    return [other[q] - best[q] for q in best]


def summary_markdown(decisions: DecisionTable, command: str | None = None) -> str:
    """The decision table as markdown: a section per model, a table per data set, a row per task and length."""
    lines = ["## Which strategy to use: the decision table", ""]
    if command:
        lines += [f"Generated by `{command}` (`--json` for every difference and bound).", ""]
    lines += [
        "Per model, task and length (runs on the same data only): the **best** strategy by score with its 95% "
        f"interval, and the others compared with it query by query. **Tied**: {decisions.rule}; margin "
        f"{decisions.margin:g} points (in brackets: the difference to the best). **Use**: the cheapest of the best "
        "and those tied with it, by the tokens of a document the model reads (min(mean document tokens, Lt); "
        "BM25 reads none).", "",
    ]
    sections: dict[str, dict[str, list[DecisionCell]]] = defaultdict(lambda: defaultdict(list))
    for cell in decisions.cells:
        sections[cell.model][cell.data].append(cell)
    header = ["task", "length", "queries", "best", "score [95%]", "tied with it", "undecided", "worse", "use",
              "tokens/doc"]
    for model, by_data in sections.items():
        lines += [f"### {model}", ""]
        for data, cells in by_data.items():
            lines += [f"Data: {data or 'as the task defines it'}.", "",
                      md_table(header, [_cell_row(c) for c in cells], 7, 8), ""]
    if decisions.single:
        models = sorted({name.split(" ")[0] for name in decisions.single})
        lines += [f"Left out, one strategy only (nothing to decide): {len(decisions.single)} cells, of "
                  f"{', '.join(models)} (each named in `--json`'s \"single\").", ""]
    return "\n".join(lines)


def _cell_row(cell: DecisionCell) -> list[str]:
    untested = [f"{c.strategy} (no per-query scores)" for c in cell.others if c.verdict is None]
    use = cell.use
    return [
        cell.task, MISSING if cell.length is None else length_title(cell.length),
        MISSING if cell.queries is None else str(cell.queries), cell.best.strategy, _score(cell.best),
        _named(cell.verdict(WITHIN)), "; ".join(filter(None, [_named(cell.verdict(UNDECIDED), ""), *untested])) or MISSING,
        f"{len(cell.verdict(WORSE))} of {len(cell.others)}", use.strategy, _cost(use),
    ]


def _named(contenders: list[Contender], empty: str = MISSING) -> str:
    """"truncate 512 (-0.5); pcw 4096 (-1.0)": strategies with their difference to the best."""
    return "; ".join(f"{c.strategy} ({c.difference.estimate:+.1f})" for c in contenders  # type: ignore[union-attr]
                     ) or empty


def _cost(c: Contender) -> str:
    tokens = _tokens(c)
    return MISSING if tokens == float("inf") else f"{tokens:,.0f}"


def _score(c: Contender) -> str:
    if c.interval is None:
        return f"{c.score:.1f}"
    return f"{c.score:.1f} [{c.interval.low:.1f}, {c.interval.high:.1f}]"


def _contender(row: ScoreRow, names: dict[str, str]) -> Contender:
    return Contender(names[row.run], row.run, row.score, row.interval, row.tokens_per_document, row.encode_time_s)


def _strategy_names(rows: Sequence[ScoreRow]) -> dict[str, str]:
    """Run -> the strategy as a cell shows it; the run's label where two runs of a cell share a strategy."""
    strategies = [r.strategy for r in rows]
    return {r.run: r.strategy if strategies.count(r.strategy) == 1 else f"{r.strategy} [{r.run}]" for r in rows}


def _tokens(c: Contender) -> float:
    """The cost a cell orders by: BM25 reads no model tokens; an unknown cost sorts last."""
    if c.strategy.startswith(BM25_STRATEGY):
        return 0.0
    return float("inf") if c.tokens_per_document is None else c.tokens_per_document


def _order(key: CellKey) -> tuple[Any, ...]:
    model, task, length, data, _ = key
    synthetic = length is not None
    return (model, data, not synthetic, task, length or 0)


def _cell_name(key: CellKey) -> str:
    model, task, length, data, _ = key
    return " ".join(p for p in [model, task, None if length is None else length_title(length), data] if p)
