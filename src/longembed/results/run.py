"""One benchmark run's results, typed: what ``longembed eval`` writes to ``results.json``.

    >>> from longembed.results import RunResults
    >>> run = RunResults.load("runs/minilm-pi-4k")
    >>> run.average, run.tasks["passkey"].by_length[4096]

The file format (``longembed-results/1``) is the JSON form of these classes, key for key; every
score is a percentage.  A task's ``score`` is its main metric; for passkey and needle it is the mean
over the evaluated lengths, each length also in ``by_length`` and, in full, in ``lengths``.

:class:`RunFolder` writes a run's file and never loses a finished one: an unfinished run that would
replace a finished ``results.json`` writes ``results.incomplete.json`` instead, and a finished
``results.json`` of another configuration is kept as ``results.<its creation time>.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.results.files import load_result_file, write_json

RESULTS_FORMAT = "longembed-results/1"
RESULTS_FILE = "results.json"
INCOMPLETE_FILE = "results.incomplete.json"


@dataclass
class Counts:
    """How many documents and queries a task (or length) had, and how long the documents were."""

    documents: int
    queries: int
    document_tokens_mean: float
    document_tokens_max: int
    tokens_counted: str  # "tokenizer" or "words / 0.75"
    documents_truncated: int | None = None  # longer than max_length (None: no max_length, e.g. BM25)

    @classmethod
    def total(cls, parts: list[Counts]) -> Counts:
        """The counts of several lengths together (token mean weighted by documents)."""
        documents = sum(p.documents for p in parts)
        truncated = [p.documents_truncated for p in parts]
        return cls(
            documents=documents,
            queries=sum(p.queries for p in parts),
            document_tokens_mean=round(sum(p.document_tokens_mean * p.documents for p in parts) / documents, 1),
            document_tokens_max=max(p.document_tokens_max for p in parts),
            tokens_counted=parts[0].tokens_counted,
            documents_truncated=None if None in truncated else sum(truncated),  # type: ignore[arg-type]
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "documents": self.documents,
            "queries": self.queries,
            "document_tokens_mean": self.document_tokens_mean,
            "document_tokens_max": self.document_tokens_max,
            "tokens_counted": self.tokens_counted,
        }
        if self.documents_truncated is not None:
            out["documents_truncated"] = self.documents_truncated
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Counts:
        return cls(**data)


@dataclass
class CacheUse:
    """Texts read from the embedding cache and texts encoded, per side."""

    documents_cached: int = 0
    documents_encoded: int = 0
    queries_cached: int = 0
    queries_encoded: int = 0

    @property
    def encoded(self) -> int:
        return self.documents_encoded + self.queries_encoded

    def __add__(self, other: CacheUse) -> CacheUse:
        return CacheUse(
            self.documents_cached + other.documents_cached,
            self.documents_encoded + other.documents_encoded,
            self.queries_cached + other.queries_cached,
            self.queries_encoded + other.queries_encoded,
        )

    def to_dict(self) -> dict[str, int]:
        return dict(vars(self))


def _cache_to_dict(cache: CacheUse | None) -> dict[str, int]:
    return {} if cache is None else cache.to_dict()  # BM25 runs record {} (no cache)


def _cache_from_dict(data: dict[str, int] | None) -> CacheUse | None:
    return CacheUse(**data) if data else None


@dataclass
class UnitResult:
    """The scores of one retrieval problem: a real task, or a synthetic task at one length."""

    score: float
    metrics: dict[str, float]
    counts: Counts
    cache: CacheUse | None
    encode_time_s: float
    wall_time_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "metrics": dict(self.metrics),
            "counts": self.counts.to_dict(),
            "cache": _cache_to_dict(self.cache),
            "encode_time_s": self.encode_time_s,
            "wall_time_s": self.wall_time_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitResult:
        return cls(
            score=data["score"],
            metrics=dict(data["metrics"]),
            counts=Counts.from_dict(data["counts"]),
            cache=_cache_from_dict(data.get("cache")),
            encode_time_s=data["encode_time_s"],
            wall_time_s=data["wall_time_s"],
        )


@dataclass
class TaskResult:
    """One task's scores (percent); synthetic tasks also per length."""

    main_score: str
    score: float
    metrics: dict[str, float]
    counts: Counts
    cache: CacheUse | None = None
    encode_time_s: float = 0.0
    wall_time_s: float = 0.0
    stand_in_for: str | None = None
    by_length: dict[int, float] | None = None  # main score per length (passkey, needle)
    lengths: dict[int, UnitResult] | None = None  # everything per length

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"main_score": self.main_score}
        if self.stand_in_for:
            out["stand_in_for"] = self.stand_in_for
        out["score"] = self.score
        out["metrics"] = dict(self.metrics)
        if self.by_length is not None:
            out["by_length"] = {str(n): v for n, v in self.by_length.items()}
        if self.lengths is not None:
            out["lengths"] = {str(n): u.to_dict() for n, u in self.lengths.items()}
        out["counts"] = self.counts.to_dict()
        out["cache"] = _cache_to_dict(self.cache)
        out["encode_time_s"] = self.encode_time_s
        out["wall_time_s"] = self.wall_time_s
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        by_length = data.get("by_length")
        lengths = data.get("lengths")
        return cls(
            main_score=data["main_score"],
            score=data["score"],
            metrics=dict(data.get("metrics", {})),
            counts=Counts.from_dict(data["counts"]),
            cache=_cache_from_dict(data.get("cache")),
            encode_time_s=data.get("encode_time_s", 0.0),
            wall_time_s=data.get("wall_time_s", 0.0),
            stand_in_for=data.get("stand_in_for"),
            by_length=None if by_length is None else {int(n): v for n, v in by_length.items()},
            lengths=None if lengths is None else {int(n): UnitResult.from_dict(u) for n, u in lengths.items()},
        )


