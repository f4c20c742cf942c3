"""Many runs as one long table: model x strategy x task x length x metric, each score with its interval.

    >>> from longembed.report.table import load_table
    >>> table = load_table(["results/runs", "results/advise/*/runs"])
    >>> df = table.to_pandas()              # one row per (run, task, length, metric)
    >>> df[(df.task == "passkey") & (df.length == 4096) & df.main].sort_values("score")

What mteb's results objects are to mteb, this is to ``results.json`` files: :func:`score_table` flattens
:class:`~longembed.results.RunResults` into :class:`ScoreRow` rows (plain data, no pandas needed), and
:meth:`ScoreTable.to_pandas` gives the DataFrame (pandas is the optional ``tables`` extra).  A row is one
score of one run at one **level**: a ``unit`` (a real task, or a synthetic task at one length), a
synthetic ``task`` over its lengths, or the run's ``average`` over its tasks (the levels of
:func:`longembed.results.compare`).

The intervals are the ones the runs recorded: ``eval`` computes each with a percentile bootstrap over
queries (:mod:`longembed.results.intervals`); a unit that kept per-query scores but no interval gets
one from the same function here, and a score without either has none (``low``/``high`` None).  The
per-query scores stay in the runs (:meth:`ScoreTable.per_query`), for paired comparisons.

A row names its run's **strategy** (the method and everything that changes what is scored:
``"pi 4096 late chunks tokens:256 + bm25 rrf"``, :func:`~longembed.report.labels.strategy_label`)
apart from its **model** and its **data** (the passkey/needle options that change the documents,
``"200 q/length in blocks of 50"``, and each unit's data fingerprint), so runs on the same data can be
grouped and compared.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from longembed.errors import MissingExtraError, UserError
from longembed.report.labels import Run, model_name, strategy_label, task_option_parts, unique_labels
from longembed.report.write import collect_runs
from longembed.results import Interval, RunResults, TaskResult, UnitResult
from longembed.results.comparison import AVERAGE, TASK, UNIT
from longembed.results.intervals import bootstrap_interval

try:  # the ``tables`` extra
    import pandas as pd

    PANDAS_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    PANDAS_IMPORT_ERROR = exc
    pd = None  # type: ignore[assignment]

INSTALL_HINT = "pip install 'longembed[tables]'"
#: The strategy of a BM25 run; its model is "BM25" too (no embedding model).
BM25_STRATEGY = "bm25"


@dataclass(frozen=True)
class ScoreRow:
    """One score of one run: where it comes from, what was scored, the score and its 95% interval.

    ``level``: "unit", "task" (a synthetic task over its lengths) or "average" (task "average");
    ``length``: a synthetic unit's length (None for a real task, a task row and the average);
    ``main``: whether ``metric`` is the task's main score (nDCG@10, accuracy@1), the one the
    intervals, comparisons and averages are about; ``max_length``: the encoder's Lt (None for BM25);
    ``queries``: queries scored; ``data``: the passkey/needle options that change the documents ("" for
    the defaults); ``data_sha256``: the unit's data fingerprint (same fingerprint: same documents,
    queries and judgements); ``tokens_per_document``: the mean tokens of a document the model reads,
    min(the documents' mean tokens, Lt) (None for BM25, which reads words, and for rows above a unit);
    ``encode_time_s``: the seconds the run spent encoding, as recorded (0 when its vectors came from
    the embedding cache; ``cached``).
    """

    run: str
    path: str | None
    model: str
    strategy: str
    method: str
    max_length: int | None
    data: str
    task: str
    length: int | None
    level: str
    metric: str
    main: bool
    score: float
    low: float | None = None
    high: float | None = None
    queries: int | None = None
    data_sha256: str | None = None
    tokens_per_document: float | None = None
    encode_time_s: float | None = None
    cached: bool | None = None

    @property
    def interval(self) -> Interval | None:
        """The score with its interval, or None when the run kept neither an interval nor per-query scores."""
        return None if self.low is None or self.high is None else Interval(self.score, self.low, self.high)


COLUMNS = [f.name for f in fields(ScoreRow)]


@dataclass
class ScoreTable:
    """The rows of many runs, with the runs themselves (by label) for their per-query scores."""

    rows: list[ScoreRow]
    runs: dict[str, RunResults] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, **where: Any) -> list[ScoreRow]:
        """The rows whose fields equal ``where``'s values: ``table.select(task="passkey", main=True)``."""
        unknown = sorted(set(where) - set(COLUMNS))
        if unknown:
            raise UserError(f"no such column: {', '.join(unknown)} (columns: {', '.join(COLUMNS)})")
        return [r for r in self.rows if all(getattr(r, k) == v for k, v in where.items())]

    def averages(self) -> dict[str, ScoreRow]:
        """Run label -> its average over tasks (the run's recorded ``average`` and interval), for the
        runs that have one."""
        return {r.run: r for r in self.rows if r.level == AVERAGE}

    def per_query(self, run: str, task: str, length: int | None) -> dict[str, float] | None:
        """A unit's per-query main scores (query id -> percent), None when the run did not keep them."""
        return self.runs[run].tasks[task].units()[length].per_query

    def to_records(self) -> list[dict[str, Any]]:
        """The rows as dicts (what ``--json`` writes and :meth:`to_pandas` reads)."""
        return [asdict(r) for r in self.rows]

    def to_pandas(self) -> Any:
        """The table as a ``pandas.DataFrame``, one row per score, the columns of :class:`ScoreRow`
        (``length`` and ``max_length`` as nullable integers).  Needs pandas (the ``tables`` extra)."""
        if pd is None:
            raise MissingExtraError(f"ScoreTable.to_pandas needs pandas ({PANDAS_IMPORT_ERROR}): {INSTALL_HINT}")
        frame = pd.DataFrame.from_records(self.to_records(), columns=COLUMNS)
        return frame.astype({"length": "Int64", "max_length": "Int64", "queries": "Int64"})

    to_dataframe = to_pandas  # mteb's name for the same thing


def load_table(paths: Sequence[str | Path], base_models: Mapping[str, str] | None = None) -> ScoreTable:
    """The table of the runs at ``paths``: run folders, results.json files, folders of run folders, or
    glob patterns of any of them (``"results/advise/*/runs"``), as ``longembed report`` reads them.
    ``base_models``: as for :func:`score_table`.  Raises FileNotFoundError for a path (or a pattern)
    that names no run."""
    runs = collect_runs(expand_globs(paths))
    return score_table({run.label: run.results for run in runs}, {run.label: run.path for run in runs}, base_models)


def expand_globs(paths: Sequence[str | Path]) -> list[Path]:
    """Each path that exists as it is, else its glob pattern's matches, sorted (a pattern that matches
    nothing is kept, so the error names it)."""
    expanded: list[Path] = []
    for raw in paths:
        text = str(raw)
        matches = sorted(glob.glob(text)) if not Path(text).exists() and glob.has_magic(text) else []
        expanded += [Path(m) for m in matches] or [Path(text)]
    return expanded


def score_table(
    runs: Mapping[str, RunResults] | Sequence[RunResults], paths: Mapping[str, Path | None] | None = None,
    base_models: Mapping[str, str] | None = None,
) -> ScoreTable:
    """The table of ``runs``: label -> run (the labels name the rows' ``run``), or a list of runs
    (labelled as ``longembed report`` labels them: model, strategy and data, the folder where two clash).

    ``base_models``: model name -> the model it was trained from (``{"minilm-alibi": "all-MiniLM-L6-v2"}``):
    a tuned or retrofitted folder's runs then count as strategies of its base model, named with the
    folder (``"minilm-alibi native 8192"``), so they are compared with the base model's methods."""
    if not isinstance(runs, Mapping):
        listed = [Run(Path(f"run {i}"), r) for i, r in enumerate(runs, 1)]
        unique_labels(listed)
        runs = {r.label: r.results for r in listed}
    rows = [row for label, results in runs.items()
            for row in run_rows(label, results, None if paths is None else paths.get(label), base_models)]
    return ScoreTable(rows, dict(runs))


def run_rows(
    label: str, results: RunResults, path: Path | None = None, base_models: Mapping[str, str] | None = None
) -> list[ScoreRow]:
    """One run's rows: every unit's metrics, every synthetic task's score over its lengths, the average
    (``base_models``: as for :func:`score_table`)."""
    config = results.config
    max_length = None if config.is_bm25 else _max_length(results)
    model = model_name(results)
    strategy = BM25_STRATEGY if config.is_bm25 else strategy_label(results)
    if base_models and model in base_models:
        model, strategy = base_models[model], f"{model} {strategy}"
    base = {
        "run": label, "path": None if path is None else str(path), "model": model, "strategy": strategy,
        "method": BM25_STRATEGY if config.is_bm25 else str(config.resolved.get("method") or config.encoder.get("method")),
        "max_length": max_length, "data": " ".join(task_option_parts(config.task_options)),
    }
    rows: list[ScoreRow] = []
    for name, task in results.tasks.items():
        for length, unit in task.units().items():
            rows += unit_rows(base, name, length, task.main_score, unit, None if config.is_bm25 else max_length)
        if task.lengths is not None:
            rows.append(ScoreRow(**base, task=name, length=None, level=TASK, metric=task.main_score, main=True,
                                 score=task.score, **_bounds(task.interval), queries=task.counts.queries))
    if results.average is not None:
        rows.append(ScoreRow(**base, task=AVERAGE, length=None, level=AVERAGE, metric="average", main=True,
                             score=results.average, **_bounds(results.average_interval)))
    return rows


def unit_rows(
    base: dict[str, Any], task: str, length: int | None, main_metric: str, unit: UnitResult | TaskResult,
    max_length: int | None,
) -> list[ScoreRow]:
    """A unit's rows: its main score with its interval, then its other metrics (with their recorded
    intervals: accuracy@1 and recall@10 beside nDCG@10)."""
    counts = unit.counts
    tokens = None if max_length is None else min(counts.document_tokens_mean, max_length)
    cache = unit.cache
    shared = {**base, "task": task, "length": length, "level": UNIT, "queries": counts.queries,
              "data_sha256": unit.data_sha256, "tokens_per_document": tokens, "encode_time_s": unit.encode_time_s,
              "cached": None if cache is None else cache.encoded == 0}
    rows = [ScoreRow(**shared, metric=main_metric, main=True, score=unit.score, **_bounds(_main_interval(unit)))]
    secondary = unit.secondary_intervals or {}
    for metric, value in unit.metrics.items():
        if metric != main_metric:
            rows.append(ScoreRow(**shared, metric=metric, main=False, score=value, **_bounds(secondary.get(metric))))
    return rows


def _main_interval(unit: UnitResult | TaskResult) -> Interval | None:
    """The unit's recorded interval, else the bootstrap over its per-query scores, else None."""
    if unit.interval is not None:
        return unit.interval
    if unit.per_query:
        return bootstrap_interval(list(unit.per_query.values()))
    return None


def _bounds(interval: Interval | None) -> dict[str, float | None]:
    return {"low": None if interval is None else interval.low, "high": None if interval is None else interval.high}


def _max_length(results: RunResults) -> int | None:
    value = results.config.resolved.get("max_length") or results.config.encoder.get("max_length")
    return None if value is None else int(value)
