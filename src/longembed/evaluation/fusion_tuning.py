"""Tuned fusion: the rule that fuses a dense ranking with BM25's, chosen by K-fold cross-validation over
the user's own queries and scored out-of-fold, so that no query's reported score used its own label.

A fixed rule weighs the two systems alike: where BM25 is weak, RRF drags the dense ranking down (issue
56).  Here every rule of a grid (:func:`fusion_grid`: the linear mix at lexical weight 0, 0.05, ..., 1,
and RRF at several k) is scored on every query from the scores a hybrid run already computed (fusion is
arithmetic over stored scores: nothing is encoded again).  Then:

- **folds**: the queries are dealt into K folds (:func:`assign_folds`; seeded, each unit's queries
  shuffled and dealt in turn, so every fold holds a share of every task and length);
- **out-of-fold score**: each fold's queries are scored with the rule that maximises the run's average
  over the *other* folds' queries (nested: a query's own label never chose the rule that scores it);
  that per-query score is what advise reports, with the same bootstrap interval as every strategy;
- **the recorded rule** is the one that maximises the average over *all* queries: what an index built
  from the advice applies.  Its in-sample score is recorded too, and is optimistic by construction.

The objective is the run's average as :func:`~longembed.evaluation.scoring.average` computes it (the
mean of task scores, a synthetic task's the mean over its lengths), over the queries at hand.  Rules
that tie on it are resolved to the first in grid order (lexical weight ascending, then RRF by k).
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from longembed.errors import UserError
from longembed.evaluation.metrics import DEFAULT_K_VALUES, mean_metrics, per_query_metrics, same_vector_groups
from longembed.evaluation.scoring import (
    Unit,
    average,
    average_interval,
    candidates,
    percent_interval,
    task_result,
)
from longembed.results import RunResults, TaskResult, UnitResult, first_ranked_summary
from longembed.results.run_results import SECONDARY_METRICS
from longembed.retrieval.fusion import FUSE_SOURCES, Fusion
from longembed.retrieval.pipeline import DenseScores, rank_documents
from longembed.tasks import Task

#: the linear mix's lexical weights tried: 0 (dense alone) to 1 (BM25 alone) by 0.05
LINEAR_WEIGHTS = tuple(round(0.05 * i, 2) for i in range(21))
#: RRF's constants tried (60 is Cormack et al.'s; small k favours each system's top ranks)
RRF_KS = (1, 10, 30, 60, 100, 300)
#: folds of the cross-validation (fewer when there are fewer queries)
FOLDS = 5
#: objectives closer than this are ties (sums of per-query percentages in another order)
TIE = 1e-9


def fusion_grid(source: str = FUSE_SOURCES[0]) -> list[Fusion]:
    """The rules tuning chooses from, in tie-break order: linear by weight, then RRF by k."""
    return ([Fusion(source, "linear", weight=w) for w in LINEAR_WEIGHTS]
            + [Fusion(source, "rrf", k=k) for k in RRF_KS])


@dataclass
class StoredUnit:
    """One unit's scores as a hybrid run computed them, before fusion: its task, the unit (data and
    label), the dense side (MaxSim over chunks done) and BM25's scores."""

    task: Task
    unit: Unit
    dense: DenseScores
    lexical: np.ndarray

    def ranking(self, fusions: Sequence[Fusion]) -> dict[str, list[str]]:
        """Query id -> its ranked document ids (top 100, as eval ranks), each query (in the unit's query
        order) fused by its own rule; ranked exactly as eval and search rank (``rank_documents``)."""
        data = self.unit.data
        doc_ids, query_ids = list(data.corpus), list(data.queries)
        allowed = candidates(data, query_ids, doc_ids)
        ranking: dict[str, list[str]] = {}
        for fusion in dict.fromkeys(fusions):
            rows = np.flatnonzero([f == fusion for f in fusions])
            ranked = rank_documents(
                doc_ids, max(DEFAULT_K_VALUES), dense=DenseScores(self.dense.scores[rows], self.dense.best_chunk[rows]),
                lexical=self.lexical[rows], fusion=fusion, allowed=None if allowed is None else allowed[rows],
            )
            for row, order in zip(rows, ranked.order, strict=True):
                ranking[query_ids[row]] = [doc_ids[d] for d in order]
        return ranking

    def per_query(self, fusions: Sequence[Fusion]) -> dict[str, dict[str, float]]:
        """Metric -> query id -> value in [0, 1], each query fused by its own rule."""
        return per_query_metrics(self.unit.data.qrels, self.ranking(fusions))


