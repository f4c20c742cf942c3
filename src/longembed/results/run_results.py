"""One benchmark run's results, typed: what ``longembed eval`` writes to ``results.json``.

    >>> from longembed.results import RunResults
    >>> run = RunResults.load("runs/minilm-pi-4k")
    >>> run.average, run.tasks["passkey"].by_length[4096]

The file format (``longembed-results/1``) is the JSON form of these classes, key for key; every
score is a percentage.  A task's ``score`` is its main metric; for passkey and needle it is the mean
over the evaluated lengths, each length also in ``by_length`` and, in full, in ``lengths``.

:class:`~longembed.results.files.RunFolder` writes a run's file and never loses a finished one: an unfinished run that would
replace a finished ``results.json`` writes ``results.incomplete.json`` instead, and a finished
``results.json`` that a new run replaces is kept as ``results.<its creation time>.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from longembed.results.codec import Record, to_data
from longembed.results.files import load_result_file, write_json
from longembed.results.hubness import FirstRanked
from longembed.retrieval.strategy import BM25, DEFAULT_CHUNKING, Strategy

RESULTS_FORMAT = "longembed-results/1"
RESULTS_FILE = "results.json"
INCOMPLETE_FILE = "results.incomplete.json"
#: A run without an embedding cache (BM25) records its cache use as {}.
NO_CACHE_IS_EMPTY = {"empty_means_none": True}


@dataclass
class Counts(Record):
    """How many documents and queries a task (or length) had, and how long the documents were."""

    documents: int
    queries: int
    document_tokens_mean: float
    document_tokens_max: int
    tokens_counted: str  # "tokenizer" or "words / 0.75"
    # longer than max_length (None: no max_length, e.g. BM25; left out of the file)
    documents_truncated: int | None = field(default=None, metadata={"omit_none": True})

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

@dataclass
class CacheUse(Record):
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

@dataclass
class Interval(Record):
    """A score and its confidence interval (percent), and how the interval was computed.

    ``method`` names the resampling (see :mod:`longembed.results.intervals`), ``resamples`` and ``seed``
    make it reproducible from the per-query scores.
    """

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    method: str = "percentile bootstrap over queries"
    resamples: int = 10_000
    seed: int = 0

    def __str__(self) -> str:
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"

    @property
    def half_width(self) -> float:
        """Half the interval's width: the "+-" a table prints."""
        return (self.high - self.low) / 2


#: The metrics ``eval`` prints with 95% intervals beside each retrieval task's main score (nDCG@10).
SECONDARY_METRICS = ("accuracy@1", "recall@10")
#: whether the passage a search shows holds the answer, where a task locates its answers (eval, beside ndcg@10)
PASSAGE_HIT = "passage_hit@1"
#: the share of each query's top 10 that the qrels judge (any grade), where the qrels judge some document not
#: relevant (pooled judgments, ``longembed judge``): TREC's check that a score does not rest on unjudged documents
JUDGED_AT_10 = "judged@10"

#: Per-query scores and intervals are left out of files when absent (files written before they existed).
OPTIONAL = {"omit_none": True}


@dataclass
class UnitResult(Record):
    """The scores of one retrieval problem: a real task, or a synthetic task at one length.

    ``per_query``: each query's main score (percent), query id -> score: what an interval or a paired
    comparison resamples (None in files written before longembed kept them).  ``interval``: the main
    score's 95% interval.  ``data_sha256``: a fingerprint of the unit's corpus, queries and qrels, so
    two runs can be checked to have scored the same data.  ``first_ranked``: each query's first-ranked
    document id, and ``first_ranked_stats`` their summary, which tells a hub (one document ranked first
    for many queries that do not ask for it; :mod:`longembed.results.hubness`) from merely poor vectors
    (both None in files written before longembed kept them).  ``secondary_per_query`` and
    ``secondary_intervals``: the same for the other metrics ``eval`` prints (:data:`SECONDARY_METRICS`,
    accuracy@1 and recall@10), metric -> query id -> score and metric -> interval (None in older files).
    """

    score: float
    metrics: dict[str, float]
    counts: Counts
    cache: CacheUse | None = field(metadata=NO_CACHE_IS_EMPTY)
    encode_time_s: float
    wall_time_s: float
    interval: Interval | None = field(default=None, metadata=OPTIONAL)
    data_sha256: str | None = field(default=None, metadata=OPTIONAL)
    per_query: dict[str, float] | None = field(default=None, metadata=OPTIONAL)
    first_ranked: dict[str, str] | None = field(default=None, metadata=OPTIONAL)
    first_ranked_stats: FirstRanked | None = field(default=None, metadata=OPTIONAL)
    secondary_per_query: dict[str, dict[str, float]] | None = field(default=None, metadata=OPTIONAL)
    secondary_intervals: dict[str, Interval] | None = field(default=None, metadata=OPTIONAL)

