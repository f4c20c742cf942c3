"""Paired comparisons of runs (longembed.results.compare, issue 25): differences, paired bootstrap
intervals, sign-flip p-values and Holm's correction, each against an independent computation; the
refusals; and the comparison's file."""

from __future__ import annotations

import copy
import itertools
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA_DIR, require_data, require_package

from longembed.evaluation.runner import evaluate_model
from longembed.results import Comparison, Counts, RunConfig, RunResults, TaskResult, UnitResult, compare
from longembed.results.comparison import AVERAGE, HOLM, NO_CORRECTION, TASK, UNIT, NotCompared
from longembed.results.paired import EXACT_MAX, holm, sign_flip_test
from longembed.retrieval.bm25 import BM25Model

OLD = Path(__file__).parent / "fixtures" / "results_9ebbcc4"
Units = dict[tuple[str, "int | None"], dict[str, float]]


# --------------------------------------------------------------------------- runs built by hand
def _counts(n: int) -> Counts:
    return Counts(documents=2 * n, queries=n, document_tokens_mean=10.0, document_tokens_max=10,
                  tokens_counted="tokenizer")


def _unit(scores: dict[str, float], sha: str) -> UnitResult:
    mean = sum(scores.values()) / len(scores)
    return UnitResult(score=mean, metrics={"accuracy@1": mean}, counts=_counts(len(scores)), cache=None,
                      encode_time_s=0.0, wall_time_s=0.0, data_sha256=sha, per_query=dict(scores))


def make_run(units: Units, shas: dict[tuple[str, int | None], str] | None = None) -> RunResults:
    """A finished run holding ``units`` ((task, length or None) -> query id -> score); each unit's data
    fingerprint is "<task>/<length>" unless ``shas`` says otherwise."""
    tasks: dict[str, TaskResult] = {}
    for task in dict.fromkeys(t for t, _ in units):
        mine = {n: _unit(s, (shas or {}).get((t, n), f"{t}/{n}")) for (t, n), s in units.items() if t == task}
        if None in mine:
            u = mine[None]
            tasks[task] = TaskResult("ndcg@10", u.score, u.metrics, u.counts, data_sha256=u.data_sha256,
                                     per_query=u.per_query)
        else:
            score = sum(u.score for u in mine.values()) / len(mine)
            tasks[task] = TaskResult("accuracy@1", score, {"accuracy@1": score}, _counts(1),
                                     by_length={n: u.score for n, u in mine.items()}, lengths=mine)  # type: ignore[misc]
    return RunResults(config=RunConfig(encoder={"model": "hand"}), complete=True, tasks=tasks)


def scores(values: list[float], prefix: str = "q") -> dict[str, float]:
    return {f"{prefix}{i}": float(v) for i, v in enumerate(values)}


def row(comparison: Comparison, task: str, length: int | None = None, pair: int = 0):
    return next(d for d in comparison.pairs[pair].differences if d.task == task and d.length == length)