@dataclass(frozen=True)
class QueryTable:
    """Every rule's score on every scored query: ``scores[rule, query]`` (percent, the main metric);
    ``unit[query]`` the query's unit (an index into ``weights``, each unit's weight in the run's average)."""

    keys: list[tuple[str, str]]  # (unit label, query id)
    unit: np.ndarray
    weights: np.ndarray
    scores: np.ndarray

    def objective(self, chosen: np.ndarray) -> np.ndarray:
        """Each rule's run average over the ``chosen`` queries (booleans): per unit the mean over its chosen
        queries, weighted as the run's average weighs the unit (a unit with none chosen is left out)."""
        total = np.zeros(len(self.scores))
        for u, weight in enumerate(self.weights):
            mine = chosen & (self.unit == u)
            if mine.any():
                total += weight * self.scores[:, mine].mean(axis=1)
        return total

    def best(self, chosen: np.ndarray) -> int:
        """The rule with the highest objective over ``chosen`` (ties: the first in grid order)."""
        objective = self.objective(chosen)
        return int(np.flatnonzero(objective >= objective.max() - TIE)[0])


def query_table(stored: Sequence[StoredUnit], grid: Sequence[Fusion]) -> QueryTable:
    """Every rule of ``grid`` scored on every query of ``stored`` (each unit ranked once per rule)."""
    per_task = {}
    for s in stored:
        per_task[s.task.metadata.name] = per_task.get(s.task.metadata.name, 0) + 1
    keys, unit, weights, columns = [], [], [], []
    for u, s in enumerate(stored):
        main = s.task.metadata.main_score
        by_rule = [percent(s.per_query([rule] * len(s.unit.data.queries))[main]) for rule in grid]
        queries = list(by_rule[0])
        keys += [(s.unit.label, q) for q in queries]
        unit += [u] * len(queries)
        weights.append(1.0 / (len(per_task) * per_task[s.task.metadata.name]))
        columns.append(np.array([[scores[q] for q in queries] for scores in by_rule]).reshape(len(grid), len(queries)))
    return QueryTable(keys, np.asarray(unit, dtype=int), np.asarray(weights), np.concatenate(columns, axis=1))


def assign_folds(units: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each query's fold: per unit (in order) its queries shuffled by one seeded generator and dealt
    round-robin, the deal carried on from unit to unit (fold sizes differ by at most one)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(units), dtype=int)
    dealt = 0
    for u in np.unique(units):
        members = rng.permutation(np.flatnonzero(units == u))
        fold[members] = (dealt + np.arange(len(members))) % folds
        dealt += len(members)
    return fold


@dataclass(frozen=True)
class TunedFusion:
    """A cross-validated fusion: ``fusion`` fitted on all queries; ``fold_fusions[f]`` fitted without fold
    f, which scores fold f's queries; ``folds`` each query's fold (``table.keys`` order); ``out_of_fold``
    each query's score under its fold's rule; ``in_sample`` the fitted rule's average on all queries."""

    fusion: Fusion
    fold_fusions: tuple[Fusion, ...]
    folds: np.ndarray
    out_of_fold: np.ndarray
    in_sample: float
    seed: int

    def fold_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Fusion]:
        """(unit label, query id) -> the rule that scores it."""
        return {key: self.fold_fusions[f] for key, f in zip(keys, self.folds, strict=True)}

    def record(self) -> dict[str, Any]:
        """What advice.json keeps of the tuning: the rule, how it was chosen and what each fold chose."""
        return {"fitted": self.fusion.to_dict(), "folds": len(self.fold_fusions), "seed": self.seed,
                "grid": {"linear_weights": list(LINEAR_WEIGHTS), "rrf_k": list(RRF_KS)},
                "fold_fits": [f.to_dict() for f in self.fold_fusions],
                "queries_per_fold": np.bincount(self.folds, minlength=len(self.fold_fusions)).tolist(),
                "in_sample_score": round(self.in_sample, 4),
                "score": "out-of-fold: each query scored by the rule fitted on the other folds"}


