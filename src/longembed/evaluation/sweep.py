"""TempScale temperature sweep with honest model selection (length-collapse paper, sections 4 and 5.1).

    >>> from longembed.evaluation.sweep import sweep_temperature
    >>> sweep = sweep_temperature(
    ...     "default", method="pi", max_length=4096,
    ...     candidates=[{"temperature": t} for t in (1.0, 0.9, 0.8, 0.7, 0.5)],
    ...     select_task="qmsum", score_tasks=["passkey", "needle", "squality", "hotpotqa"],
    ...     data_dir="../shared/data", output_dir="runs/sweep-minilm-pi4k")
    >>> sweep["chosen"]["label"], sweep["scoring"]["average"]

The paper "select[s] the optimal temperature tau for each model based on their performance across a
single task" and reports the gain on the benchmark. Reported on the same tasks that picked tau, such a
gain is partly selection noise (the best of several draws). This module keeps the two apart:

1. **Select.** Every candidate is evaluated on ``select_task`` only; the best selection score wins.
   Ties (within ``tie_tolerance`` points) go to the candidate that changes the model least: constant
   temperatures before length-dependent ones, then the smallest ``|1 - tau_q| + |1 - tau_d|``, then the
   smallest decay, then the order given. The baseline (tau = 1, no decay) is always a candidate, so
   "change nothing" can win.
2. **Score.** Only then are the baseline and the chosen candidate evaluated on ``score_tasks``, which
   must not contain the selection task. The reported gain is chosen minus baseline on those tasks.
3. Optionally (``report_all``) every candidate is also scored on the scoring tasks, for a full table
   that is marked as *not used for selection* (picking from it would be selecting on the test tasks).

A candidate is a settings dict: ``{"temperature": 0.9}`` (one tau for queries and documents),
``{"query_temperature": 1.0, "document_temperature": 0.8}`` (separate taus, the paper's Appendix C.7,
Figures 11 and 13), or a length-aware one ``{"temperature": 1.0, "temperature_decay": 0.5,
"temperature_reference": 512}`` (tau(n) = tau x (log ref / log n) ** decay above ref tokens,
:func:`longembed.extension.scaling.length_temperature`). Per-side taus are applied per call
(``evaluate_model(query_temperature=..., document_temperature=...)``) with one shared encoder; only a
new (decay, reference) pair builds another encoder (``load_encoder(..., temperature_decay=...)``).
All runs go through the runner's embedding cache, so documents encoded at one tau are reused by every
candidate that shares it, and a rerun of the sweep is fast.

Written to ``output_dir``: ``sweep.json`` (a :class:`~longembed.results.SweepResults`) and one
runner folder per run under ``select/<candidate>/`` and ``score/<candidate>/`` (each with its
``results.json``).  Tables and the plot are the report's job: ``longembed.report.write_sweep_report``
(``longembed sweep`` and ``longembed report SWEEP_DIR`` write ``sweep.md`` and ``sweep.png``).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from longembed.encoder import load_encoder
from longembed.evaluation.candidates import BASELINE, Candidate, choose, parse_candidates
from longembed.evaluation.provenance import library_versions
from longembed.evaluation.runner import evaluate_model, resolve_lengths, resolve_tasks
from longembed.results import RunResults, SweepResults
from longembed.results.sweep import (
    SWEEP_FILE,
    AllCandidates,
    CandidateRow,
    CandidateScore,
    PairAverage,
    Scoring,
    Selection,
    TaskComparison,
)
from longembed.tasks import Task, TaskDataMissing

#: EncoderConfig fields the sweep sets itself: they may not come in ``encoder_options``.
SWEPT_OPTIONS = ("temperature", "temperature_decay", "temperature_reference")
NOT_USED_FOR_SELECTION = (
    "NOT USED FOR SELECTION: every candidate scored on the scoring tasks, for information only; "
    "choosing tau from this table would be selecting on the test tasks"
)


# --------------------------------------------------------------------------- encoders
class _EncoderPool:
    """Encoders by (decay, reference): the shared constant-tau encoder is kept; of the decay encoders
    at most two are alive, the one of the best candidate so far (pinned, so the chosen candidate's
    encoder is still there for scoring) and the one being evaluated (memory stays bounded)."""

    def __init__(self, factory: Callable[..., Any], model: str | Path, method: str, max_length: int | None,
                 device: Any, options: Mapping[str, Any]):
        self.factory = factory
        self.model, self.method, self.max_length, self.device = model, method, max_length, device
        self.options = dict(options)
        self.base: Any = None
        self.pinned: tuple[tuple[float, int], Any] | None = None
        self.slot: tuple[tuple[float, int], Any] | None = None
        self.built: list[dict[str, Any]] = []

    def get(self, candidate: Candidate) -> Any:
        key = candidate.encoder_key
        if key is None:
            if self.base is None:
                self.base = self._build({})
            return self.base
        for held in (self.pinned, self.slot):
            if held is not None and held[0] == key:
                return held[1]
        self.slot = None  # release the previous decay encoder before building the next
        self.slot = (key, self._build(candidate.encoder_options()))
        return self.slot[1]

    def pin(self, candidate: Candidate) -> None:
        """Keep ``candidate``'s encoder (the best so far) alive; release the previously pinned one."""
        key = candidate.encoder_key
        if key is None:
            self.pinned = None
        elif self.pinned is None or self.pinned[0] != key:
            if self.slot is not None and self.slot[0] == key:
                self.pinned, self.slot = self.slot, None
            else:
                self.pinned = None

    def _build(self, extra: dict[str, Any]) -> Any:
        kwargs: dict[str, Any] = {"method": self.method, "max_length": self.max_length, **self.options, **extra}
        if self.device is not None:
            kwargs["device"] = self.device
        self.built.append(dict(extra))
        return self.factory(self.model, **kwargs)


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


