"""The TempScale sweep (length-collapse paper, sections 4 and 5.1): choose tau on one task, then score
the choice against tau = 1 on the others, so the reported gain is not selection noise.

    >>> from longembed.evaluation.sweep_runner import sweep_temperature
    >>> sweep = sweep_temperature(
    ...     "default", method="pi", max_length=4096,
    ...     candidates=[{"temperature": t} for t in (1.0, 0.9, 0.8, 0.7, 0.5)],
    ...     select_task="qmsum", score_tasks=["passkey", "needle", "squality", "hotpotqa"],
    ...     data_dir="../shared/data", output_dir="runs/sweep-minilm-pi4k")
    >>> sweep["chosen"]["label"], sweep["scoring"]["average"]

The protocol, the candidates (:mod:`.sweep_candidates`) and what is written: docs/guides/benchmark.md
("The TempScale sweep").  Tables and the plot are :mod:`longembed.report.sweep_report`'s.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.encoder import load_encoder
from longembed.errors import UserError
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.encoders import EncoderFactory
from longembed.evaluation.provenance import library_versions
from longembed.evaluation.runner import cached_encoder, evaluate_model, resolve_lengths, resolve_tasks
from longembed.evaluation.spec import EvalSpec
from longembed.evaluation.sweep_candidates import BASELINE, TemperatureCandidate, choose, parse_candidates
from longembed.evaluation.sweep_spec import SweepSpec
from longembed.results import RunConfig, RunResults, SweepResults
from longembed.results.sweep_results import (
    SWEEP_FILE,
    AllCandidates,
    CandidateRow,
    CandidateScore,
    PairAverage,
    Scoring,
    Selection,
    TaskComparison,
)
from longembed.retrieval.strategy import Strategy
from longembed.tasks import Task, TaskDataMissing

#: EncoderConfig fields the sweep sets itself: they may not come in ``encoder_options``.
SWEPT_OPTIONS = ("temperature", "temperature_decay", "temperature_reference")
NOT_USED_FOR_SELECTION = (
    "NOT USED FOR SELECTION: every candidate scored on the scoring tasks, for information only; "
    "choosing tau from this table would be selecting on the test tasks"
)


# --------------------------------------------------------------------------- encoders
class _EncoderPool:
    """Cached encoders by (decay, reference), all from one :class:`EncoderFactory`: the shared
    constant-tau encoder is kept; of the decay encoders at most two are alive, the one of the best
    candidate so far (pinned, so the chosen candidate's encoder is still there for scoring) and the
    one being evaluated (memory stays bounded)."""

    def __init__(self, factory: EncoderFactory, spec: EvalSpec):
        self.factory, self.spec = factory, spec
        self.base: CachedEncoder | None = None
        self.pinned: tuple[tuple[float, int], CachedEncoder] | None = None
        self.slot: tuple[tuple[float, int], CachedEncoder] | None = None

    def get(self, candidate: TemperatureCandidate) -> CachedEncoder:
        key = candidate.encoder_key
        if key is None:
            if self.base is None:
                self.base = cached_encoder(self.factory(), self.spec)
            return self.base
        for held in (self.pinned, self.slot):
            if held is not None and held[0] == key:
                return held[1]
        self.slot = None  # release the previous decay encoder before building the next
        self.slot = (key, cached_encoder(self.factory(**candidate.encoder_options()), self.spec))
        return self.slot[1]

    def pin(self, candidate: TemperatureCandidate) -> None:
        """Keep ``candidate``'s encoder (the best so far) alive; release the previously pinned one."""
        key = candidate.encoder_key
        if key is None:
            self.pinned = None
        elif self.pinned is None or self.pinned[0] != key:
            if self.slot is not None and self.slot[0] == key:
                self.pinned, self.slot = self.slot, None
            else:
                self.pinned = None


# --------------------------------------------------------------------------- the sweep
def _check_data(tasks: Sequence[Task], data_dir: Path | None, lengths: Sequence[int]) -> dict[str, str]:
    """Which tasks cannot run (name -> reason), by loading each at its first requested length."""
    missing: dict[str, str] = {}
    for task in tasks:
        meta = task.metadata
        if meta.lengths is not None:
            usable = [n for n in lengths if n in meta.lengths]
            if not usable:
                missing[meta.name] = f"none of the requested lengths {list(lengths)} is a length of this task"
                continue
            length: int | None = usable[0]
        else:
            length = None
        try:
            task.load(data_dir, length)
        except TaskDataMissing as exc:
            missing[meta.name] = str(exc)
    return missing


@dataclass
class SweepPlan:
    """What a sweep does, decided before the first run: tasks, lengths, candidates, encoders, folder."""

    spec: SweepSpec
    factory: EncoderFactory
    pool: _EncoderPool
    select: Task
    score: list[Task]
    lengths: list[int]
    candidates: list[tuple[TemperatureCandidate, str]]
    data_path: Path | None
    out: Path | None
    say: Callable[[str], None]

    @property
    def select_name(self) -> str:
        return self.select.metadata.name

    @property
    def score_names(self) -> list[str]:
        return [t.metadata.name for t in self.score]

    def run(self, candidate: TemperatureCandidate, tasks: list[Task], phase: str) -> RunResults:
        """One candidate on ``tasks`` through the runner, into ``<out>/<phase>/<candidate>``."""
        self.say(f"[sweep] {phase}: {candidate.label} on {', '.join(t.metadata.name for t in tasks)}")
        spec = self.spec
        return evaluate_model(self.pool.get(candidate), EvalSpec(
            tasks=tasks, data_dir=self.data_path, lengths=self.lengths,
            output_dir=None if self.out is None else self.out / phase / candidate.slug,
            strategy=Strategy(query_prompt=spec.query_prompt, document_prompt=spec.document_prompt),
            query_temperature=candidate.query_temperature, document_temperature=candidate.document_temperature,
            batch_size=spec.batch_size, cache_dir=spec.cache_dir, use_cache=spec.use_cache, estimate=spec.estimate,
            show_progress=spec.show_progress, log=spec.log,
        ))


def sweep_temperature(
    model: str | Path,
    spec: SweepSpec | None = None,
    *,
    method: str = "truncate",
    max_length: int | None = None,
    encoder_options: Mapping[str, Any] | None = None,
    device: str | None = None,
    encoder_factory: Callable[..., Any] | None = None,
    **options: Any,
) -> SweepResults:
    """Choose a TempScale setting on one task, then measure it against tau = 1 on other tasks.

    model, method, max_length, encoder_options, device: as for ``load_encoder``; encoder_options may
                 not set temperature or temperature_decay to anything but their defaults (1 and 0): the
                 candidates set them (and temperature_reference, which is dropped here).
    spec:        a :class:`~longembed.evaluation.sweep_spec.SweepSpec`; its fields may also be given as
                 keyword arguments (which replace the spec's):
    candidates:  settings dicts (see the module docstring) or :class:`TemperatureCandidate` objects; duplicates
                 are dropped and the baseline (tau = 1, no decay) is added if absent (unless
                 ``include_baseline`` is False).
    select_task: the one task tau is chosen on (name or Task object).
    score_tasks: the tasks the choice is measured on; must not contain ``select_task`` (ValueError).
    data_dir, lengths, cache_dir, use_cache, batch_size, query_prompt, document_prompt, estimate,
                 show_progress, log: passed to every ``evaluate_model`` call.
    output_dir:  where sweep.json and the run folders go (None: nothing written).
    report_all:  also score every candidate on the scoring tasks (a table marked "not used for
                 selection"); the selection never looks at it.
    tie_tolerance: selection scores within this many points of the best are ties (default 0: exact).
    encoder_factory: builds an encoder, called like ``load_encoder(model, method=..., max_length=...,
                 **options)``; default ``load_encoder`` (tests pass stubs).  Every encoder is wrapped
                 in the runner's embedding cache (:class:`~longembed.evaluation.encoders.EncoderFactory`).

    Returns the :class:`~longembed.results.SweepResults` (also written as sweep.json): ``config``,
    ``candidates`` (each with its ``selection_score``), ``selection`` (task, chosen, ties, gain over the
    baseline on the selection task), ``baseline`` and ``chosen`` (label and settings), ``scoring`` (per
    scoring task the baseline score, the chosen score and the difference; their averages),
    ``all_candidates`` (None unless report_all), ``encoders_built``, ``versions``, ``files`` and
    ``wall_time_s``.
    """
    began = time.perf_counter()
    spec = SweepSpec(**options) if spec is None else dataclasses.replace(spec, **options)
    factory = EncoderFactory(model, method, max_length, device, _fixed_options(model, encoder_options),
                             encoder_factory or load_encoder)
    plan = plan_sweep(spec, factory)
    selection = run_selection(plan)
    scoring_runs = run_scoring(plan, selection.chosen)
    sweep = sweep_results(plan, selection, scoring_runs)
    sweep.wall_time_s = round(time.perf_counter() - began, 3)
    if plan.out is not None:
        sweep.save(plan.out / SWEEP_FILE)
    return sweep


def _fixed_options(model: str | Path, encoder_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The encoder options every candidate shares: the given ones without the TempScale options the
    candidates set (defaults, or a reference without decay, change nothing: they are dropped)."""
    if str(model) == "bm25":
        raise UserError("BM25 has no attention temperature: sweep an embedding model")
    options = dict(encoder_options or {})
    defaults = {"temperature": (None, 1.0), "temperature_decay": (None, 0, 0.0)}
    clashing = sorted(k for k, allowed in defaults.items() if options.get(k) not in allowed)
    if clashing:
        raise UserError(
            f"encoder_options set {clashing}, which the sweep's candidates set: put them in candidates"
        )
    for name in SWEPT_OPTIONS:
        options.pop(name, None)
    return options


def plan_sweep(spec: SweepSpec, factory: EncoderFactory) -> SweepPlan:
    """Check the protocol (the selection task is not a scoring task), the candidates and the data."""
    say = spec.log or (lambda _message: None)
    if spec.select_task is None:
        raise UserError("a sweep needs select_task: the one task tau is chosen on")
    select = resolve_tasks([spec.select_task.strip() if isinstance(spec.select_task, str) else spec.select_task])[0]
    score = resolve_tasks(list(spec.score_tasks))
    score_names = [t.metadata.name for t in score]
    if select.metadata.name in score_names:
        raise UserError(
            f"the selection task {select.metadata.name!r} is also a scoring task: a tau chosen on a task cannot "
            "be scored on it honestly; remove it from score_tasks"
        )
    lengths = resolve_lengths(spec.lengths)
    candidates = parse_candidates(spec.candidate_settings(), spec.include_baseline)
    if spec.tie_tolerance < 0:
        raise UserError(f"tie_tolerance must be >= 0, got {spec.tie_tolerance}")
    data_path = Path(spec.data_dir).expanduser() if spec.data_dir is not None else None
    _check_runnable(select, score, data_path, lengths, say)
    pool = _EncoderPool(factory, EvalSpec(cache_dir=spec.cache_dir, use_cache=spec.use_cache,
                                          batch_size=spec.batch_size, show_progress=spec.show_progress,
                                          log=spec.log))
    out = Path(spec.output_dir) if spec.output_dir is not None else None
    return SweepPlan(spec, factory, pool, select, score, lengths, candidates, data_path, out, say)


def _check_runnable(
    select: Task, score: list[Task], data_path: Path | None, lengths: list[int], say: Callable[[str], None]
) -> None:
    """The selection task and at least one scoring task must have data; the others are noted."""
    unavailable = _check_data([select, *score], data_path, lengths)
    select_name, score_names = select.metadata.name, [t.metadata.name for t in score]
    if select_name in unavailable:
        raise UserError(f"the selection task {select_name!r} cannot run: {unavailable[select_name]}")
    if all(name in unavailable for name in score_names):
        reasons = "; ".join(f"{n}: {unavailable[n]}" for n in score_names)
        raise UserError(f"none of the scoring tasks can run ({reasons})")
    for name in score_names:
        if name in unavailable:
            say(f"note: scoring task {name} will be skipped: {unavailable[name]}")


@dataclass
class SelectionOutcome:
    """Step 1's result: every candidate's score on the selection task, the chosen one and the ties."""

    main_score: str
    scores: list[tuple[TemperatureCandidate, float]]
    chosen: TemperatureCandidate
    tied: list[TemperatureCandidate]
    order: list[int]

    @property
    def score_of(self) -> dict[TemperatureCandidate, float]:
        return dict(self.scores)


def run_selection(plan: SweepPlan) -> SelectionOutcome:
    """Every candidate on the selection task only (grouped by encoder: each built once)."""
    name, parsed = plan.select_name, plan.candidates
    order = sorted(range(len(parsed)), key=lambda i: _group_rank(parsed, i))
    runs: dict[TemperatureCandidate, RunResults] = {}
    for i in order:
        candidate = parsed[i][0]
        results = plan.run(candidate, [plan.select], "select")
        if name not in results.tasks:
            reason = results.skipped.get(name, "it produced no score")
            raise UserError(f"the selection task {name!r} could not run: {reason}")
        runs[candidate] = results
        so_far = [(c, runs[c].tasks[name].score) for c, _ in parsed if c in runs]
        plan.pool.pin(choose(so_far, plan.spec.tie_tolerance)[0])
    main_score = runs[parsed[0][0]].tasks[name].main_score
    scores = [(c, float(runs[c].tasks[name].score)) for c, _ in parsed]
    chosen, tied = choose(scores, plan.spec.tie_tolerance)
    plan.say(f"[sweep] chosen on {name}: {chosen.label} ({main_score} {dict(scores)[chosen]:.2f})")
    return SelectionOutcome(main_score, scores, chosen, tied, order)


def run_scoring(plan: SweepPlan, chosen: TemperatureCandidate) -> dict[TemperatureCandidate, RunResults]:
    """The baseline and the chosen candidate on the scoring tasks (every candidate with report_all)."""
    order = sorted(range(len(plan.candidates)), key=lambda i: _group_rank(plan.candidates, i))
    to_score = [BASELINE, chosen]
    if plan.spec.report_all:
        to_score += [plan.candidates[i][0] for i in order]
    runs: dict[TemperatureCandidate, RunResults] = {}
    for candidate in to_score:
        if candidate not in runs:
            runs[candidate] = plan.run(candidate, plan.score, "score")
    return runs


def _comparisons(plan: SweepPlan, runs: dict[TemperatureCandidate, RunResults], chosen: TemperatureCandidate) -> dict[str, TaskComparison]:
    """Baseline vs chosen on every scoring task both ran."""
    baseline_results, chosen_results = runs[BASELINE], runs[chosen]
    per_task: dict[str, TaskComparison] = {}
    for name in plan.score_names:
        if name not in baseline_results.tasks or name not in chosen_results.tasks:
            continue
        base, best = baseline_results.tasks[name], chosen_results.tasks[name]
        by_length = None
        if base.by_length is not None and best.by_length is not None:
            by_length = {
                "baseline": {str(n): v for n, v in base.by_length.items()},
                "chosen": {str(n): v for n, v in best.by_length.items()},
            }
        per_task[name] = TaskComparison(
            base.main_score, float(base.score), float(best.score), round(best.score - base.score, 4), by_length
        )
    return per_task


def _all_candidates(
    plan: SweepPlan, runs: dict[TemperatureCandidate, RunResults], selection: SelectionOutcome, ran: list[str]
) -> AllCandidates | None:
    """Every candidate on the scoring tasks (report_all only), marked as not used for selection."""
    if not plan.spec.report_all:
        return None
    rows = []
    for candidate, _ in plan.candidates:
        scores = {n: float(runs[candidate].tasks[n].score) for n in ran if n in runs[candidate].tasks}
        rows.append(CandidateRow(
            label=candidate.label,
            settings=candidate.settings(),
            selection_score=selection.score_of[candidate],
            scores=scores,
            average=round(sum(scores.values()) / len(scores), 4) if scores else None,
            chosen=candidate == selection.chosen,
            run=None if plan.out is None else f"score/{candidate.slug}",
        ))
    return AllCandidates(NOT_USED_FOR_SELECTION, ran, rows)


def sweep_results(
    plan: SweepPlan, selection: SelectionOutcome, runs: dict[TemperatureCandidate, RunResults]
) -> SweepResults:
    """The sweep's record: protocol, configuration, candidates, selection, scoring."""
    chosen, score_of, out = selection.chosen, selection.score_of, plan.out
    per_task = _comparisons(plan, runs, chosen)
    ran = list(per_task)
    baseline_selection = score_of.get(BASELINE)
    return SweepResults(
        created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
        protocol=_protocol(plan.select_name, plan.spec.tie_tolerance),
        config=_sweep_config(plan, runs[BASELINE].config),
        candidates=[
            CandidateScore(label=c.label, settings=c.settings(), source=source, selection_score=score_of[c],
                           chosen=c == chosen, run=None if out is None else f"select/{c.slug}")
            for c, source in plan.candidates
        ],
        selection=Selection(
            task=plan.select_name,
            main_score=selection.main_score,
            scores={c.label: score for c, score in selection.scores},
            chosen=chosen.label,
            chosen_score=score_of[chosen],
            tied=[c.label for c in selection.tied],
            baseline_score=baseline_selection,
            gain_over_baseline=(
                None if baseline_selection is None else round(score_of[chosen] - baseline_selection, 4)
            ),
        ),
        baseline={"label": BASELINE.label, "settings": BASELINE.settings()},
        chosen={"label": chosen.label, "settings": chosen.settings(), "is_baseline": chosen.is_baseline},
        scoring=Scoring(
            tasks=ran,
            skipped={**runs[BASELINE].skipped, **runs[chosen].skipped},
            per_task=per_task,
            average=_pair_average(per_task),
            runs=None if out is None else {"baseline": f"score/{BASELINE.slug}", "chosen": f"score/{chosen.slug}"},
        ),
        all_candidates=_all_candidates(plan, runs, selection, ran),
        encoders_built=plan.factory.built,
        versions=library_versions(),
        files=None if out is None else {"json": SWEEP_FILE},
    )


def _protocol(select_name: str, tie_tolerance: float) -> str:
    return (
        f"every candidate evaluated on the selection task ({select_name}) only; the best score wins, "
        f"ties (within {tie_tolerance} points) going to the least change from tau = 1 (constant before "
        "length-dependent, then smallest |1 - tau_q| + |1 - tau_d|, then smallest decay, then order "
        "given); then the baseline (tau = 1, no decay) and the chosen candidate evaluated on the "
        "scoring tasks, which exclude the selection task"
    )


def _sweep_config(plan: SweepPlan, run_config: RunConfig) -> dict[str, Any]:
    """What was swept: the model and method, the baseline run's encoder, the tasks and settings."""
    factory, spec = plan.factory, plan.spec
    return {
        "model": str(factory.model),
        "method": factory.method,
        "max_length": factory.max_length,
        "encoder_options": dict(factory.options),
        "encoder": run_config.encoder,
        "resolved": run_config.resolved,
        "select_task": plan.select_name,
        "score_tasks": plan.score_names,
        "lengths": plan.lengths,
        "data_dir": str(plan.data_path) if plan.data_path is not None else None,
        "cache_dir": run_config.cache_dir,
        "batch_size": spec.batch_size,
        "prompts": run_config.prompts,
        "tie_tolerance": spec.tie_tolerance,
        "report_all": spec.report_all,
    }


def _group_rank(parsed: Sequence[tuple[TemperatureCandidate, str]], index: int) -> tuple[int, int]:
    """Sort key that groups candidates by encoder (shared encoder first), keeping the given order inside."""
    keys: list[tuple[float, int] | None] = []
    for candidate, _ in parsed:
        if candidate.encoder_key not in keys:
            keys.append(candidate.encoder_key)
    key = parsed[index][0].encoder_key
    return (0 if key is None else 1 + keys.index(key), index)


def _pair_average(per_task: Mapping[str, TaskComparison]) -> PairAverage:
    """Unweighted means of the baseline and chosen scores over the scoring tasks that ran."""
    if not per_task:
        return PairAverage(None, None, None, [])
    baseline = round(sum(e.baseline for e in per_task.values()) / len(per_task), 4)
    chosen = round(sum(e.chosen for e in per_task.values()) / len(per_task), 4)
    return PairAverage(baseline, chosen, round(chosen - baseline, 4), list(per_task))


