"""Results, typed and in one place: benchmark runs, TempScale sweeps and collapse measurements.

Every command writes its results through this package (atomically, with NaN as null) and every
reader (``report``, ``sweep``, ``collapse``, your own notebook) loads them back as typed objects:

    >>> from longembed.results import RunResults
    >>> RunResults.load("runs/minilm-pi-4k").tasks["passkey"].by_length
"""

from longembed.results.collapse import COLLAPSE_FILE, BucketStats, CollapseResults
from longembed.results.files import (
    RunFolder,
    atomic_write_bytes,
    atomic_write_text,
    json_safe,
    read_json,
    write_json,
)
from longembed.results.run import (
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
from longembed.results.sweep import SWEEP_FILE, SweepResults

__all__ = [
    "COLLAPSE_FILE",
    "RESULTS_FILE",
    "RESULTS_FORMAT",
    "SWEEP_FILE",
    "BucketStats",
    "CacheUse",
    "CollapseResults",
    "Counts",
    "Estimate",
    "Interval",
    "RunConfig",
    "RunFolder",
    "RunResults",
    "SideEstimate",
    "SweepResults",
    "TaskResult",
    "UnitEstimate",
    "UnitResult",
    "atomic_write_bytes",
    "atomic_write_text",
    "json_safe",
    "read_json",
    "write_json",
]
