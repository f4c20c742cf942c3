"""``compare``: is run B better than run A beyond the noise of which queries the tasks hold?

    >>> from longembed.results import compare
    >>> comparison = compare(["runs/minilm-truncate", "runs/minilm-pi-4k"])
    >>> for d in comparison.pairs[0].differences:
    ...     print(d.task, d.length, d.difference, d.p_value, d.significant)

Every pair of runs (or each run against ``baseline``) is compared on the units both ran: a real task,
or a synthetic task at one length.  Per unit: each run's mean over the queries, the difference B - A,
its paired bootstrap interval and the sign-flip test's p-value (:mod:`longembed.results.paired`).  Per
synthetic task, the mean over the lengths both runs share (resampled within each length); and the
average over the tasks both share (each length weighted 1 / (tasks x the task's shared lengths), as a
run's average is).  A row that would repeat another (a task with one shared length, an average of one
task) is not repeated.  With more than two runs every p-value is Holm-adjusted over all the tests of
the comparison; with two, the raw p-values are read (and the comparison says so).

Refused, with a ValueError naming the runs, task and length: a run without per-query scores (a file
written before longembed kept them: rerun it), a shared unit whose data fingerprint or query ids
differ (different task data), and a pair that shares no unit.  Units only one run of a pair has are
listed in the pair's ``not_compared``, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import UserError, UserTypeError
from longembed.results.comparison import (
    AVERAGE,
    HOLM,
    NO_CORRECTION,
    TASK,
    UNIT,
    ComparedRun,
    Comparison,
    Difference,
    NotCompared,
    PairComparison,
)
from longembed.results.paired import ALPHA, difference_interval, holm, mean_terms, normalised, sign_flip_test
from longembed.results.run_results import Interval, RunResults, TaskResult, UnitResult

RunSource = RunResults | str | Path
#: A unit's result: a synthetic task's length, or a real task itself.
Scored = UnitResult | TaskResult


@dataclass(frozen=True)
class _Run:
    label: str
    path: Path | None
    results: RunResults


@dataclass(frozen=True)
class _Settings:
    confidence: float
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class _Unit:
    """One shared unit of a pair: the query ids and each run's scores on them, in the same order."""

    task: str
    length: int | None
    a: tuple[float, ...]
    b: tuple[float, ...]

    @property
    def key(self) -> str:
        return f"{self.task}/{self.length}"

    @property
    def differences(self) -> list[float]:
        return [b - a for a, b in zip(self.a, self.b, strict=True)]


def compare(
    runs: Sequence[RunSource],
    baseline: RunSource | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    labels: Sequence[str] | None = None,
) -> Comparison:
    """Compare runs query by query: paired bootstrap intervals of B - A and sign-flip tests, Holm-corrected.

    Every pair (A earlier in ``runs``, B later), or with ``baseline`` each other run as B against it as
    A.  Only the task units both runs scored on the same data are compared.  Seeded: the same runs give
    the same numbers.

    Args:
        runs: at least two runs: :class:`RunResults`, run folders or results.json files.
        baseline: one of ``runs`` (or another run, then added first) that every other run is compared
            against; None compares every pair.
        confidence: the intervals' confidence level.
        n_resamples: bootstrap resamples (and sign flips) per difference.
        seed: the random seed of the resampling.
        labels: the runs' names in the tables, one per run in order, the baseline first when it was
            added (default: a folder's name, "run 1", "run 2", ... for objects; a name given twice gets
            "#<position>").

    Returns:
        A :class:`Comparison`: per pair and shared unit the difference with its interval and p-value
        (raw and Holm-adjusted), and the units that could not be compared, with why.

    Raises:
        UserTypeError: ``runs`` is one run, not a list.
        UserError: fewer than two runs, a results file that does not exist or cannot be read, or labels
            that do not match the runs.
    """
    if isinstance(runs, str | Path | RunResults):
        raise UserTypeError(f"compare takes a list of runs, got one: {runs!r:.80}")
    sources, base = _with_baseline(list(runs), baseline)
    loaded = _load(sources, labels)
    if len(loaded) < 2:
        raise UserError(f"compare needs at least two runs, got {len(loaded)}")
    indices = ([(base, i) for i in range(len(loaded)) if i != base] if base is not None
               else [(i, j) for i in range(len(loaded)) for j in range(i + 1, len(loaded))])
    plans = [(loaded[i], loaded[j], *_shared_units(loaded[i], loaded[j])) for i, j in indices]  # refuse before computing
    settings = _Settings(confidence, n_resamples, seed)
    pairs = [PairComparison(a.label, b.label, _pair_differences(units, settings), rest) for a, b, units, rest in plans]
    correction = _correct(pairs, len(loaded))
    return Comparison(
        runs=[ComparedRun(r.label, None if r.path is None else str(r.path)) for r in loaded],
        pairs=pairs, correction=correction, tests=sum(len(p.differences) for p in pairs),
        baseline=None if base is None else loaded[base].label, alpha=ALPHA, confidence=confidence,
        resamples=n_resamples, seed=seed,
    )