@dataclass
class TaskResult(Record):
    """One task's scores (percent); synthetic tasks also per length."""

    main_score: str
    score: float
    metrics: dict[str, float]
    counts: Counts
    cache: CacheUse | None = field(default=None, metadata=NO_CACHE_IS_EMPTY)
    encode_time_s: float = 0.0
    wall_time_s: float = 0.0
    stand_in_for: str | None = field(default=None, metadata={"omit_none": True})
    # main score per length (passkey, needle)
    by_length: dict[int, float] | None = field(default=None, metadata={"omit_none": True})
    # everything per length
    lengths: dict[int, UnitResult] | None = field(default=None, metadata={"omit_none": True})
    # the task score's interval (synthetic tasks: resampled within each length)
    interval: Interval | None = field(default=None, metadata=OPTIONAL)
    # a real task's data fingerprint and per-query main scores (synthetic tasks keep them per length)
    data_sha256: str | None = field(default=None, metadata=OPTIONAL)
    per_query: dict[str, float] | None = field(default=None, metadata=OPTIONAL)
    # a real task's first-ranked document per query and their summary (synthetic tasks: per length)
    first_ranked: dict[str, str] | None = field(default=None, metadata=OPTIONAL)
    first_ranked_stats: FirstRanked | None = field(default=None, metadata=OPTIONAL)
    # a real task's accuracy@1 and recall@10 per query, and their intervals (UnitResult's fields)
    secondary_per_query: dict[str, dict[str, float]] | None = field(default=None, metadata=OPTIONAL)
    secondary_intervals: dict[str, Interval] | None = field(default=None, metadata=OPTIONAL)

    def units(self) -> dict[int | None, UnitResult | TaskResult]:
        """The task's retrieval problems: length -> its result (synthetic), or {None: self} (real)."""
        return dict(self.lengths) if self.lengths is not None else {None: self}

    def hubs(self) -> dict[int | None, FirstRanked]:
        """Length (None for a real task) -> the first-ranked summary of each unit whose top document
        is a hub (:data:`longembed.results.hubness.HUB_RULE`); empty when none is, or none was kept."""
        return {
            length: unit.first_ranked_stats
            for length, unit in self.units().items()
            if unit.first_ranked_stats is not None and unit.first_ranked_stats.is_hub
        }

@dataclass
class SideEstimate(Record):
    """What one side (documents or queries) of a unit costs: texts, cache hits, tokens to encode.

    ``tokens``: the tokens the encoder reads of the texts to encode (a whole text stops at its Lt: a
    truncating run reads at most Lo of each); ``max_tokens``: the longest of those texts, in full."""

    count: int
    cached: int
    to_encode: int
    tokens: int
    max_tokens: int


@dataclass
class UnitEstimate(Record):
    unit: str
    documents: SideEstimate
    queries: SideEstimate
    seconds: float | None = None


@dataclass
class Estimate(Record):
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