@pytest.fixture(scope="module")
def bm25_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: BM25 on passkey and needle at 256 and 512 (it finds every passkey: 100%)."""
    require_data("paul_graham_essays")  # the needle haystack
    folder = tmp_path_factory.mktemp("bm25") / "bm25"
    evaluate_model(BM25Model(), ["passkey", "needle"], data_dir=DATA_DIR, lengths=[256, 512], output_dir=folder,
                   show_progress=False, log=None, estimate=False)
    return folder


# --------------------------------------------------------------------------- known differences
def test_a_run_compared_with_itself_differs_by_nothing(bm25_run: Path) -> None:
    comparison = compare([bm25_run, bm25_run / "results.json"])
    assert [r.label for r in comparison.runs] == ["bm25 #1", "bm25 #2"]
    differences = comparison.differences()
    # each task's lengths, then the task over them; the average over the tasks last
    assert [(d.level, d.task, d.length) for d in differences] == [
        (UNIT, "passkey", 256), (UNIT, "passkey", 512), (TASK, "passkey", None),
        (UNIT, "needle", 256), (UNIT, "needle", 512), (TASK, "needle", None), (AVERAGE, AVERAGE, None)]
    for d in differences:
        assert (d.difference.estimate, d.difference.low, d.difference.high) == (0.0, 0.0, 0.0)
        assert d.p_value == 1.0 and not d.significant and d.a == d.b
    assert comparison.pairs[0].not_compared == []
    assert comparison.correction == NO_CORRECTION and all(d.p_adjusted is None for d in differences)


def test_a_deliberately_degraded_run_is_significantly_worse_by_the_right_amount(bm25_run: Path) -> None:
    """Half of the correct passkey queries set to 0: passkey falls by exactly that share, needle not at all."""
    good = RunResults.load(bm25_run)
    bad = copy.deepcopy(good)
    lost = {}
    for length, unit in bad.tasks["passkey"].lengths.items():
        correct = [q for q, v in unit.per_query.items() if v == 100.0]
        for q in correct[::2]:
            unit.per_query[q] = 0.0
        lost[length] = -100.0 * len(correct[::2]) / len(unit.per_query)
    comparison = compare([good, bad], labels=["good", "bad"])
    for length, expected in lost.items():
        d = row(comparison, "passkey", length)
        assert d.difference.estimate == pytest.approx(expected) and expected <= -40
        assert d.difference.low < expected < d.difference.high < 0
        assert d.significant and d.p_value == pytest.approx(1 / 10_001)  # no random flip is as extreme
    task = row(comparison, "passkey")
    assert task.difference.estimate == pytest.approx(sum(lost.values()) / 2) and task.significant
    assert row(comparison, AVERAGE).difference.estimate == pytest.approx(sum(lost.values()) / 4)
    assert row(comparison, AVERAGE).significant
    assert not row(comparison, "needle").significant and row(comparison, "needle").p_value == 1.0
    # the other way round: the same size, the other sign
    reverse = compare([bad, good])
    assert row(reverse, "passkey", 256).difference.estimate == pytest.approx(-lost[256])


# --------------------------------------------------------------------------- the tests, independently
def test_sign_flip_p_value_equals_an_exact_enumeration_through_compare() -> None:
    a = [100, 0, 100, 100, 0, 100, 100, 0, 100, 0]
    b = [100, 100, 100, 0, 100, 100, 100, 100, 100, 100]
    a[0], b[0] = 40.0, 47.5  # an nDCG-like score
    comparison = compare([make_run({("t", None): scores(a)}), make_run({("t", None): scores(b)})])
    differences = [y - x for x, y in zip(a, b, strict=True)]  # 6 non-zero, 4 zero
    observed = abs(sum(differences))
    extreme = 0
    for signs in itertools.product([1, -1], repeat=len(differences)):  # all 2^10 patterns, zeros included
        if abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-9:
            extreme += 1
    d = row(comparison, "t")
    assert d.p_value == pytest.approx(extreme / 2 ** len(differences))
    assert d.p_method == "exact (64 sign patterns)"
    assert d.difference.estimate == pytest.approx(np.mean(differences))


def test_sign_flip_exact_on_eight_differences_and_scipy_agrees() -> None:
    differences = [3.0, -1.0, 2.5, 4.0, 0.5, 3.0, -2.0, 1.5]
    observed = abs(sum(differences))
    patterns = list(itertools.product([1, -1], repeat=8))
    extreme = sum(abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-9
                  for signs in patterns)
    ours = sign_flip_test(differences)
    assert ours.p_value == extreme / 256 and ours.nonzero == 8
    assert ours.p_value == sign_flip_test([d / 8 for d in differences]).p_value  # a mean is a scaled sum
    stats = require_package("scipy.stats")
    theirs = stats.permutation_test((np.array(differences),), np.mean, permutation_type="samples",
                                    n_resamples=np.inf, alternative="two-sided")
    assert ours.p_value == pytest.approx(theirs.pvalue)


def _exact_p(differences: np.ndarray) -> float:
    """All 2^n sign patterns, written out: the share with |sum| at least the observed |sum|."""
    n, observed = len(differences), abs(differences.sum())
    extreme = 0
    low = np.array([[1.0 if (k >> j) & 1 else -1.0 for j in range(12)] for k in range(2**12)])
    for high in range(2 ** (n - 12)):
        top = np.array([1.0 if (high >> j) & 1 else -1.0 for j in range(n - 12)])
        sums = low @ differences[:12] + top @ differences[12:]
        extreme += int(np.sum(np.abs(sums) >= observed - 1e-9))
    return extreme / 2**n


def test_random_sign_flips_are_within_their_error_of_the_exact_p_value() -> None:
    rng = np.random.default_rng(5)
    differences = np.round(rng.normal(0.9, 2.0, size=20), 2)
    assert np.count_nonzero(differences) == 20 > EXACT_MAX
    exact = _exact_p(differences)
    assert 0.1 < exact < 0.5  # a p-value in the middle, where Monte Carlo error is largest
    for seed in (0, 1):
        estimate = sign_flip_test(differences, n_resamples=10_000, seed=seed)
        assert estimate.method == "random (10000 seeded sign patterns)"
        error = np.sqrt(exact * (1 - exact) / 10_000)
        assert abs(estimate.p_value - exact) < 4 * error + 1 / 10_001


def test_paired_bootstrap_interval_agrees_with_a_naive_resampling_loop() -> None:
    """Queries resampled by index, the same for both runs; a task over two lengths resamples within each."""
    rng = np.random.default_rng(11)
    base = {n: rng.random(60) * 100 for n in (256, 512)}
    better = {n: np.clip(v + rng.normal(4, 8, size=60), 0, 100) for n, v in base.items()}
    a = make_run({("t", n): scores(list(v)) for n, v in base.items()})
    b = make_run({("t", n): scores(list(v)) for n, v in better.items()})
    comparison = compare([a, b])
    loop = np.random.default_rng(99)
    unit, task = [], []
    for _ in range(5000):
        index = {n: loop.integers(0, 60, size=60) for n in base}
        per_length = {n: better[n][i].mean() - base[n][i].mean() for n, i in index.items()}
        unit.append(per_length[256])
        task.append((per_length[256] + per_length[512]) / 2)
    for d, naive in ((row(comparison, "t", 256), unit), (row(comparison, "t"), task)):
        low, high = np.percentile(naive, [2.5, 97.5])
        assert d.difference.low == pytest.approx(low, abs=0.5)
        assert d.difference.high == pytest.approx(high, abs=0.5)
    # pairing matters: resampling each run's queries independently would give a wider interval
    unpaired = [better[256][loop.integers(0, 60, 60)].mean() - base[256][loop.integers(0, 60, 60)].mean()
                for _ in range(5000)]
    width = row(comparison, "t", 256).difference.high - row(comparison, "t", 256).difference.low
    assert width < 0.5 * np.subtract(*np.percentile(unpaired, [97.5, 2.5]))


def test_task_and_average_weigh_lengths_and_tasks_as_a_run_average_does() -> None:
    a = make_run({("p", 256): scores([0, 0]), ("p", 512): scores([0, 0, 0, 0]), ("r", None): scores([0] * 3)})
    b = make_run({("p", 256): scores([100, 0]), ("p", 512): scores([100, 100, 100, 0]), ("r", None): scores([20] * 3)})
    comparison = compare([a, b])
    assert row(comparison, "p").difference.estimate == pytest.approx((50 + 75) / 2)  # lengths equally
    assert row(comparison, "p").lengths == [256, 512] and row(comparison, "p").queries == 6
    assert row(comparison, AVERAGE).difference.estimate == pytest.approx((62.5 + 20) / 2)  # tasks equally
    assert row(comparison, AVERAGE).b == pytest.approx((62.5 + 20) / 2) and row(comparison, AVERAGE).a == 0
    assert row(comparison, "r").level == UNIT  # a real task is its own unit: no second row for it
    assert len(comparison.differences()) == 5


def test_a_pairs_overall_verdict_is_its_widest_test() -> None:
    """The average over tasks when the runs share several; one shared task over its lengths; one unit."""
    a = {("p", 256): scores([0, 0]), ("p", 512): scores([0, 0]), ("r", None): scores([0, 0])}
    b = {("p", 256): scores([100, 0]), ("p", 512): scores([100, 100]), ("r", None): scores([50, 50])}
    both_tasks = compare([make_run(a), make_run(b)])
    assert both_tasks.pairs[0].overall() is row(both_tasks, AVERAGE)
    assert both_tasks.pairs[0].overall().difference.estimate == pytest.approx((75 + 50) / 2)
    passkey_only = compare([make_run({k: v for k, v in a.items() if k[0] == "p"}),
                            make_run({k: v for k, v in b.items() if k[0] == "p"})])
    verdict = passkey_only.pairs[0].overall()
    assert verdict.level == TASK and verdict.difference.estimate == pytest.approx(75.0)
    one_unit = compare([make_run({("p", 512): scores([0, 0])}), make_run({("p", 512): scores([100, 0])})])
    assert one_unit.pairs[0].overall().level == UNIT and one_unit.pairs[0].overall().difference.estimate == 50.0


# --------------------------------------------------------------------------- Holm
def test_holm_equals_a_hand_computed_example() -> None:
    # sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def _step_down_rejects(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as he states it: reject the smallest while p_(k) <= alpha / (m - k), then stop."""
    rejected = [False] * len(p_values)
    for k, index in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
        if p_values[index] > alpha / (len(p_values) - k):
            break
        rejected[index] = True
    return rejected