def sweep_temperature(
    model: str | Path,
    *,
    candidates: Sequence[Mapping[str, Any] | Candidate],
    select_task: str | Task,
    score_tasks: Sequence[str | Task],
    method: str = "truncate",
    max_length: int | None = None,
    encoder_options: Mapping[str, Any] | None = None,
    data_dir: str | Path | None = None,
    lengths: Sequence[int] | None = None,
    output_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    batch_size: int = 16,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    report_all: bool = False,
    tie_tolerance: float = 0.0,
    include_baseline: bool = True,
    device: str | None = None,
    estimate: bool = False,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
    encoder_factory: Callable[..., Any] | None = None,
) -> SweepResults:
    """Choose a TempScale setting on one task, then measure it against tau = 1 on other tasks.

    model, method, max_length, encoder_options: as for ``load_encoder``; encoder_options may not set
                 temperature or temperature_decay to anything but their defaults (1 and 0): the
                 candidates set them (and temperature_reference, which is dropped here).
    candidates:  settings dicts (see the module docstring) or :class:`Candidate` objects; duplicates
                 are dropped and the baseline (tau = 1, no decay) is added if absent (unless
                 ``include_baseline`` is False).
    select_task: the one task tau is chosen on (name or Task object).
    score_tasks: the tasks the choice is measured on; must not contain ``select_task`` (ValueError).
    data_dir, lengths, cache_dir, use_cache, batch_size, query_prompt, document_prompt, estimate,
                 show_progress: passed to every ``evaluate_model`` call.
    output_dir:  where sweep.json and the run folders go (None: nothing written).
    report_all:  also score every candidate on the scoring tasks (a table marked "not used for
                 selection"); the selection never looks at it.
    tie_tolerance: selection scores within this many points of the best are ties (default 0: exact).
    encoder_factory: builds an encoder, called like ``load_encoder(model, method=..., max_length=...,
                 **options)``; default ``load_encoder`` (tests pass stubs).

    Returns the :class:`~longembed.results.SweepResults` (also written as sweep.json): ``config``,
    ``candidates`` (each with its ``selection_score``), ``selection`` (task, chosen, ties, gain over the
    baseline on the selection task), ``baseline`` and ``chosen`` (label and settings), ``scoring`` (per
    scoring task the baseline score, the chosen score and the difference; their averages),
    ``all_candidates`` (None unless report_all), ``encoders_built``, ``versions``, ``files`` and
    ``wall_time_s``.
    """
    began = time.perf_counter()
    say = log or (lambda _message: None)
    if str(model) == "bm25":
        raise ValueError("BM25 has no attention temperature: sweep an embedding model")
    options = dict(encoder_options or {})
    defaults = {"temperature": (None, 1.0), "temperature_decay": (None, 0, 0.0)}
    clashing = sorted(k for k, allowed in defaults.items() if options.get(k) not in allowed)
    if clashing:
        raise ValueError(
            f"encoder_options set {clashing}, which the sweep's candidates set: put them in candidates"
        )
    for name in SWEPT_OPTIONS:  # defaults (or a reference without decay) change nothing: drop them
        options.pop(name, None)
    select_obj, = resolve_tasks([select_task])
    score_objs = resolve_tasks(list(score_tasks))
    select_name = select_obj.metadata.name
    score_names = [t.metadata.name for t in score_objs]
    if select_name in score_names:
        raise ValueError(
            f"the selection task {select_name!r} is also a scoring task: a tau chosen on a task cannot be "
            "scored on it honestly; remove it from score_tasks"
        )
    length_list = resolve_lengths(lengths)
    parsed = parse_candidates(candidates, include_baseline)
    if tie_tolerance < 0:
        raise ValueError(f"tie_tolerance must be >= 0, got {tie_tolerance}")
    data_path = Path(data_dir).expanduser() if data_dir is not None else None
    out = Path(output_dir) if output_dir is not None else None

    unavailable = _check_data([select_obj, *score_objs], data_path, length_list)
    if select_name in unavailable:
        raise ValueError(f"the selection task {select_name!r} cannot run: {unavailable[select_name]}")
    if all(name in unavailable for name in score_names):
        reasons = "; ".join(f"{n}: {unavailable[n]}" for n in score_names)
        raise ValueError(f"none of the scoring tasks can run ({reasons})")
    for name in score_names:
        if name in unavailable:
            say(f"note: scoring task {name} will be skipped: {unavailable[name]}")

    pool = _EncoderPool(encoder_factory or load_encoder, model, method, max_length, device, options)

    def run(candidate: Candidate, tasks: list[Task], phase: str) -> RunResults:
        encoder = pool.get(candidate)
        say(f"[sweep] {phase}: {candidate.label} on {', '.join(t.metadata.name for t in tasks)}")
        return evaluate_model(
            encoder,
            tasks=tasks,
            data_dir=data_path,
            lengths=length_list,
            output_dir=None if out is None else out / phase / candidate.slug,
            query_prompt=query_prompt,
            document_prompt=document_prompt,
            query_temperature=candidate.query_temperature,
            document_temperature=candidate.document_temperature,
            batch_size=batch_size,
            cache_dir=cache_dir,
            use_cache=use_cache,
            estimate=estimate,
            show_progress=show_progress,
            log=log,
        )

    # 1. selection: every candidate on the selection task only (grouped by encoder: each built once)
    order = sorted(range(len(parsed)), key=lambda i: _group_rank(parsed, i))
    selection_runs: dict[Candidate, RunResults] = {}
    for i in order:
        candidate = parsed[i][0]
        results = run(candidate, [select_obj], "select")
        if select_name not in results.tasks:
            reason = results.skipped.get(select_name, "it produced no score")
            raise ValueError(f"the selection task {select_name!r} could not run: {reason}")
        selection_runs[candidate] = results
        so_far = [(c, selection_runs[c].tasks[select_name].score) for c, _ in parsed if c in selection_runs]
        pool.pin(choose(so_far, tie_tolerance)[0])
    main_score = selection_runs[parsed[0][0]].tasks[select_name].main_score
    selection_scores = [(c, float(selection_runs[c].tasks[select_name].score)) for c, _ in parsed]
    chosen, tied = choose(selection_scores, tie_tolerance)
    score_of = dict(selection_scores)
    say(f"[sweep] chosen on {select_name}: {chosen.label} ({main_score} {score_of[chosen]:.2f})")

    # 2. scoring: the baseline and the chosen candidate (every candidate with report_all)
    scoring_runs: dict[Candidate, RunResults] = {}
    to_score = [BASELINE, chosen]
    if report_all:
        to_score += [parsed[i][0] for i in order]
    for candidate in to_score:
        if candidate not in scoring_runs:
            scoring_runs[candidate] = run(candidate, score_objs, "score")

    baseline_results, chosen_results = scoring_runs[BASELINE], scoring_runs[chosen]
    ran = [n for n in score_names if n in baseline_results.tasks and n in chosen_results.tasks]
    per_task: dict[str, TaskComparison] = {}
    for name in ran:
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
    skipped = {**baseline_results.skipped, **chosen_results.skipped}

    all_candidates = None
    if report_all:
        rows = []
        for candidate, _ in parsed:
            res = scoring_runs[candidate]
            scores = {n: float(res.tasks[n].score) for n in ran if n in res.tasks}
            rows.append(CandidateRow(
                label=candidate.label,
                settings=candidate.settings(),
                selection_score=score_of[candidate],
                scores=scores,
                average=round(sum(scores.values()) / len(scores), 4) if scores else None,
                chosen=candidate == chosen,
                run=None if out is None else f"score/{candidate.slug}",
            ))
        all_candidates = AllCandidates(NOT_USED_FOR_SELECTION, ran, rows)

    baseline_selection = score_of.get(BASELINE)
    run_config = baseline_results.config
    sweep = SweepResults(
        created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
        protocol=(
            f"every candidate evaluated on the selection task ({select_name}) only; the best score wins, "
            f"ties (within {tie_tolerance} points) going to the least change from tau = 1 (constant before "
            "length-dependent, then smallest |1 - tau_q| + |1 - tau_d|, then smallest decay, then order "
            "given); then the baseline (tau = 1, no decay) and the chosen candidate evaluated on the "
            "scoring tasks, which exclude the selection task"
        ),
        config={
            "model": str(model),
            "method": method,
            "max_length": max_length,
            "encoder_options": options,
            "encoder": run_config.encoder,
            "resolved": run_config.resolved,
            "select_task": select_name,
            "score_tasks": score_names,
            "lengths": length_list,
            "data_dir": str(data_path) if data_path is not None else None,
            "cache_dir": run_config.cache_dir,
            "batch_size": batch_size,
            "prompts": run_config.prompts,
            "tie_tolerance": tie_tolerance,
            "report_all": report_all,
        },
        candidates=[
            CandidateScore(
                label=c.label,
                settings=c.settings(),
                source=source,
                selection_score=score_of[c],
                chosen=c == chosen,
                run=None if out is None else f"select/{c.slug}",
            )
            for c, source in parsed
        ],
        selection=Selection(
            task=select_name,
            main_score=main_score,
            scores={c.label: score for c, score in selection_scores},
            chosen=chosen.label,
            chosen_score=score_of[chosen],
            tied=[c.label for c in tied],
            baseline_score=baseline_selection,
            gain_over_baseline=(
                None if baseline_selection is None else round(score_of[chosen] - baseline_selection, 4)
            ),
        ),
        baseline={"label": BASELINE.label, "settings": BASELINE.settings()},
        chosen={"label": chosen.label, "settings": chosen.settings(), "is_baseline": chosen.is_baseline},
        scoring=Scoring(
            tasks=ran,
            skipped=skipped,
            per_task=per_task,
            average=_pair_average(per_task),
            runs=None if out is None else {"baseline": f"score/{BASELINE.slug}", "chosen": f"score/{chosen.slug}"},
        ),
        all_candidates=all_candidates,
        encoders_built=pool.built,
        versions=library_versions(),
        files=None if out is None else {"json": SWEEP_FILE},
    )
    sweep.wall_time_s = round(time.perf_counter() - began, 3)
    if out is not None:
        sweep.save(out / SWEEP_FILE)
    return sweep


def _group_rank(parsed: Sequence[tuple[Candidate, str]], index: int) -> tuple[int, int]:
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