def _with_baseline(runs: list[RunSource], baseline: RunSource | None) -> tuple[list[RunSource], int | None]:
    """The runs with the baseline among them (added first if it is not), and its index."""
    if baseline is None:
        return runs, None
    for index, run in enumerate(runs):
        if run is baseline or (not isinstance(run, RunResults) and not isinstance(baseline, RunResults)
                               and _folder(run) == _folder(baseline)):
            return runs, index
    return [baseline, *runs], 0


def _folder(path: str | Path) -> Path:
    """A run's folder (given as the folder or its results.json), resolved."""
    path = Path(path).resolve()
    return path.parent if path.is_file() else path


def _load(sources: list[RunSource], labels: Sequence[str] | None) -> list[_Run]:
    """Each run read, labelled, and checked to hold per-query scores."""
    if labels is not None and len(labels) != len(sources):
        raise UserError(f"{len(labels)} labels for {len(sources)} runs")
    names = list(labels) if labels is not None else [_default_label(s, i) for i, s in enumerate(sources)]
    names = [n if names.count(n) == 1 else f"{n} #{i + 1}" for i, n in enumerate(names)]
    loaded = []
    for name, source in zip(names, sources, strict=True):
        path = None if isinstance(source, RunResults) else _folder(source)
        run = _Run(name, path, source if isinstance(source, RunResults) else RunResults.load(source))
        _check_per_query(run)
        loaded.append(run)
    return loaded


def _default_label(source: RunSource, index: int) -> str:
    return f"run {index + 1}" if isinstance(source, RunResults) else _folder(source).name


def _where(task: str, length: int | None) -> str:
    return task if length is None else f"{task} at length {length}"


def _named(run: _Run) -> str:
    return run.label if run.path is None else f"{run.label} ({run.path})"


def _check_per_query(run: _Run) -> None:
    """Refuse a run whose units have no per-query scores (written before longembed kept them)."""
    for task_name, task in run.results.tasks.items():
        for length, unit in task.units().items():
            if unit.per_query is None:
                raise UserError(
                    f"run {_named(run)} has no per-query scores for {_where(task_name, length)}: its results "
                    "were written before longembed kept them, so no paired comparison can be computed; "
                    "rerun it with this version of longembed (the same `longembed eval` options) to compare it"
                )


def _shared_units(a: _Run, b: _Run) -> tuple[list[_Unit], list[NotCompared]]:
    """The units both runs have (checked to be the same data and queries), and those only one has."""
    units_a = {(t, n): u for t, task in a.results.tasks.items() for n, u in task.units().items()}
    units_b = {(t, n): u for t, task in b.results.tasks.items() for n, u in task.units().items()}
    rest = [NotCompared(t, n, a.label) for t, n in units_a if (t, n) not in units_b]
    rest += [NotCompared(t, n, b.label) for t, n in units_b if (t, n) not in units_a]
    shared = [key for key in units_a if key in units_b]
    if not shared:
        raise UserError(
            f"runs {_named(a)} and {_named(b)} share no task and length to compare: {a.label} has "
            f"{_listing(units_a)}, {b.label} has {_listing(units_b)}"
        )
    return [_paired_unit(a, b, task, length, units_a[task, length], units_b[task, length]) for task, length in shared], rest


def _listing(units: dict[tuple[str, int | None], Scored]) -> str:
    return ", ".join(_where(t, n) for t, n in units) or "nothing"


def _data_difference(a: _Run, b: _Run) -> str:
    """Why two runs' data of a unit may differ: the task options they recorded differently (passkey/needle
    options, a ``--max-queries`` sample: "candidates: 'blocks' vs the default"), else the settings that could."""
    options_a, options_b = a.results.config.task_options, b.results.config.task_options
    differ = [f"{key}: {_option(options_a.get(key))} vs {_option(options_b.get(key))}"
              for key in sorted(set(options_a) | set(options_b)) if options_a.get(key) != options_b.get(key)]
    if differ:
        return "their task options differ (" + "; ".join(differ) + ")"
    return ("generated with other settings (queries per length, candidates, haystack, needle haystacks, needles) "
            "or read from another data folder")