def cross_validate(table: QueryTable, grid: Sequence[Fusion], folds: int = FOLDS, seed: int = 0) -> TunedFusion:
    """The nested choice (see the module docstring); ``folds`` is capped at the number of queries."""
    n = len(table.keys)
    if n < 2:
        raise UserError(f"a tuned fusion needs at least 2 judged queries to cross-validate, got {n}")
    folds = min(folds, n)
    fold = assign_folds(table.unit, folds, seed)
    chosen = [table.best(fold != f) for f in range(folds)]
    out_of_fold = table.scores[np.asarray(chosen)[fold], np.arange(n)]
    everything = np.ones(n, dtype=bool)
    fitted = table.best(everything)
    return TunedFusion(grid[fitted], tuple(grid[c] for c in chosen), fold, out_of_fold,
                       float(table.objective(everything)[fitted]), seed)


def percent(values: dict[str, float]) -> dict[str, float]:
    """Values in [0, 1] as eval records them: percent, 4 decimals."""
    return {key: round(100.0 * value, 4) for key, value in values.items()}


def tuned_run(stored: Sequence[StoredUnit], base: RunResults, tuned: TunedFusion, table: QueryTable,
              strategy: dict[str, Any]) -> RunResults:
    """The run of the tuned strategy as advise reports it: every unit of the hybrid run ``base`` ranked
    again from its stored scores, each query by the rule of its fold (out-of-fold), so its scores,
    intervals and per-query values are out-of-fold; ``strategy`` (the fitted rule's config) is recorded.
    Counts, cache use and timings are the hybrid run's (the same data and vectors); passage hits are not
    recomputed."""
    config = copy.deepcopy(base.config)
    config.strategy = strategy
    results = RunResults(config=config, created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
                         versions=copy.deepcopy(base.versions), skipped=dict(base.skipped))
    rule_of = tuned.fold_of(table.keys)
    for name in dict.fromkeys(s.task.metadata.name for s in stored):
        mine = [s for s in stored if s.task.metadata.name == name]
        units = base.tasks[name].units()
        scored = [(s.unit, out_of_fold_unit(s, units[s.unit.length], rule_of, tuned.fusion)) for s in mine]
        results.tasks[name] = task_result(mine[0].task, scored)
    results.average, results.average_tasks, results.average_note = average(results.tasks, base.config.lengths)
    results.average_interval = average_interval(results.tasks)
    results.complete, results.wall_time_s = True, 0.0
    return results


def out_of_fold_unit(stored: StoredUnit, base: UnitResult | TaskResult, rule_of: dict[tuple[str, str], Fusion],
                     fallback: Fusion) -> UnitResult:
    """One unit's result with each query ranked by its fold's rule (a query without judgements, which no
    fold holds, by ``fallback``)."""
    label, data = stored.unit.label, stored.unit.data
    fusions = [rule_of.get((label, q), fallback) for q in data.queries]
    ranking = stored.ranking(fusions)
    raw = per_query_metrics(data.qrels, ranking)
    per_query = {metric: percent(values) for metric, values in raw.items()}
    main = stored.task.metadata.main_score
    doc_ids = list(data.corpus)
    allowed = candidates(data, list(data.queries), doc_ids)
    dense = stored.dense.scores if allowed is None else np.where(allowed, stored.dense.scores, -np.inf)
    first = {qid: ranking[qid][0] for qid in data.qrels if ranking.get(qid)}
    metrics = percent(mean_metrics(raw))
    return UnitResult(
        score=metrics[main], metrics=metrics, counts=base.counts, cache=base.cache, encode_time_s=base.encode_time_s,
        wall_time_s=0.0, interval=percent_interval(list(per_query[main].values())), data_sha256=base.data_sha256,
        per_query=per_query[main], first_ranked=first,
        first_ranked_stats=first_ranked_summary(first, data.qrels, same_vector_groups(dense, doc_ids), documents=doc_ids),
        secondary_per_query={m: per_query[m] for m in SECONDARY_METRICS},
        secondary_intervals={m: percent_interval(list(per_query[m].values())) for m in SECONDARY_METRICS},
    )
