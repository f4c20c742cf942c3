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

Written to ``output_dir``: ``sweep.json`` (everything, see :func:`sweep_temperature`), ``sweep.md``
(markdown tables), ``sweep.png`` (selection score vs tau), and one runner folder per run under
``select/<candidate>/`` and ``score/<candidate>/`` (each with its ``results.json``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.evaluation.cache import atomic_write_text
from longembed.evaluation.runner import (
    evaluate_model,
    library_versions,
    resolve_lengths,
    resolve_tasks,
)
from longembed.tasks import Task, TaskDataMissing

SWEEP_FORMAT = "longembed-sweep/1"
SWEEP_JSON = "sweep.json"
SWEEP_MD = "sweep.md"
SWEEP_PNG = "sweep.png"

#: Keys a candidate settings dict may have.
CANDIDATE_KEYS = (
    "temperature",
    "query_temperature",
    "document_temperature",
    "temperature_decay",
    "temperature_reference",
)
#: EncoderConfig fields the sweep sets itself: they may not come in ``encoder_options``.
SWEPT_OPTIONS = ("temperature", "temperature_decay", "temperature_reference")
DEFAULT_REFERENCE = 512  # EncoderConfig.temperature_reference's default
NOT_USED_FOR_SELECTION = (
    "NOT USED FOR SELECTION: every candidate scored on the scoring tasks, for information only; "
    "choosing tau from this table would be selecting on the test tasks"
)


# --------------------------------------------------------------------------- candidates
@dataclass(frozen=True)
class Candidate:
    """One TempScale setting: a tau per side and an optional length decay (reference None if no decay)."""

    query_temperature: float = 1.0
    document_temperature: float = 1.0
    temperature_decay: float = 0.0
    temperature_reference: int | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Candidate:
        """Parse a settings dict (keys: :data:`CANDIDATE_KEYS`); unknown keys and bad values raise.

        ``temperature`` sets both sides; ``query_temperature``/``document_temperature`` override it
        per side. The reference is kept only when the decay is not 0 (otherwise it changes nothing).
        """
        unknown = sorted(set(settings) - set(CANDIDATE_KEYS))
        if unknown:
            raise ValueError(f"unknown candidate setting(s) {unknown}; valid: {list(CANDIDATE_KEYS)}")
        both = _tau(settings.get("temperature", 1.0), "temperature")
        query = _tau(settings.get("query_temperature", both), "query_temperature")
        document = _tau(settings.get("document_temperature", both), "document_temperature")
        decay = settings.get("temperature_decay", 0.0)
        if isinstance(decay, bool) or not isinstance(decay, int | float) or not 0 <= decay <= 4:
            raise ValueError(f"temperature_decay must be in [0, 4], got {decay!r}")
        reference = settings.get("temperature_reference", DEFAULT_REFERENCE)
        if isinstance(reference, bool) or not isinstance(reference, int) or reference < 2:
            raise ValueError(f"temperature_reference must be an integer >= 2 (tokens), got {reference!r}")
        if decay == 0:
            return cls(query, document)
        return cls(query, document, float(decay), reference)

    @property
    def is_baseline(self) -> bool:
        """tau = 1 on both sides and no decay: the unmodified model."""
        return self.query_temperature == self.document_temperature == 1.0 and self.temperature_decay == 0

    @property
    def same_tau(self) -> bool:
        return self.query_temperature == self.document_temperature

    @property
    def encoder_key(self) -> tuple[float, int] | None:
        """What needs its own encoder: (decay, reference), or None for the shared constant-tau encoder."""
        if self.temperature_decay == 0:
            return None
        return (self.temperature_decay, int(self.temperature_reference or DEFAULT_REFERENCE))

    def settings(self) -> dict[str, Any]:
        """The full settings (every key explicit), as recorded in sweep.json."""
        return {
            "query_temperature": self.query_temperature,
            "document_temperature": self.document_temperature,
            "temperature_decay": self.temperature_decay,
            "temperature_reference": self.temperature_reference,
        }

    def encoder_options(self) -> dict[str, Any]:
        """EncoderConfig fields this candidate's encoder needs (empty: the shared encoder)."""
        key = self.encoder_key
        return {} if key is None else {"temperature_decay": key[0], "temperature_reference": key[1]}

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``tau=0.9``, ``q=1.0 d=0.8``, ``tau=1.0 decay=0.5 ref=512``."""
        if self.same_tau:
            text = f"tau={_num(self.query_temperature)}"
        else:
            text = f"q={_num(self.query_temperature)} d={_num(self.document_temperature)}"
        if self.temperature_decay:
            text += f" decay={_num(self.temperature_decay)} ref={self.temperature_reference}"
        return text

    @property
    def slug(self) -> str:
        """File-system name of the candidate's run folders, e.g. ``tau0.9``, ``q1.0-d0.8-decay0.5-ref512``."""
        return self.label.replace("=", "").replace(" ", "-")

    def change(self) -> tuple[bool, float, float]:
        """How far from the unmodified model (smaller = less change); the tie-break key."""
        deviation = abs(1.0 - self.query_temperature) + abs(1.0 - self.document_temperature)
        return (self.temperature_decay > 0, round(deviation, 9), self.temperature_decay)


BASELINE = Candidate()


def _tau(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1] (TempScale), got {value!r}")
    return float(value)


def _num(value: float) -> str:
    """1.0 -> "1.0", 0.85 -> "0.85" (shortest repr, always with a decimal point)."""
    return repr(float(value))


def parse_candidates(
    candidates: Sequence[Mapping[str, Any] | Candidate], include_baseline: bool = True
) -> list[tuple[Candidate, str]]:
    """Candidates in the given order, duplicates dropped, with the baseline added first if missing.

    Returns (candidate, source) pairs; source is "given" or "baseline (added)".
    """
    out: list[tuple[Candidate, str]] = []
    seen: set[Candidate] = set()
    for item in candidates:
        candidate = item if isinstance(item, Candidate) else Candidate.from_settings(item)
        if candidate not in seen:
            seen.add(candidate)
            out.append((candidate, "given"))
    if include_baseline and BASELINE not in seen:
        out.insert(0, (BASELINE, "baseline (added)"))
    if not out:
        raise ValueError("no candidates to sweep")
    return out


def choose(
    scores: Sequence[tuple[Candidate, float]], tie_tolerance: float = 0.0
) -> tuple[Candidate, list[Candidate]]:
    """The selected candidate and the candidates tied with the best score.

    The best selection score wins; candidates within ``tie_tolerance`` points of it are tied, and the
    tie goes to the least change from the unmodified model (:meth:`Candidate.change`), then to the
    earliest given. So a temperature is only adopted when it beats "no change" on the selection task.
    """
    if not scores:
        raise ValueError("no selection scores")
    if tie_tolerance < 0:
        raise ValueError(f"tie_tolerance must be >= 0, got {tie_tolerance}")
    best = max(score for _, score in scores)
    tied = [(i, c) for i, (c, score) in enumerate(scores) if score >= best - tie_tolerance - 1e-9]
    winner = min(tied, key=lambda pair: (pair[1].change(), pair[0]))[1]
    return winner, [c for _, c in tied]


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


def _default_factory(model: str | Path, **kwargs: Any) -> Any:
    from longembed.encoder import load_encoder

    return load_encoder(model, **kwargs)


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
) -> dict[str, Any]:
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
    output_dir:  where sweep.json, sweep.md, sweep.png and the run folders go (None: nothing written).
    report_all:  also score every candidate on the scoring tasks (a table marked "not used for
                 selection"); the selection never looks at it.
    tie_tolerance: selection scores within this many points of the best are ties (default 0: exact).
    encoder_factory: builds an encoder, called like ``load_encoder(model, method=..., max_length=...,
                 **options)``; default ``load_encoder`` (tests pass stubs).

    Returns the sweep dict (also written as sweep.json): ``config``, ``candidates`` (each with its
    ``selection_score``), ``selection`` (task, chosen, ties, gain over the baseline on the selection
    task), ``baseline`` and ``chosen`` (label and settings), ``scoring`` (per scoring task the
    baseline score, the chosen score and the difference; their averages), ``all_candidates`` (None
    unless report_all), ``encoders_built``, ``versions``, ``files`` and ``wall_time_s``.
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

    pool = _EncoderPool(encoder_factory or _default_factory, model, method, max_length, device, options)

    def run(candidate: Candidate, tasks: list[Task], phase: str) -> dict[str, Any]:
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
    selection_runs: dict[Candidate, dict[str, Any]] = {}
    for i in order:
        candidate = parsed[i][0]
        results = run(candidate, [select_obj], "select")
        if select_name not in results["tasks"]:
            reason = results.get("skipped", {}).get(select_name, "it produced no score")
            raise ValueError(f"the selection task {select_name!r} could not run: {reason}")
        selection_runs[candidate] = results
        so_far = [(c, float(selection_runs[c]["tasks"][select_name]["score"]))
                  for c, _ in parsed if c in selection_runs]
        pool.pin(choose(so_far, tie_tolerance)[0])
    main_score = selection_runs[parsed[0][0]]["tasks"][select_name]["main_score"]
    selection_scores = [(c, float(selection_runs[c]["tasks"][select_name]["score"])) for c, _ in parsed]
    chosen, tied = choose(selection_scores, tie_tolerance)
    score_of = dict(selection_scores)
    say(f"[sweep] chosen on {select_name}: {chosen.label} ({main_score} {score_of[chosen]:.2f})")

    # 2. scoring: the baseline and the chosen candidate (every candidate with report_all)
    scoring_runs: dict[Candidate, dict[str, Any]] = {}
    to_score = [BASELINE, chosen]
    if report_all:
        to_score += [parsed[i][0] for i in order]
    for candidate in to_score:
        if candidate not in scoring_runs:
            scoring_runs[candidate] = run(candidate, score_objs, "score")

    baseline_results, chosen_results = scoring_runs[BASELINE], scoring_runs[chosen]
    ran = [n for n in score_names if n in baseline_results["tasks"] and n in chosen_results["tasks"]]
    per_task: dict[str, Any] = {}
    for name in ran:
        b = float(baseline_results["tasks"][name]["score"])
        c = float(chosen_results["tasks"][name]["score"])
        entry: dict[str, Any] = {
            "main_score": baseline_results["tasks"][name]["main_score"],
            "baseline": b,
            "chosen": c,
            "delta": round(c - b, 4),
        }
        if "by_length" in baseline_results["tasks"][name]:
            entry["by_length"] = {
                "baseline": baseline_results["tasks"][name]["by_length"],
                "chosen": chosen_results["tasks"][name]["by_length"],
            }
        per_task[name] = entry
    average = _pair_average(per_task)
    skipped = {**baseline_results.get("skipped", {}), **chosen_results.get("skipped", {})}

    all_candidates = None
    if report_all:
        rows = []
        for candidate, _ in parsed:
            res = scoring_runs[candidate]
            scores = {n: float(res["tasks"][n]["score"]) for n in ran if n in res["tasks"]}
            rows.append({
                "label": candidate.label,
                "settings": candidate.settings(),
                "selection_score": score_of[candidate],
                "scores": scores,
                "average": round(sum(scores.values()) / len(scores), 4) if scores else None,
                "chosen": candidate == chosen,
                "run": None if out is None else f"score/{candidate.slug}",
            })
        all_candidates = {"note": NOT_USED_FOR_SELECTION, "tasks": ran, "rows": rows}

    baseline_selection = score_of.get(BASELINE)
    sweep: dict[str, Any] = {
        "format": SWEEP_FORMAT,
        "created": _dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
        "protocol": (
            f"every candidate evaluated on the selection task ({select_name}) only; the best score wins, "
            f"ties (within {tie_tolerance} points) going to the least change from tau = 1 (constant before "
            "length-dependent, then smallest |1 - tau_q| + |1 - tau_d|, then smallest decay, then order "
            "given); then the baseline (tau = 1, no decay) and the chosen candidate evaluated on the "
            "scoring tasks, which exclude the selection task"
        ),
        "config": {
            "model": str(model),
            "method": method,
            "max_length": max_length,
            "encoder_options": options,
            "encoder": baseline_results.get("config", {}).get("encoder"),
            "resolved": baseline_results.get("config", {}).get("resolved"),
            "select_task": select_name,
            "score_tasks": score_names,
            "lengths": length_list,
            "data_dir": str(data_path) if data_path is not None else None,
            "cache_dir": baseline_results.get("config", {}).get("cache_dir"),
            "batch_size": batch_size,
            "prompts": baseline_results.get("config", {}).get("prompts"),
            "tie_tolerance": tie_tolerance,
            "report_all": report_all,
        },
        "candidates": [
            {
                "label": c.label,
                "settings": c.settings(),
                "source": source,
                "selection_score": score_of[c],
                "chosen": c == chosen,
                "run": None if out is None else f"select/{c.slug}",
            }
            for c, source in parsed
        ],
        "selection": {
            "task": select_name,
            "main_score": main_score,
            "scores": {c.label: s for c, s in selection_scores},
            "chosen": chosen.label,
            "chosen_score": score_of[chosen],
            "tied": [c.label for c in tied],
            "baseline_score": baseline_selection,
            "gain_over_baseline": (
                None if baseline_selection is None else round(score_of[chosen] - baseline_selection, 4)
            ),
        },
        "baseline": {"label": BASELINE.label, "settings": BASELINE.settings()},
        "chosen": {"label": chosen.label, "settings": chosen.settings(), "is_baseline": chosen.is_baseline},
        "scoring": {
            "tasks": ran,
            "skipped": skipped,
            "per_task": per_task,
            "average": average,
            "runs": (
                None if out is None else {"baseline": f"score/{BASELINE.slug}", "chosen": f"score/{chosen.slug}"}
            ),
        },
        "all_candidates": all_candidates,
        "encoders_built": pool.built,
        "versions": library_versions(),
        "files": None,
        "wall_time_s": None,
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        plot = plot_selection(sweep, out / SWEEP_PNG)
        sweep["files"] = {"json": SWEEP_JSON, "markdown": SWEEP_MD, "plot": plot.name}
        sweep["wall_time_s"] = round(time.perf_counter() - began, 3)
        atomic_write_text(out / SWEEP_MD, sweep_markdown(sweep))
        atomic_write_text(out / SWEEP_JSON, json.dumps(sweep, indent=2) + "\n")
    else:
        sweep["wall_time_s"] = round(time.perf_counter() - began, 3)
    return sweep


def _group_rank(parsed: Sequence[tuple[Candidate, str]], index: int) -> tuple[int, int]:
    """Sort key that groups candidates by encoder (shared encoder first), keeping the given order inside."""
    keys: list[tuple[float, int] | None] = []
    for candidate, _ in parsed:
        if candidate.encoder_key not in keys:
            keys.append(candidate.encoder_key)
    key = parsed[index][0].encoder_key
    return (0 if key is None else 1 + keys.index(key), index)


def _pair_average(per_task: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Unweighted means of the baseline and chosen scores over the scoring tasks that ran."""
    if not per_task:
        return {"baseline": None, "chosen": None, "delta": None, "tasks": []}
    baseline = round(sum(e["baseline"] for e in per_task.values()) / len(per_task), 4)
    chosen = round(sum(e["chosen"] for e in per_task.values()) / len(per_task), 4)
    return {"baseline": baseline, "chosen": chosen, "delta": round(chosen - baseline, 4), "tasks": list(per_task)}


# --------------------------------------------------------------------------- report
def load_sweep(path: str | Path) -> dict[str, Any]:
    """Read a sweep: ``path`` is a sweep folder or its sweep.json."""
    path = Path(path)
    if path.is_dir():
        path = path / SWEEP_JSON
    sweep = json.loads(path.read_text())
    if sweep.get("format") != SWEEP_FORMAT:
        raise ValueError(f"{path} is not a longembed sweep file (format {sweep.get('format')!r})")
    return sweep


def _f(value: Any, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _signed(value: Any) -> str:
    return "–" if value is None else f"{value:+.2f}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int,
           numeric_to: int | None = None) -> list[str]:
    """Markdown table; columns numeric_from..numeric_to (exclusive; None: to the end) right-aligned."""
    end = len(header) if numeric_to is None else numeric_to
    align = ["---:" if numeric_from <= i < end else "---" for i in range(len(header))]
    return [_row(header), _row(align), *(_row(r) for r in rows)]


def sweep_tables(sweep: Mapping[str, Any]) -> str:
    """The markdown tables of a sweep: selection scores, baseline vs chosen, and (if any) all candidates."""
    selection, scoring = sweep["selection"], sweep["scoring"]
    lines = [
        f"## Selection on {selection['task']} ({selection['main_score']})",
        "",
        *_table(
            ["candidate", "query tau", "document tau", "decay", "reference", "score", "note"],
            [
                [
                    c["label"],
                    _num(c["settings"]["query_temperature"]),
                    _num(c["settings"]["document_temperature"]),
                    _num(c["settings"]["temperature_decay"]),
                    str(c["settings"]["temperature_reference"] or "–"),
                    _f(c["selection_score"]),
                    ", ".join(
                        x for x in (
                            "**chosen**" if c["chosen"] else "",
                            "baseline" if c["label"] == sweep["baseline"]["label"] else "",
                            "tied" if c["label"] in selection["tied"] and len(selection["tied"]) > 1 else "",
                            "added" if c["source"] != "given" else "",
                        ) if x
                    ),
                ]
                for c in sweep["candidates"]
            ],
            numeric_from=1,
            numeric_to=6,
        ),
        "",
        f"Chosen: **{selection['chosen']}** ({_f(selection['chosen_score'])}; baseline "
        f"{_f(selection['baseline_score'])}, gain {_signed(selection['gain_over_baseline'])} on the selection task).",
        "",
        f"## Baseline vs chosen on the scoring tasks (selection task {selection['task']} excluded)",
        "",
    ]
    rows = [
        [name, e["main_score"], _f(e["baseline"]), _f(e["chosen"]), _signed(e["delta"])]
        for name, e in scoring["per_task"].items()
    ]
    avg = scoring["average"]
    rows.append(["**average**", "", _f(avg["baseline"]), _f(avg["chosen"]), _signed(avg["delta"])])
    lines += _table(
        ["task", "metric", f"baseline ({sweep['baseline']['label']})", f"chosen ({sweep['chosen']['label']})",
         "delta"],
        rows,
        numeric_from=2,
    )
    for name, message in scoring.get("skipped", {}).items():
        lines.append(f"\nskipped {name}: {message}")
    full = sweep.get("all_candidates")
    if full:
        lines += [
            "",
            "## All candidates on the scoring tasks (not used for selection)",
            "",
            f"_{full['note']}._",
            "",
            *_table(
                ["candidate", "selection score", *full["tasks"], "average"],
                [
                    [
                        r["label"] + (" (chosen)" if r["chosen"] else ""),
                        _f(r["selection_score"]),
                        *(_f(r["scores"].get(t)) for t in full["tasks"]),
                        _f(r["average"]),
                    ]
                    for r in full["rows"]
                ],
                numeric_from=1,
            ),
        ]
    return "\n".join(lines)


def sweep_markdown(sweep: Mapping[str, Any]) -> str:
    """sweep.md: a heading, the protocol, the tables and the plot."""
    config = sweep["config"]
    head = [
        f"# TempScale sweep: {config['model']} ({config['method']}, max_length "
        f"{config['max_length'] if config['max_length'] is not None else 'default'})",
        "",
        f"Protocol: {sweep['protocol']}.",
        "",
        f"Lengths (passkey/needle): {', '.join(map(str, config['lengths']))}.",
        "",
        sweep_tables(sweep),
    ]
    plot = (sweep.get("files") or {}).get("plot")
    if plot:
        head += ["", f"![selection score vs tau]({plot})"]
    return "\n".join(head) + "\n"


def plot_selection(sweep: Mapping[str, Any], path: str | Path) -> Path:
    """PNG: selection score vs (document) tau, one line per series, the chosen candidate starred.

    Series: one tau for both sides; per query tau when the sides differ (x = document tau); one per
    (decay, reference) for length-aware candidates (x = the base tau). The baseline's score is a dashed
    horizontal line.
    """
    from longembed.report.plots import plt, save_figure
    series: dict[str, list[tuple[float, float]]] = {}
    chosen_point: tuple[float, float] | None = None
    for c in sweep["candidates"]:
        s = c["settings"]
        q, d = s["query_temperature"], s["document_temperature"]
        name = "one tau for both sides" if q == d else f"query tau {_num(q)}, x = document tau"
        if s["temperature_decay"]:
            name += f", length decay {_num(s['temperature_decay'])} above {s['temperature_reference']} tokens"
        series.setdefault(name, []).append((d, c["selection_score"]))
        if c["chosen"]:
            chosen_point = (d, c["selection_score"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, points in series.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    baseline = sweep["selection"]["baseline_score"]
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", linewidth=1, label="baseline (tau = 1)")
    if chosen_point is not None:
        ax.plot(*chosen_point, marker="*", markersize=16, color="crimson", linestyle="none",
                label=f"chosen: {sweep['selection']['chosen']}")
    ax.set_xlabel("tau (document side; for length decay: tau up to the reference length)")
    ax.set_ylabel(f"{sweep['selection']['task']} {sweep['selection']['main_score']} (%)")
    ax.set_title(f"TempScale selection on {sweep['selection']['task']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    return save_figure(fig, path)
