"""A paired comparison of runs, typed: what ``longembed compare`` writes to ``comparison.json``.

    >>> from longembed.results import Comparison
    >>> comparison = Comparison.load("comparisons/pi-vs-truncate")
    >>> [(d.task, d.length, str(d.difference), d.p_value) for d in comparison.pairs[0].differences]

The file format (``longembed-comparison/1``) is the JSON form of these classes, key for key; every score
and difference is in percent, every difference is B - A.  :func:`longembed.results.compare` computes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from longembed.results.codec import Record, to_data
from longembed.results.files import load_result_file, write_json
from longembed.results.run_results import Interval

COMPARISON_FORMAT = "longembed-comparison/1"
COMPARISON_FILE = "comparison.json"
#: The levels of a test: a unit (a real task, or a synthetic task at one length), a synthetic task over
#: its shared lengths, the average over the shared tasks.
UNIT, TASK, AVERAGE = "unit", "task", "average"
#: How the p-values of a comparison were read: Holm-adjusted (more than two runs) or as they are.
HOLM = "holm"
NO_CORRECTION = "none"


@dataclass
class ComparedRun(Record):
    """One run of a comparison: the label its tables use and where it was read from."""

    label: str
    path: str | None = None  # None: given as a RunResults object


@dataclass
class Difference(Record):
    """One paired test of run B against run A.

    ``task`` is the task's name (``"average"`` for the average over the shared tasks); ``length`` the
    unit's length (None: a real task, a synthetic task over ``lengths``, or the average).  ``a``, ``b``:
    each run's score over the shared queries; ``difference``: B - A with its paired bootstrap interval;
    ``p_value``: the sign-flip test's; ``p_adjusted``: Holm's (None when two runs are compared);
    ``significant``: the p-value read (adjusted if there is one) is below the comparison's alpha.
    """

    task: str
    length: int | None
    level: str
    lengths: list[int]
    queries: int
    a: float
    b: float
    difference: Interval
    p_value: float
    p_method: str
    p_adjusted: float | None = None
    significant: bool = False

    @property
    def p_reported(self) -> float:
        """The p-value a table shows: Holm's when the comparison adjusted, else the raw one."""
        return self.p_value if self.p_adjusted is None else self.p_adjusted


@dataclass
class NotCompared(Record):
    """A unit only one run of a pair has (a task or length the other did not run): listed, not tested."""

    task: str
    length: int | None
    only_in: str  # the label of the run that has it


@dataclass
class PairComparison(Record):
    """Run ``b`` against run ``a`` (labels): every shared unit, task and the average, and what was not shared."""

    a: str
    b: str
    differences: list[Difference]
    not_compared: list[NotCompared] = field(default_factory=list)

    def overall(self) -> Difference | None:
        """The pair's one-number verdict: the average over the shared tasks; with one shared task, that
        task over its shared lengths; with one shared unit, that unit (None: nothing was shared)."""
        for level in (AVERAGE, TASK, UNIT):
            tests = [d for d in self.differences if d.level == level]
            if len(tests) == 1:
                return tests[0]
        return None


@dataclass
class Comparison(Record):
    """Pairs of runs compared query by query (:func:`longembed.results.compare`)."""

    runs: list[ComparedRun]
    pairs: list[PairComparison]
    correction: str  # HOLM or NO_CORRECTION
    tests: int
    baseline: str | None = None
    alpha: float = 0.05
    confidence: float = 0.95
    resamples: int = 10_000
    seed: int = 0

    file_name: ClassVar[str] = COMPARISON_FILE

    def differences(self) -> list[Difference]:
        """Every test of the comparison, pair by pair."""
        return [d for pair in self.pairs for d in pair.differences]

    def to_dict(self) -> dict[str, Any]:
        return {"format": COMPARISON_FORMAT, **to_data(self)}

    @classmethod
    def load(cls, path: str | Path) -> Comparison:
        """Read a comparison: ``path`` is its folder or its comparison.json."""
        return load_result_file(path, COMPARISON_FILE, "longembed comparison file", COMPARISON_FORMAT, cls.from_dict)

    def save(self, path: str | Path) -> Path:
        """Write the comparison as JSON to ``path`` (a file) atomically."""
        return write_json(Path(path), self.to_dict())