def test_holm_adjusted_p_values_reject_exactly_as_the_step_down_procedure() -> None:
    rnd = random.Random(3)
    for _ in range(200):
        p_values = [rnd.choice([rnd.random() * 0.05, rnd.random()]) for _ in range(rnd.randint(1, 9))]
        adjusted = holm(p_values)
        for alpha in (0.01, 0.05, 0.1):
            assert [a <= alpha for a in adjusted] == _step_down_rejects(p_values, alpha)


def test_holm_equals_statsmodels_values() -> None:
    """The adjusted p-values ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]`` gives
    (statsmodels 0.15.0; recorded here so the check runs without statsmodels in the test extra)."""
    p_values = [0.001, 0.2, 0.013, 0.04, 0.04, 0.5, 0.0002, 0.9]
    assert holm(p_values) == pytest.approx([0.007, 0.6, 0.078, 0.2, 0.2, 1.0, 0.0016, 1.0])


def test_more_than_two_runs_adjust_every_test_with_holm() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(40) * 100
    runs = [make_run({("t", 256): scores(list(np.clip(base + shift + rng.normal(0, 5, 40), 0, 100))),
                      ("t", 512): scores(list(np.clip(base + shift + rng.normal(0, 5, 40), 0, 100)))})
            for shift in (0.0, 3.0, 12.0)]
    comparison = compare(runs)
    assert [(p.a, p.b) for p in comparison.pairs] == [("run 1", "run 2"), ("run 1", "run 3"), ("run 2", "run 3")]
    tests = comparison.differences()
    assert comparison.correction == HOLM and comparison.tests == len(tests) == 9
    assert [d.p_adjusted for d in tests] == pytest.approx(holm([d.p_value for d in tests]))
    assert [d.significant for d in tests] == [d.p_adjusted < 0.05 for d in tests]
    assert row(comparison, "t", pair=1).significant  # 12 points on 80 queries
    # a baseline: each other run against it only
    against = compare(runs, baseline=runs[2])
    assert [(p.a, p.b) for p in against.pairs] == [("run 3", "run 1"), ("run 3", "run 2")]
    assert against.baseline == "run 3" and row(against, "t").difference.estimate < 0


