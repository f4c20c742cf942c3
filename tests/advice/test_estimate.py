"""The estimate advise prints and the budget it keeps to: seconds per strategy as its run encodes
(documents, chunks, windows), and sampling until the estimate fits, said in words."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from longembed.advice.data import AdviceData, PreparedTask, Selection
from longembed.advice.estimate import (
    DenseEstimate,
    estimate_error,
    fit_budget,
    query_seconds,
    side_seconds,
    strategy_seconds,
)
from longembed.advice.strategies import ModelFacts, plan_candidates
from longembed.evaluation.estimate import CostModel
from longembed.results import Estimate, SideEstimate, UnitEstimate
from longembed.results.advice import AdviceEstimate, StrategyEstimate
from longembed.tasks import RetrievalData
from longembed.tasks.base import TaskMetadata

LINEAR = CostModel(a=0.001, b=0.0)  # a millisecond per token, whatever the sequence's length
ENCODER = SimpleNamespace(method="pi", original_length=512, max_length=4096, window_length=4096)
TRUNCATE = SimpleNamespace(method="truncate", original_length=512, max_length=512, window_length=512)


def candidate(name: str):
    candidates, _ = plan_candidates(ModelFacts("ape", "mean", 512), 4096)
    return next(c for c in candidates if c.name == name)


def test_seconds_follow_what_each_strategy_encodes() -> None:
    # two documents of 10,000 tokens in all
    assert side_seconds(2, 10_000, candidate("truncate").strategy, TRUNCATE, LINEAR) == pytest.approx(2 * 0.512)  # cut at Lo
    assert side_seconds(2, 10_000, candidate("pi-4096").strategy, ENCODER, LINEAR) == pytest.approx(2 * 4.096)  # cut at Lt
    chunks = math.ceil(10_000 / 256)
    assert side_seconds(2, 10_000, candidate("naive-chunks").strategy, TRUNCATE, LINEAR) == pytest.approx(chunks * 0.258)
    windows = math.ceil(5_000 / (4096 - 512))  # 5,000 tokens each, windows of 4096 sharing an eighth
    assert side_seconds(2, 10_000, candidate("late-chunks").strategy, ENCODER, LINEAR) == pytest.approx(2 * windows * 4.096)
    assert side_seconds(2, 2_000, candidate("late-chunks").strategy, ENCODER, LINEAR) == pytest.approx(2.0)  # one pass each
    assert query_seconds(10, 200, LINEAR) == pytest.approx(0.2) and query_seconds(0, 0, LINEAR) == 0.0


def data(n_queries: int = 50, n_documents: int = 100) -> AdviceData:
    """A task whose query i has document i relevant; the rest are distractors."""
    meta = TaskMetadata(name="mine", description="", main_score="ndcg@10", lengths=None, source="")
    retrieval = RetrievalData({f"d{j}": f"text {j}" for j in range(n_documents)},
                              {f"q{i}": f"query {i}" for i in range(n_queries)},
                              {f"q{i}": {f"d{i}": 1} for i in range(n_queries)})
    return AdviceData([PreparedTask(meta, retrieval)], [], None, 50)


def documents_estimate(selection: Selection) -> AdviceEstimate:
    """A stand-in estimate: a second per document, and 2 s of cost measurements."""
    documents = sum(len(t.data.corpus) for t in selection.tasks)  # type: ignore[union-attr]
    row = StrategyEstimate("dense", documents, documents, 0, documents, float(documents))
    return AdviceEstimate([row], 2.0, documents + 2.0, None, "one second per document")


def test_within_the_budget_nothing_is_sampled() -> None:
    said: list[str] = []
    selection, estimate, sampling = fit_budget(data(), documents_estimate, 200.0, 0, said.append)
    assert sampling is None and selection.sampled == [] and estimate.seconds == 102.0
    assert len(said) == 1 and said[0] == estimate.text and "over budget" not in said[0]


def test_over_the_budget_the_data_is_sampled_until_it_fits_and_that_is_said() -> None:
    said: list[str] = []
    selection, estimate, sampling = fit_budget(data(), documents_estimate, 30.0, 7, said.append)
    assert sampling is not None and sampling.within_budget and sampling.seed == 7
    assert estimate.seconds <= 30.0 and sampling.estimate_seconds == estimate.seconds
    assert sampling.full_estimate_seconds == 102.0
    (task,) = sampling.tasks
    assert (task.task, task.queries_of, task.documents_of) == ("mine", 50, 100)
    assert task.documents == len(selection.tasks[0].data.corpus) == estimate.seconds - 2  # type: ignore[union-attr]
    assert task.queries == len(selection.tasks[0].data.queries)  # type: ignore[union-attr]
    message = said[1]
    assert message.startswith("over budget: the full data was estimated at 102 s, above --budget-seconds 30 s")
    assert f"mine: {task.queries} of 50 queries, {task.documents} of 100 documents" in message
    assert "seed 7" in message and "fits it" in message
    assert estimate.text.startswith(said[0]) and said[2] in estimate.text  # both estimates, as printed


def test_a_budget_below_the_smallest_sample_runs_that_sample_and_says_so() -> None:
    said: list[str] = []
    selection, estimate, sampling = fit_budget(data(), documents_estimate, 5.0, 0, said.append)
    assert sampling is not None and not sampling.within_budget
    assert (sampling.tasks[0].queries, sampling.tasks[0].documents) == (10, 10)  # 10 queries, their documents
    assert estimate.seconds == 12.0 > 5.0
    assert "still does not fit it: this is the smallest sample allowed" in said[1]


def planned(name: str, documents: list[int], cached: int = 0) -> DenseEstimate:
    """A dense strategy's dry run of one unit whose documents have ``documents`` tokens (``cached`` of
    them in the cache: their tokens are not counted), and no queries."""
    to_encode = len(documents) - cached
    side = SideEstimate(len(documents), cached, to_encode, sum(documents[cached:]), max(documents))
    estimate = Estimate("", None, [UnitEstimate("mine", side, SideEstimate(0, 0, 0, 0, 0))], len(documents), cached,
                        0, 0, sum(documents[cached:]), None)
    encoder = TRUNCATE if name in ("truncate", "naive-chunks") else ENCODER
    return DenseEstimate(candidate(name), SimpleNamespace(encoder=encoder), estimate)  # type: ignore[arg-type]


def test_documents_are_costed_one_by_one_as_their_run_encodes_them() -> None:
    lengths = [500, 7_500]  # a short essay and a long one
    tokens = {"mine": lengths}
    # late chunks at 4096: one pass of 500 tokens, and three overlapping windows of 4096 for the long one
    late = planned("late-chunks", lengths)
    assert strategy_seconds(late, LINEAR, tokens) == pytest.approx(0.5 + 3 * 4.096)
    # the mean document (4,000 tokens, one window each) is 37% short of that: the error advise showed
    assert strategy_seconds(late, LINEAR) == pytest.approx(2 * 4.0)
    naive = planned("naive-chunks", lengths)  # every document's chunks, each rounded up
    assert strategy_seconds(naive, LINEAR, tokens) == pytest.approx((2 + 30) * 0.258)
    # half the documents cached: half the sum
    assert strategy_seconds(planned("late-chunks", lengths, cached=1), LINEAR, tokens) == pytest.approx(
        (0.5 + 3 * 4.096) / 2)
    assert strategy_seconds(late, LINEAR, {"other unit": lengths}) == pytest.approx(8.0)  # no match: the mean


def test_the_estimates_error_is_said_per_strategy() -> None:
    rows = [StrategyEstimate("truncate", 10, 10, 0, 5120, 10.0, actual_seconds=12.0),
            StrategyEstimate("pi-4096", 10, 10, 0, 40960, 100.0, actual_seconds=135.0),
            StrategyEstimate("bm25", 10, 0, 0, 0, 0.0, actual_seconds=1.0)]
    text = estimate_error(AdviceEstimate(rows, 0.0, 110.0, None, ""))
    assert text == "estimate: the encoding runs took 2.5 min against 110 s estimated (+34%): truncate +20%, pi-4096 +35%"
    assert "nothing was encoded" in estimate_error(AdviceEstimate(rows[2:], 0.0, 0.0, None, ""))


def test_an_estimate_that_rounds_to_zero_is_still_set_against_its_run() -> None:
    # a tiny model on a quiet machine: the estimate rounds to 0.0 s, yet the run encoded 512 tokens
    rows = [StrategyEstimate("truncate", 4, 4, 0, 512, 0.0, actual_seconds=0.3),
            StrategyEstimate("bm25", 4, 0, 0, 0, 0.0, actual_seconds=0.1)]
    text = estimate_error(AdviceEstimate(rows, 0.0, 0.0, None, ""))
    assert text.startswith("estimate: the encoding runs took")
    assert "truncate estimated 0 s" in text and "bm25" not in text