def _option(value: object) -> str:
    """A recorded task option as the refusal shows it (a haystack by its path and content hash; absent:
    the default)."""
    if value is None:
        return "the default"
    if isinstance(value, dict) and "path" in value:
        return f"{value['path']} (sha256 {str(value.get('sha256', '?'))[:12]})"
    return repr(value)


def _paired_unit(a: _Run, b: _Run, task: str, length: int | None, unit_a: Scored, unit_b: Scored) -> _Unit:
    """The unit's scores of both runs on the same queries, or a refusal saying how the data differ."""
    scores_a, scores_b, sha_a, sha_b = unit_a.per_query, unit_b.per_query, unit_a.data_sha256, unit_b.data_sha256
    assert scores_a is not None and scores_b is not None  # checked when the runs were read
    where = _where(task, length)
    for run, sha in ((a, sha_a), (b, sha_b)):
        if sha is None:
            raise UserError(f"run {_named(run)} has no data fingerprint (data_sha256) for {where}: rerun it "
                             "with this version of longembed so the two runs can be checked to share the data")
    if sha_a != sha_b:
        raise UserError(
            f"runs {_named(a)} and {_named(b)} scored different data for {where} (data_sha256 {sha_a[:12]} vs "
            f"{sha_b[:12]}): {_data_difference(a, b)}; compare runs of the same task data"
        )
    only_a, only_b = sorted(set(scores_a) - set(scores_b)), sorted(set(scores_b) - set(scores_a))
    if only_a or only_b:
        raise UserError(
            f"runs {_named(a)} and {_named(b)} scored different queries for {where}: {len(only_a)} only in "
            f"{a.label} {only_a[:3]}, {len(only_b)} only in {b.label} {only_b[:3]}"
        )
    ids = list(scores_a)
    return _Unit(task, length, tuple(scores_a[q] for q in ids), tuple(scores_b[q] for q in ids))


def _pair_differences(units: list[_Unit], settings: _Settings) -> list[Difference]:
    """The tests of one pair: every unit, every task over its shared lengths, the average over tasks."""
    by_task: dict[str, list[_Unit]] = {}
    for unit in units:
        by_task.setdefault(unit.task, []).append(unit)
    tests = []
    for task, group in by_task.items():  # a task's lengths, then the task over them
        tests += [_test(UNIT, u.task, u.length, [u], settings) for u in group]
        if len(group) > 1:
            tests.append(_test(TASK, task, None, group, settings))
    if len(by_task) > 1:
        tests.append(_test(AVERAGE, AVERAGE, None, units, settings, by_task))
    return tests


def _test(
    level: str, task: str, length: int | None, units: list[_Unit], settings: _Settings,
    by_task: dict[str, list[_Unit]] | None = None,
) -> Difference:
    """B - A over ``units`` (each weighted equally, or 1 / (tasks x the task's units) across ``by_task``)."""
    differences = {u.key: u.differences for u in units}
    weights = ({u.key: 1.0 for u in units} if by_task is None
               else {u.key: 1 / (len(by_task) * len(by_task[u.task])) for u in units})
    shares = normalised(weights)
    a = sum(shares[u.key] * sum(u.a) / len(u.a) for u in units)
    b = sum(shares[u.key] * sum(u.b) / len(u.b) for u in units)
    interval = difference_interval(differences, weights, settings.confidence, settings.n_resamples, settings.seed)
    flip = sign_flip_test(mean_terms(differences, weights), settings.n_resamples, settings.seed)
    return Difference(
        task=task, length=length, level=level, lengths=[u.length for u in units if u.length is not None],
        queries=sum(len(u.a) for u in units), a=round(a, 4), b=round(b, 4), difference=_rounded(interval),
        p_value=flip.p_value, p_method=flip.method,
    )


def _rounded(interval: Interval) -> Interval:
    """An interval as result files keep it (4 decimals, as every score)."""
    interval.estimate, interval.low, interval.high = (round(v, 4) for v in (interval.estimate, interval.low, interval.high))
    return interval


def _correct(pairs: list[PairComparison], n_runs: int) -> str:
    """Mark the significant differences: Holm-adjusted over all tests with more than two runs, raw with two."""
    tests = [d for pair in pairs for d in pair.differences]
    if n_runs <= 2:
        for test in tests:
            test.significant = test.p_value < ALPHA
        return NO_CORRECTION
    for test, adjusted in zip(tests, holm([t.p_value for t in tests]), strict=True):
        test.p_adjusted = adjusted
        test.significant = adjusted < ALPHA
    return HOLM
