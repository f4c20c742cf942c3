"""Results, typed and in one place: benchmark runs, TempScale sweeps, collapse measurements, paired
comparisons and ``longembed advise``'s advice.

Every command writes its results through this package (atomically, with NaN as null) and every
reader (``report``, ``sweep``, ``collapse``, your own notebook) loads them back as typed objects:

    >>> from longembed.results import RunResults
    >>> RunResults.load("runs/minilm-pi-4k").tasks["passkey"].by_length
    >>> compare(["runs/minilm-truncate", "runs/minilm-pi-4k"]).pairs[0].differences  # paired, per query

The file helpers (``atomic_write_text``, ``read_json``, ``RunFolder``, ...) are not part of the public
API: they live in ``longembed.results.files``.

``compare`` is imported here, not lazily: its module shares its name, and a lazy export would be
shadowed by the module as soon as anything imported ``longembed.results.compare`` first.  Nothing on
``longembed --help``'s path imports this package (tests/cli/test_startup.py).
"""

from longembed.results.advice import ADVICE_FILE, Advice, StrategyCost, StrategyResult
from longembed.results.collapse import COLLAPSE_FILE, BucketStats, CollapseResults
from longembed.results.compare import compare
from longembed.results.comparison import COMPARISON_FILE, Comparison
from longembed.results.hubness import HUB_RULE, FirstRanked, first_ranked_summary, hub_line
from longembed.results.pooled_runs import pool_runs
from longembed.results.run_results import (
    RESULTS_FILE,
    RESULTS_FORMAT,
    CacheUse,
    Counts,
    Estimate,
    Interval,
    RunConfig,
    RunResults,
    SideEstimate,
    TaskResult,
    UnitEstimate,
    UnitResult,
)
from longembed.results.sweep_results import SWEEP_FILE, SweepResults

__all__ = [
    "ADVICE_FILE",
    "COLLAPSE_FILE",
    "COMPARISON_FILE",
    "HUB_RULE",
    "RESULTS_FILE",
    "RESULTS_FORMAT",
    "SWEEP_FILE",
    "Advice",
    "BucketStats",
    "CacheUse",
    "CollapseResults",
    "Comparison",
    "Counts",
    "Estimate",
    "FirstRanked",
    "Interval",
    "RunConfig",
    "RunResults",
    "SideEstimate",
    "StrategyCost",
    "StrategyResult",
    "SweepResults",
    "TaskResult",
    "UnitEstimate",
    "UnitResult",
    "compare",
    "first_ranked_summary",
    "hub_line",
    "pool_runs",
]
