"""Tuned fusion (issue 56): on constructed scores where the right rule is known, tuning finds it; the
score it reports is out-of-fold, equal to a by-hand nested cross-validation and not to an in-sample fit;
folds are seeded and deterministic.

Every query ranks its own block of three documents: R (relevant), D (a distractor) and E (last for both
systems).  With E at 0, min-max normalisation leaves the constructed values as they are, so where R lands
under any rule is arithmetic done here by hand (:func:`hand_ndcg`), independently of the library's ranking.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from longembed.evaluation.fusion_tuning import (
    StoredUnit,
    assign_folds,
    cross_validate,
    fusion_grid,
    query_table,
    tuned_run,
)
from longembed.evaluation.scoring import Unit
from longembed.results import Counts, RunConfig, RunResults, TaskResult
from longembed.retrieval.fusion import Fusion
from longembed.retrieval.pipeline import DenseScores
from longembed.tasks import RetrievalData
from longembed.tasks.base import Blocks, TaskMetadata

# (dense R, dense D, BM25 R, BM25 D), E scoring 0 on both.  Dense-wrong queries: R is first under the linear mix
# iff w / (1 - w) > (1 - 0.80556) / (1 - 0.5), i.e. w > 0.28.  BM25-wrong ones: iff w / (1 - w) < 0.376 / 0.8,
# i.e. w < 0.32.  Only w = 0.30 of the grid gets both right; RRF ties R and D and the tie-break (the sum of
# normalised scores) puts R first on the dense-wrong queries only.
DENSE_WRONG = (0.80556, 1.0, 1.0, 0.5)
BM25_WRONG = (1.0, 0.624, 0.2, 1.0)
# Conflicting queries for the in-sample test: R first iff w > 0.6 here, iff w < 0.3 there.
NEEDS_BM25 = (0.25, 1.0, 1.0, 0.5)  # w / (1 - w) > 0.75 / 0.5
NEEDS_DENSE = (1.0, 0.786, 0.2, 1.0)  # w / (1 - w) < 0.214 / 0.8 (about w < 0.211)


class Made:
    """A task object: its metadata (the run's main score is nDCG@10)."""

    metadata = TaskMetadata(name="made", description="", main_score="ndcg@10", lengths=None, source="tests")

    def load(self, data_dir, length=None):  # pragma: no cover - never loaded
        raise AssertionError


def stored_unit(kinds: list[tuple[float, float, float, float]]) -> StoredUnit:
    """A unit with one block per query (R, D, E) and the given scores."""
    corpus, queries, qrels, query_block, doc_block = {}, {}, {}, {}, {}
    dense = np.full((len(kinds), 3 * len(kinds)), -1.0)
    lexical = np.zeros_like(dense)
    for i, (dense_r, dense_d, lexical_r, lexical_d) in enumerate(kinds):
        q = f"q{i:02d}"
        queries[q], qrels[q], query_block[q] = f"query {i}", {f"r{i:02d}": 1}, i
        for name in ("r", "d", "e"):
            corpus[f"{name}{i:02d}"] = f"document {name} {i}"
            doc_block[f"{name}{i:02d}"] = i
        dense[i, 3 * i : 3 * i + 3] = (dense_r, dense_d, 0.0)
        lexical[i, 3 * i : 3 * i + 3] = (lexical_r, lexical_d, 0.0)
    data = RetrievalData(corpus, queries, qrels, blocks=Blocks(query_block, doc_block))
    best_chunk = np.broadcast_to(np.arange(dense.shape[1]), dense.shape)
    return StoredUnit(Made(), Unit("made", None, data, 0.0), DenseScores(dense, best_chunk), lexical)


def hand_ndcg(kind: tuple[float, float, float, float], rule: Fusion) -> float:
    """nDCG@10 (percent) of R among R, D, E, computed from the rule's definition by hand."""
    dense_r, dense_d, lexical_r, lexical_d = kind
    dense, lexical = {"r": dense_r, "d": dense_d, "e": 0.0}, {"r": lexical_r, "d": lexical_d, "e": 0.0}
    if rule.method == "linear":
        fused = {n: (1 - rule.weight) * dense[n] + rule.weight * lexical[n] for n in dense}
    else:
        def rank(scores: dict[str, float], n: str) -> int:
            return 1 + sum(v > scores[n] for v in scores.values())
        fused = {n: 1 / (rule.k + rank(dense, n)) + (1 / (rule.k + rank(lexical, n)) if lexical[n] > 0 else 0.0)
                 for n in dense}
    tie_break = {n: dense[n] + lexical[n] for n in dense}
    order = sorted(dense, key=lambda n: (-fused[n], -tie_break[n], n))
    return 100.0 / math.log2(order.index("r") + 2)


def test_tuning_finds_the_one_weight_that_gets_every_query_right() -> None:
    kinds = [DENSE_WRONG] * 10 + [BM25_WRONG] * 10
    stored = stored_unit(kinds)
    grid = fusion_grid()
    table = query_table([stored], grid)
    for r, rule in enumerate(grid):  # the library's ranking agrees with the arithmetic by hand, rule by rule
        assert table.scores[r].tolist() == pytest.approx([hand_ndcg(k, rule) for k in kinds], abs=1e-3), rule
    tuned = cross_validate(table, grid, seed=3)
    assert tuned.fusion == Fusion("bm25", "linear", weight=0.3)
    assert all(f == tuned.fusion for f in tuned.fold_fusions)
    assert tuned.out_of_fold.tolist() == [100.0] * 20 and tuned.in_sample == pytest.approx(100.0)
    rrf = table.scores[grid.index(Fusion("bm25", "rrf", k=60))]
    half = table.scores[grid.index(Fusion("bm25", "linear", weight=0.5))]
    assert rrf.mean() < 90 and half.mean() < 90  # the fixed rules lose half the queries


def test_the_reported_score_is_the_by_hand_out_of_fold_one_not_an_in_sample_fit() -> None:
    kinds = [NEEDS_BM25, NEEDS_DENSE] * 5 + [NEEDS_BM25] * 2
    stored = stored_unit(kinds)
    grid = fusion_grid()
    tuned = cross_validate(query_table([stored], grid), grid, folds=4, seed=11)
    by_hand = np.array([[hand_ndcg(k, rule) for k in kinds] for rule in grid])
    expected = np.empty(len(kinds))
    for fold in range(4):  # fit each fold's rule on the other folds only, by hand, and score the fold with it
        training = tuned.folds != fold
        means = by_hand[:, training].mean(axis=1)
        best = int(np.flatnonzero(means >= means.max() - 1e-9)[0])
        expected[tuned.folds == fold] = by_hand[best, tuned.folds == fold]
    in_sample = by_hand[int(np.argmax(by_hand.mean(axis=1)))]
    assert tuned.out_of_fold == pytest.approx(expected, abs=1e-3)
    assert in_sample.mean() > expected.mean() + 5  # an in-sample fit would report this: the test tells them apart
    assert tuned.in_sample == pytest.approx(in_sample.mean(), abs=1e-3)
    # the run advise reports: per-query and average out-of-fold, with an interval around them
    run = tuned_run([stored], hybrid_run(stored), tuned, query_table([stored], grid), {"fuse": "bm25"})
    task = run.tasks["made"]
    assert list(task.per_query.values()) == pytest.approx(expected.tolist(), abs=1e-3)
    assert run.average == pytest.approx(expected.mean(), abs=1e-3)
    assert task.interval.low <= run.average <= task.interval.high


def hybrid_run(stored: StoredUnit) -> RunResults:
    """The hybrid run the stored scores came from, as far as :func:`tuned_run` reads it."""
    counts = Counts(documents=len(stored.unit.data.corpus), queries=len(stored.unit.data.queries),
                    document_tokens_mean=3.0, document_tokens_max=3, tokens_counted="tokenizer")
    task = TaskResult(main_score="ndcg@10", score=0.0, metrics={}, counts=counts, encode_time_s=0.0, wall_time_s=0.0,
                      data_sha256=stored.unit.data.fingerprint())
    return RunResults(config=RunConfig(encoder={}, tasks=["made"], lengths=[]), tasks={"made": task})


def test_folds_are_seeded_deterministic_and_deal_every_units_queries_evenly() -> None:
    units = np.array([0] * 7 + [1] * 5 + [2] * 3)
    first, again, other = assign_folds(units, 5, seed=4), assign_folds(units, 5, seed=4), assign_folds(units, 5, seed=5)
    assert first.tolist() == again.tolist() and first.tolist() != other.tolist()
    assert sorted(np.bincount(first, minlength=5).tolist()) == [3, 3, 3, 3, 3]
    for u in range(3):  # each unit's queries are spread over the folds, never two in one before all have one
        counts = np.bincount(first[units == u], minlength=5)
        assert counts.max() - counts.min() <= 1
    stored = stored_unit([NEEDS_BM25, NEEDS_DENSE] * 6)
    grid = fusion_grid()
    runs = [cross_validate(query_table([stored], grid), grid, seed=9) for _ in range(2)]
    assert runs[0].folds.tolist() == runs[1].folds.tolist()
    assert runs[0].out_of_fold.tolist() == runs[1].out_of_fold.tolist()
