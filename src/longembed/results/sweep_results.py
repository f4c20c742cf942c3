"""A TempScale sweep's results, typed: what ``longembed sweep`` writes to ``sweep.json``.

The protocol (``longembed.evaluation.sweep_runner``): every candidate tau is scored on one selection task,
the best is chosen, and only then the baseline (tau = 1) and the chosen candidate are scored on the
other tasks.  ``selection`` holds the first step, ``scoring`` the second, ``all_candidates`` (only
with ``report_all``) every candidate on the scoring tasks, marked as not used for selection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.results.codec import Record, to_data
from longembed.results.files import load_result_file, write_json

SWEEP_FORMAT = "longembed-sweep/1"
SWEEP_FILE = "sweep.json"


@dataclass
class CandidateScore(Record):
    """A candidate and its score on the selection task."""

    label: str
    settings: dict[str, Any]
    source: str  # "given" or "baseline (added)"
    selection_score: float
    chosen: bool
    run: str | None  # its run folder, relative to the sweep folder


@dataclass
class Selection(Record):
    task: str
    main_score: str
    scores: dict[str, float]  # label -> selection score
    chosen: str
    chosen_score: float
    tied: list[str]
    baseline_score: float | None
    gain_over_baseline: float | None


@dataclass
class TaskComparison(Record):
    """Baseline vs chosen candidate on one scoring task."""

    main_score: str
    baseline: float
    chosen: float
    delta: float
    by_length: dict[str, dict[str, float]] | None = None  # {"baseline": {...}, "chosen": {...}}


@dataclass
class PairAverage(Record):
    baseline: float | None
    chosen: float | None
    delta: float | None
    tasks: list[str]


@dataclass
class Scoring(Record):
    tasks: list[str]
    skipped: dict[str, str]
    per_task: dict[str, TaskComparison]
    average: PairAverage
    runs: dict[str, str] | None


@dataclass
class CandidateRow(Record):
    """One candidate on every scoring task (``report_all``; never used for selection)."""

    label: str
    settings: dict[str, Any]
    selection_score: float
    scores: dict[str, float]
    average: float | None
    chosen: bool
    run: str | None


@dataclass
class AllCandidates(Record):
    note: str
    tasks: list[str]
    rows: list[CandidateRow]


@dataclass
class SweepResults(Record):
    """Everything a sweep produced (see the module docstring)."""

    created: str
    protocol: str
    config: dict[str, Any]
    candidates: list[CandidateScore]
    selection: Selection
    baseline: dict[str, Any]  # label, settings
    chosen: dict[str, Any]  # label, settings, is_baseline
    scoring: Scoring
    all_candidates: AllCandidates | None = None
    encoders_built: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] | None = None
    wall_time_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"format": SWEEP_FORMAT, **to_data(self)}

    @classmethod
    def load(cls, path: str | Path) -> SweepResults:
        """Read a sweep: ``path`` is a sweep folder or its sweep.json."""
        return load_result_file(path, SWEEP_FILE, "longembed sweep file", SWEEP_FORMAT, cls.from_dict)

    def save(self, path: str | Path) -> Path:
        return write_json(Path(path), self.to_dict())