@dataclass
class SideEstimate:
    """What one side (documents or queries) of a unit costs: texts, cache hits, tokens to encode."""

    count: int
    cached: int
    to_encode: int
    tokens: int
    max_tokens: int


@dataclass
class UnitEstimate:
    unit: str
    documents: SideEstimate
    queries: SideEstimate
    seconds: float | None = None


@dataclass
class Estimate:
    """The cost estimate printed before a run (seconds from a timed warm-up, when measured)."""

    method: str
    cost_model: dict[str, Any] | None
    units: list[UnitEstimate]
    documents: int
    documents_cached: int
    queries: int
    queries_cached: int
    tokens_to_encode: int
    seconds: float | None

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["units"] = [
            {"unit": u.unit, "documents": vars(u.documents), "queries": vars(u.queries), "seconds": u.seconds}
            for u in self.units
        ]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        units = [
            UnitEstimate(u["unit"], SideEstimate(**u["documents"]), SideEstimate(**u["queries"]), u.get("seconds"))
            for u in data.get("units", [])
        ]
        return cls(**{**data, "units": units})


@dataclass
class RunConfig:
    """What was run: the encoder's configuration (or BM25's), the tasks, lengths, prompts, taus."""

    encoder: dict[str, Any]
    resolved: dict[str, Any] = field(default_factory=dict)  # what the encoder made of it (Lo, Lt, ...)
    tasks: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    data_dir: str | None = None
    prompts: dict[str, str] | None = None
    prompt_source: dict[str, str] | None = None
    temperatures: dict[str, float] | None = None
    batch_size: int | None = None
    similarity: str = "cosine"
    cache_dir: str | None = None
    cache_namespaces: dict[str, str] = field(default_factory=dict)
    granularity: dict[str, Any] | None = None  # {"level": "chunks", "chunking": "tokens:256", "late": True}

    @property
    def is_bm25(self) -> bool:
        return self.encoder.get("model") == "bm25"

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        return cls(**data)