# --------------------------------------------------------------------------- refusals and what is listed
def test_a_run_without_per_query_scores_is_refused_and_told_to_rerun(bm25_run: Path) -> None:
    with pytest.raises(ValueError, match=r"run bm25 #2 \(.*results_9ebbcc4/bm25\) has no per-query scores for "
                                         r"passkey at length 256.*rerun it"):
        compare([bm25_run, OLD / "bm25"])


def test_different_task_data_is_refused_naming_runs_task_and_length() -> None:
    units: Units = {("passkey", 256): scores([100, 0]), ("passkey", 512): scores([100, 100])}
    a = make_run(units)
    b = make_run(units, shas={("passkey", 512): "another seed"})
    with pytest.raises(ValueError, match=r"runs A and B scored different data for passkey at length 512 "
                                         r"\(data_sha256 passkey/512 vs another seed\): generated with other settings"):
        compare([a, b], labels=["A", "B"])
    renamed = make_run({("passkey", 256): scores([100, 0], prefix="x"), ("passkey", 512): scores([100, 100])})
    with pytest.raises(ValueError, match=r"different queries for passkey at length 256: 2 only in A"):
        compare([a, renamed], labels=["A", "B"])


def test_a_shared_needle_run_and_a_distinct_needle_run_are_refused(tmp_path: Path) -> None:
    """--needle-haystacks shared and distinct ask the same queries of other documents: no pairing."""
    folder = tmp_path / "lease"
    folder.mkdir()
    (folder / "lease.txt").write_text(" ".join(f"Clause {i} says the lessee keeps the garden tidy." for i in range(300)),
                                      encoding="utf-8")

    def needle_run(name: str, **options: object) -> Path:
        evaluate_model(BM25Model(), ["needle"], lengths=[256], haystack=folder, output_dir=tmp_path / name,
                       queries_per_length=10, show_progress=False, log=None, estimate=False, **options)
        return tmp_path / name

    shared, distinct = needle_run("shared"), needle_run("distinct", needle_haystacks="distinct")
    again = needle_run("again", needle_haystacks="distinct")
    assert compare([distinct, again]).pairs[0].differences[0].difference.estimate == 0.0  # same data: paired
    for pair in ([shared, distinct], [distinct, shared]):
        with pytest.raises(ValueError, match=r"runs (shared|distinct) \(.*\) and (distinct|shared) \(.*\) scored "
                                             r"different data for needle at length 256 \(data_sha256 \w+ vs \w+\): "
                                             r"their task options differ \(needle_haystacks: "):
            compare(pair)


