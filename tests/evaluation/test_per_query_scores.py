"""Per-query scores and intervals in a run's results (issue 25): kept for every unit, consistent with
the scores, reproducible from the file, absent (and said to be) in files written before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_runner import HashEncoder, TinyTask, run

from longembed.results import RunResults
from longembed.results.intervals import bootstrap_interval

FIXTURE = Path(__file__).parents[1] / "results" / "fixtures" / "results_9ebbcc4"


def test_every_unit_keeps_its_per_query_scores_and_their_interval(tmp_path: Path) -> None:
    results = run(HashEncoder(tmp_path / "m"), tmp_path, tasks=["passkey", TinyTask()], lengths=[256, 512])
    passkey, tiny = results.tasks["passkey"], results.tasks["tiny"]
    for unit in [*passkey.lengths.values(), tiny]:
        values = list(unit.per_query.values())
        assert len(values) == unit.counts.queries
        assert np.mean(values) == pytest.approx(unit.score, abs=1e-3)
        assert unit.interval.low <= unit.score <= unit.interval.high
        # the stored interval is reproducible from the stored per-query scores (4-decimal rounding)
        recomputed = bootstrap_interval(values, seed=unit.interval.seed, n_resamples=unit.interval.resamples)
        assert (unit.interval.low, unit.interval.high) == pytest.approx((recomputed.low, recomputed.high), abs=1e-3)
        assert len(unit.data_sha256) == 64
    assert passkey.lengths[512].interval.high > passkey.lengths[512].interval.low  # some queries missed
    # accuracy@1 per query is 0 or 100; the two passkey lengths are different data
    assert set(passkey.lengths[256].per_query.values()) <= {0.0, 100.0}
    assert passkey.lengths[256].data_sha256 != passkey.lengths[512].data_sha256
    assert results.has_per_query
    assert set(results.query_scores()) == {("passkey", 256), ("passkey", 512), ("tiny", None)}
    # the file holds them too, and reads back to the same objects
    again = RunResults.load(tmp_path / "run")
    assert again == results and again.tasks["passkey"].lengths[512].per_query == passkey.lengths[512].per_query


def test_task_and_average_intervals_resample_within_each_length_and_task(tmp_path: Path) -> None:
    """The task interval is the stratified bootstrap over its lengths; the average's weighs each length
    1 / (tasks x lengths): checked against a naive resampling loop."""
    results = run(HashEncoder(tmp_path / "m"), tmp_path, tasks=["passkey", TinyTask()], lengths=[256, 512])
    passkey, tiny = results.tasks["passkey"], results.tasks["tiny"]
    assert passkey.interval.estimate == pytest.approx(passkey.score, abs=1e-3)
    assert results.average_interval.estimate == pytest.approx(results.average, abs=1e-3)
    groups = {
        "p256": np.array(list(passkey.lengths[256].per_query.values())),
        "p512": np.array(list(passkey.lengths[512].per_query.values())),
        "tiny": np.array(list(tiny.per_query.values())),
    }
    weights = {"p256": 0.25, "p512": 0.25, "tiny": 0.5}
    rng = np.random.default_rng(123)
    naive = [
        sum(w * rng.choice(groups[g], size=len(groups[g])).mean() for g, w in weights.items()) for _ in range(4000)
    ]
    low, high = np.percentile(naive, [2.5, 97.5])
    assert results.average_interval.low == pytest.approx(low, abs=2.0)
    assert results.average_interval.high == pytest.approx(high, abs=2.0)
    # weighting the three groups equally instead would move the centre away from the average
    assert abs(np.mean([g.mean() for g in groups.values()]) - results.average) > 1.0


def test_interval_narrows_as_the_query_count_grows() -> None:
    rng = np.random.default_rng(0)
    widths = []
    for n in (50, 200, 800):
        scores = 100.0 * (rng.random(n) < 0.6)
        interval = bootstrap_interval(scores)
        widths.append(interval.high - interval.low)
    assert widths[0] > widths[1] > widths[2]
    # 1 / sqrt(n): four times the queries, about half the width
    assert widths[0] / widths[1] == pytest.approx(2.0, rel=0.2)
    assert widths[1] / widths[2] == pytest.approx(2.0, rel=0.2)


def test_files_written_before_per_query_scores_load_as_having_none() -> None:
    old = RunResults.load(next(FIXTURE.glob("*/results.json")))
    assert not old.has_per_query
    assert old.query_scores() == {}
    assert old.average_interval is None
    task = next(iter(old.tasks.values()))
    assert task.interval is None
    # and they are written back without the new keys
    assert "per_query" not in json.dumps(old.to_dict())