@dataclass
class RunResults:
    """Everything one ``evaluate_model`` run produced; ``complete`` is True only at its end."""

    config: RunConfig
    created: str
    versions: dict[str, Any] = field(default_factory=dict)  # libraries, code hash, model files
    complete: bool = False
    estimate: Estimate | None = None
    average: float | None = None
    average_tasks: list[str] = field(default_factory=list)
    average_note: str = ""
    tasks: dict[str, TaskResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # task -> why it did not run
    wall_time_s: float | None = None

    @property
    def model_name(self) -> str | None:
        """The model's recorded name (e.g. "all-MiniLM-L6-v2 (packaged)"), if any."""
        model = self.versions.get("model")
        return model.get("name") if isinstance(model, dict) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RESULTS_FORMAT,
            "created": self.created,
            "complete": self.complete,
            "config": self.config.to_dict(),
            "versions": self.versions,
            "estimate": None if self.estimate is None else self.estimate.to_dict(),
            "average": self.average,
            "average_tasks": list(self.average_tasks),
            "average_note": self.average_note,
            "tasks": {name: task.to_dict() for name, task in self.tasks.items()},
            "skipped": dict(self.skipped),
            "wall_time_s": self.wall_time_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResults:
        estimate = data.get("estimate")
        return cls(
            config=RunConfig.from_dict(data["config"]),
            created=data.get("created", ""),
            versions=data.get("versions", {}),
            complete=data.get("complete", False),
            estimate=None if estimate is None else Estimate.from_dict(estimate),
            average=data.get("average"),
            average_tasks=list(data.get("average_tasks", [])),
            average_note=data.get("average_note", ""),
            tasks={name: TaskResult.from_dict(t) for name, t in data.get("tasks", {}).items()},
            skipped=dict(data.get("skipped", {})),
            wall_time_s=data.get("wall_time_s"),
        )

    @classmethod
    def load(cls, path: str | Path) -> RunResults:
        """Read a run: ``path`` is a run folder or its results.json."""
        return load_result_file(path, RESULTS_FILE, "longembed results file", RESULTS_FORMAT, cls.from_dict)

    def save(self, path: str | Path) -> Path:
        """Write the results as JSON to ``path`` (a file) atomically."""
        return write_json(Path(path), self.to_dict())


class RunFolder:
    """The output folder of a run; writes ``results.json`` without ever losing a finished one."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.results_file = self.path / RESULTS_FILE
        self.incomplete_file = self.path / INCOMPLETE_FILE
        self.backup: Path | None = None  # where a replaced finished results.json went
        self._finished: RunResults | None = None
        self._checked = False

    def _previous(self) -> RunResults | None:
        """The finished run already in the folder, if any (read once)."""
        if not self._checked:
            self._checked = True
            if self.results_file.is_file():
                try:
                    previous = RunResults.load(self.results_file)
                except ValueError:
                    previous = None  # not ours or damaged: it is backed up before being replaced
                    self._backup(None)
                self._finished = previous if previous is not None and previous.complete else None
        return self._finished

    def _backup(self, previous: RunResults | None) -> Path:
        stamp = (previous.created if previous is not None else "unreadable").replace(":", "")
        target = self.path / f"results.{stamp}.json"
        counter = 1
        while target.exists():
            counter += 1
            target = self.path / f"results.{stamp}-{counter}.json"
        self.results_file.rename(target)
        return target

    def write(self, results: RunResults) -> Path:
        """Write ``results``: unfinished next to a finished results.json, finished in its place.

        A finished results.json of another configuration (or other longembed code) is renamed to
        ``results.<created>.json`` first; the same configuration rerun simply replaces it.
        """
        previous = self._previous()
        if not results.complete:
            target = self.incomplete_file if previous is not None else self.results_file
            return results.save(target)
        if previous is not None and not _same_experiment(previous, results):
            self.backup = self._backup(previous)
        written = results.save(self.results_file)
        self.incomplete_file.unlink(missing_ok=True)
        return written


def _same_experiment(a: RunResults, b: RunResults) -> bool:
    """Same configuration and the same longembed code (so the same numbers are expected)."""
    def key(r: RunResults) -> tuple:
        config = {k: v for k, v in r.config.to_dict().items() if k not in ("cache_dir", "cache_namespaces")}
        return config, r.versions.get("longembed_code_sha256")

    return key(a) == key(b)