@dataclass
class RunConfig(Record):
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
    # the retrieval strategy: longembed.retrieval.strategy.Strategy.to_dict(), as advice.json and an index record it
    strategy: dict[str, Any] | None = field(default=None, metadata=OPTIONAL)
    # format 1 (before ``strategy``): {"level": "chunks", "chunking": ..., "late": ...} and {"source": "bm25",
    # "method": "rrf", "k": 60}; read by :meth:`retrieval`, never set (a null granularity is how old files
    # wrote a BM25 run, so it is written back as null)
    granularity: dict[str, Any] | None = None
    fusion: dict[str, Any] | None = field(default=None, metadata=OPTIONAL)
    # task name -> the folder a --task-dir task was read from: path, qrels file, documents, queries,
    # queries_left_out (and by reason), sha256 of each file (longembed.tasks.task_dir.TaskDirRecord)
    task_dirs: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={"omit_empty": True})
    # passkey/needle options other than the defaults, e.g. {"queries_per_length": 200, "haystack": {"path":
    # ..., "documents": 12, "words": 50000, "sha256": ...}}; left out of the file when there are none
    task_options: dict[str, Any] = field(default_factory=dict, metadata={"omit_empty": True})

    @property
    def is_bm25(self) -> bool:
        return self.encoder.get("model") == "bm25"

    def retrieval(self) -> Strategy:
        """The run's strategy: ``strategy`` when the file has it, else built from a format-1 file's
        ``granularity``, ``fusion`` and encoder config."""
        if self.strategy is not None:
            return Strategy.from_dict(self.strategy, default_model=BM25 if self.is_bm25 else
                                      str(self.encoder.get("model", "an unnamed encoder")))
        level = self.granularity or {}
        fusion = self.fusion or {}
        encoder = {} if self.is_bm25 else self.encoder
        return Strategy(
            model=self.encoder.get("model"), method=encoder.get("method"), max_length=encoder.get("max_length"),
            granularity=level.get("level", "document"), chunking=level.get("chunking") or DEFAULT_CHUNKING,
            late=level.get("late", True), fuse=fusion.get("source"), fuse_method=fusion.get("method"),
            fuse_k=fusion.get("k"), fuse_weight=fusion.get("weight"),
        )

@dataclass
class RunResults(Record):
    """Everything one ``evaluate_model`` run produced; ``complete`` is True only at its end."""

    config: RunConfig
    created: str = ""
    versions: dict[str, Any] = field(default_factory=dict)  # libraries, code hash, model files
    complete: bool = False
    estimate: Estimate | None = None
    average: float | None = None
    average_tasks: list[str] = field(default_factory=list)
    average_note: str = ""
    average_interval: Interval | None = field(default=None, metadata=OPTIONAL)
    tasks: dict[str, TaskResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # task -> why it did not run
    wall_time_s: float | None = None

    #: the file a run folder holds, and where an unfinished run goes next to a finished one
    file_name: ClassVar[str] = RESULTS_FILE
    incomplete_file_name: ClassVar[str] = INCOMPLETE_FILE

    @property
    def model_name(self) -> str | None:
        """The model's recorded name (e.g. "all-MiniLM-L6-v2 (packaged)"), if any."""
        model = self.versions.get("model")
        return model.get("name") if isinstance(model, dict) else None

    @property
    def has_per_query(self) -> bool:
        """Whether every scored unit kept its per-query scores (files written before they were kept
        have none: no interval or paired comparison can be computed from them)."""
        units = [u for t in self.tasks.values() for u in t.units().values()]
        return bool(units) and all(u.per_query is not None for u in units)

    def query_scores(self) -> dict[tuple[str, int | None], dict[str, float]]:
        """(task, length or None) -> query id -> main score (percent), for every unit that kept them."""
        return {
            (name, length): unit.per_query
            for name, task in self.tasks.items()
            for length, unit in task.units().items()
            if unit.per_query is not None
        }

    def hubs(self) -> dict[tuple[str, int | None], FirstRanked]:
        """(task, length or None) -> the first-ranked summary of every unit whose top document is a hub
        (:data:`longembed.results.hubness.HUB_RULE`); empty when none is, or the file kept no summaries."""
        return {(name, length): stats for name, task in self.tasks.items() for length, stats in task.hubs().items()}

    def to_dict(self) -> dict[str, Any]:
        return {"format": RESULTS_FORMAT, **to_data(self)}

    @classmethod
    def load(cls, path: str | Path) -> RunResults:
        """Read a run written by ``longembed eval`` / :func:`~longembed.evaluation.evaluate_model`.

        Args:
            path: a run folder, or its results.json.

        Returns:
            The typed results.

        Raises:
            MissingFileError: no results.json there.
            UserError: a file that is not UTF-8 JSON, not a longembed results file, or malformed.
        """
        return load_result_file(path, RESULTS_FILE, "longembed results file", RESULTS_FORMAT, cls.from_dict)

    def save(self, path: str | Path) -> Path:
        """Write the results as JSON to ``path`` (a file) atomically."""
        return write_json(Path(path), self.to_dict())