def test_runs_that_share_nothing_are_refused() -> None:
    a = make_run({("passkey", 256): scores([100, 0])})
    b = make_run({("passkey", 512): scores([100, 0]), ("qmsum", None): scores([30, 40])})
    with pytest.raises(ValueError, match=r"runs A and B share no task and length to compare: A has passkey at "
                                         r"length 256, B has passkey at length 512, qmsum"):
        compare([a, b], labels=["A", "B"])
    with pytest.raises(ValueError, match="at least two runs"):
        compare([a])
    with pytest.raises(TypeError, match="a list of runs"):
        compare("runs/a")  # type: ignore[arg-type]


def test_units_in_only_one_run_are_listed_not_dropped() -> None:
    a = make_run({("passkey", 256): scores([100, 0]), ("passkey", 512): scores([100, 0, 100])})
    b = make_run({("passkey", 256): scores([100, 100]), ("qmsum", None): scores([30, 40])})
    comparison = compare([a, b], labels=["A", "B"])
    pair = comparison.pairs[0]
    assert pair.not_compared == [NotCompared("passkey", 512, "A"), NotCompared("qmsum", None, "B")]
    assert [(d.task, d.length) for d in pair.differences] == [("passkey", 256)]  # one shared unit: no repeats
    assert pair.differences[0].difference.estimate == 50.0


def test_the_comparison_round_trips_through_its_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    runs = [make_run({("t", 256): scores(list(rng.random(30) * 100)), ("r", None): scores(list(rng.random(25)))})
            for _ in range(3)]
    comparison = compare(runs, n_resamples=2000, seed=4)
    comparison.save(tmp_path / "comparison.json")
    again = Comparison.load(tmp_path)
    assert again == comparison and again.resamples == 2000 and again.seed == 4
    assert compare(runs, n_resamples=2000, seed=4) == comparison  # seeded: the same numbers again
    with pytest.raises(ValueError, match="not a longembed comparison file"):
        Comparison.load(OLD / "bm25" / "results.json")
