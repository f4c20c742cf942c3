"""Which retrieval strategy to use on one's documents, typed: what ``longembed advise`` writes to
``advice.json``.

    >>> from longembed.results.advice import Advice
    >>> advice = Advice.load("advice/contracts")
    >>> advice.recommendation.choice, [(s.name, s.score, s.cost.index_bytes) for s in advice.strategies]

The file format (``longembed-advice/2``; ``/1`` files, written before the non-inferiority rule, still
load: :func:`upgrade_v1`) is the JSON form of these classes, key for key.  Scores and
differences are percentages (a run's average over its tasks); every difference is the strategy's score
minus the best strategy's, on the same queries.  Costs are measured on the machine that wrote the file
(``machine``) and are noisy: seconds and milliseconds from a few timed calls.
:func:`longembed.advice.advise` computes one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from longembed.errors import UserError, UserFileError
from longembed.results.codec import Record, to_data
from longembed.results.files import load_result_file, write_json
from longembed.results.run_results import Interval
from longembed.retrieval.strategy import (
    BM25,
    DEFAULT_CHUNKING,
    DENSE,
    FUSION_SUFFIX,
    HYBRID,
    LATE_CHUNKS,
    TRAINED_LATE_CHUNKS,
    TUNED_SUFFIX,
    Strategy,
)
from longembed.retrieval.strategy_schema import (
    check_encoder_options,
    check_fusion_fields,
    check_strategy_dict,
    check_type,
)

__all__ = ["BM25", "DENSE", "HYBRID"]  # the kinds of strategy, as advice.json writes them

ADVICE_FORMAT = "longembed-advice/2"
#: The first format: its rule called a strategy "tied" with the best when their difference was not
#: significant (no margin); published advice in results/advise/ has it.
ADVICE_FORMAT_V1 = "longembed-advice/1"
ADVICE_FILE = "advice.json"


@dataclass
class StrategyCost(Record):
    """What a strategy costs a user, measured on this machine.

    ``encode_seconds_per_1k_tokens``: an uncached encode (BM25: indexing) of ``sample_documents``
    documents, per 1,000 of their tokens (the documents' own tokens, counted with the model's tokenizer:
    a truncating strategy reads fewer of them, which is what it saves).  ``vectors_per_document``: 1, or
    the mean number of chunks (None for BM25).  ``index_bytes``: the index of every evaluated document
    (float32 vectors: vectors x dimensions x 4; BM25: bm25s' sparse score matrix; a hybrid: both).
    ``query_latency_ms``: the median over ``latency_queries`` queries of encoding one query and scoring
    it against that index (top 10 kept).
    """

    encode_seconds_per_1k_tokens: float
    vectors_per_document: float | None
    dimensions: int | None
    index_bytes: int
    query_latency_ms: float
    index: str  # what the index holds: "float32 vectors", "bm25s sparse matrix", or both


@dataclass
class VersusBest(Record):
    """A strategy against the best one on the same queries (:func:`longembed.results.compare`).

    ``difference``: this strategy's score minus the best's, with its 95% paired bootstrap interval;
    ``bound``: the same difference's simultaneous interval (Bonferroni over the comparisons with the
    best: two-sided 1 - 0.05 / m, so ``bound.low`` is a one-sided 1 - 0.025 / m lower confidence bound
    that holds for all m strategies at once); ``verdict``: "within" the margin (``bound.low`` >=
    -margin: non-inferior, may replace the best), "worse" (``bound.high`` < -margin: worse by more than
    the margin) or "undecided" (the data cannot tell); ``queries``: the queries compared;
    ``queries_needed``: for an undecided strategy whose observed difference is inside the margin, the
    queries a non-inferiority test at 80% power would need at the observed spread (None otherwise);
    ``level``: the comparison's test it is (the average over tasks, a task over its lengths, or one
    unit); ``p_value``: the paired sign-flip test's; ``p_adjusted``: Holm's over all the comparisons
    with the best; ``significant``: ``p_adjusted`` below 0.05 (a difference, not a margin: informative
    only, the recommendation reads ``verdict``).
    """

    difference: Interval
    level: str
    p_value: float
    p_method: str
    p_adjusted: float
    significant: bool
    bound: Interval | None = None
    verdict: str = ""
    queries: int = 0
    queries_needed: int | None = None


@dataclass
class StrategyResult(Record):
    """One candidate strategy: what it is, where its run is, its score and what it costs.

    ``run``: its run folder relative to the advice folder (``runs/<name>``: ``longembed report`` and
    ``compare`` read it).  ``score``: the run's average (percent) with its 95% interval.
    ``versus_best``: None for the best strategy itself.  ``hubs``: the run's hubs, task (and length) ->
    the hub described (:mod:`longembed.results.hubness`): a strategy whose vectors crowd together on your
    documents.
    """

    name: str
    description: str
    kind: str  # BM25, DENSE or HYBRID
    run: str
    score: float
    interval: Interval | None
    cost: StrategyCost
    method: str | None = None  # the encoder's extension method (None: BM25)
    max_length: int | None = None  # the encoder's Lt
    granularity: dict[str, Any] = field(default_factory=dict)
    fusion: dict[str, Any] | None = None
    versus_best: VersusBest | None = None
    hubs: dict[str, str] = field(default_factory=dict, metadata={"omit_empty": True})
    # passage hit@1 (percent, 95% interval) pooled over the queries of the tasks that locate answers:
    # whether the passage a search shows holds the answer (None: no task locates its answers)
    passage_hit: Interval | None = field(default=None, metadata={"omit_none": True})
    # judged@10 (percent): the share of its top 10 the qrels judge, where they judge some document not relevant
    # (pooled judgments, ``longembed judge``); None otherwise
    judged_at_10: float | None = field(default=None, metadata={"omit_none": True})
    # the ``longembed eval`` options of its run, keyed as eval's flags (``max_length`` for --max-length):
    # what ``longembed index --from-advice`` reads (schema: :mod:`longembed.advice`)
    config: dict[str, Any] = field(default_factory=dict)
    # the commands that rerun it: "eval" (reproduces its score), "serve" (its model), "index" (its index)
    commands: dict[str, str] = field(default_factory=dict)
    # the dtype each command runs the model in: the strategy's, else eval's float32 for all three (index
    # --from-advice builds in the dtype advise scored; serve runs the index's); empty for BM25
    dtypes: dict[str, str] = field(default_factory=dict, metadata={"omit_empty": True})
    # a tuned fusion: the rule fitted on every query, the grid, the folds and seed, each fold's rule, and the
    # fitted rule's in-sample score (``score`` is out-of-fold; :mod:`longembed.evaluation.fusion_tuning`)
    tuning: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})


@dataclass
class Recommendation(Record):
    """The advice: the best-scoring strategy, the one to use (``choice``: the cheapest strategy within
    ``margin`` points of the best by a simultaneous non-inferiority bound, the best itself when nothing
    cheaper qualifies), the strategies that qualify (``within``), the cheaper ones the data cannot
    decide (``undecided``: more queries could make one the choice), how "cheapest" is ordered, the
    headline (``reason``: what to use and what it costs in points) and, when the data cannot decide,
    how to get the queries that would (``more_queries``)."""

    best: str
    choice: str
    margin: float
    within: list[str]
    undecided: list[str]
    cost_order: str
    reason: str
    more_queries: str = ""


@dataclass
class StrategyEstimate(Record):
    """One strategy's part of the estimate printed before the runs: texts and tokens it will encode
    (cached ones excluded) and the estimated seconds (0 for BM25 and hybrids, which encode nothing)."""

    name: str
    documents: int
    documents_to_encode: int
    queries_to_encode: int
    tokens_to_encode: int
    seconds: float
    note: str = ""
    actual_seconds: float | None = None  # the run's wall time, filled in after it (the estimate's error)


@dataclass
class AdviceEstimate(Record):
    """The estimate printed before the runs (``text``, as printed), and the budget it was held to.

    ``seconds``: the strategies' encoding plus ``measurement_seconds`` (the uncached cost
    measurements); BM25 scoring and the statistics are not in it.
    """

    strategies: list[StrategyEstimate]
    measurement_seconds: float
    seconds: float
    budget_seconds: float | None
    method: str
    text: str = ""


@dataclass
class SampledTask(Record):
    """What budget sampling kept of one task: queries (per length, for passkey and needle) and
    documents, each of how many."""

    task: str
    queries: int
    queries_of: int
    documents: int | None = None  # None: passkey and needle (2 documents per query, per length)
    documents_of: int | None = None
    per_length: bool = False


@dataclass
class Sampling(Record):
    """How the data was cut to fit the budget: the fraction aimed at, the seed, each task's counts, and
    whether the estimate of the sample fits the budget (it may not, at the smallest sample allowed)."""

    seed: int
    fraction: float
    tasks: list[SampledTask]
    full_estimate_seconds: float
    estimate_seconds: float
    within_budget: bool
    how: str


@dataclass
class Advice(Record):
    """Everything ``longembed advise`` measured and concluded (:func:`longembed.advice.advise`)."""

    model: str
    position_scheme: str
    pooling: str
    original_length: int
    max_length: int | None
    tasks: list[str]
    strategies: list[StrategyResult]
    recommendation: Recommendation
    estimate: AdviceEstimate
    wall_time_s: float
    left_out: dict[str, str] = field(default_factory=dict)  # strategy -> why it is not a candidate
    sampling: Sampling | None = None
    measurement: dict[str, Any] = field(default_factory=dict)  # how costs were measured, and where
    alpha: float = 0.05
    recommended: str = ""  # the strategy to use (= recommendation.choice), for tools that read the file
    margin: float = 2.0  # the non-inferiority margin, in the score's points
    comparison: str | None = None  # the full paired comparison's folder, relative to the advice folder
    created: str = ""
    dtype_auto: str = ""  # what --dtype auto (index's default without --from-advice) chose where advise ran, and why

    file_name: ClassVar[str] = ADVICE_FILE

    def strategy(self, name: str) -> StrategyResult:
        """The strategy called ``name`` (KeyError naming the strategies otherwise)."""
        for item in self.strategies:
            if item.name == name:
                return item
        raise KeyError(f"no strategy {name!r}; the strategies are {[s.name for s in self.strategies]}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": ADVICE_FORMAT, **to_data(self)}

    @classmethod
    def load(cls, path: str | Path) -> Advice:
        """Read advice: ``path`` is its folder or its advice.json."""
        return load_result_file(
            path, ADVICE_FILE, "longembed advice file", (ADVICE_FORMAT, ADVICE_FORMAT_V1), _from_any_format
        )

    def save(self, path: str | Path) -> Path:
        """Write the advice as JSON to ``path`` (a file) atomically."""
        return write_json(Path(path), self.to_dict())


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A ``longembed-advice/1`` file's data in the current format's shape, keeping what it concluded.

    Format 1 had no margin: ``recommendation.tied`` were the strategies not significantly different from
    the best (Holm), read here as ``within`` at margin 0, with nothing undecided; its ``caution`` becomes
    ``more_queries``.  Strategies had no eval ``config`` or ``commands`` (they stay empty).
    """
    data = {**data, "format": ADVICE_FORMAT, "margin": 0.0}
    old = dict(data["recommendation"])
    data["recommendation"] = {
        "best": old["best"], "choice": old["choice"], "margin": 0.0, "within": list(old.get("tied", [])),
        "undecided": [], "cost_order": old["cost_order"], "reason": old["reason"],
        "more_queries": old.get("caution", ""),
    }
    data.setdefault("recommended", old["choice"])
    return data


def _from_any_format(data: dict[str, Any]) -> Advice:
    return Advice.from_dict(upgrade_v1(data) if data.get("format") == ADVICE_FORMAT_V1 else data)


def strategy_from_advice(path: str | Path, name: str | None = None) -> tuple[str, Strategy]:
    """(the name, the strategy) advice.json recommends, or the one called ``name``: its ``config``
    (:meth:`~longembed.retrieval.strategy.Strategy.to_dict`), or in a format-1 file without one what it
    records of the run.  Read as plain JSON and checked against the schema (:func:`check_advice_strategies`)
    before anything is built, so a hand-edited file fails in one line, not a traceback or a wrong index."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"--from-advice {path}: a folder; give its advice.json ({path / ADVICE_FILE})")
    try:
        advice = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserFileError(f"--from-advice {path}: cannot be read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"--from-advice {path}: not a JSON file ({exc})") from None
    try:
        records = check_advice_strategies(advice)
    except UserError as exc:
        raise UserError(f"--from-advice {path}: {exc}") from None
    recommendation = advice.get("recommendation") or {}
    wanted = name or advice.get("recommended") or recommendation.get("choice")
    if not wanted:
        raise UserError(f"--from-advice {path}: names no recommended strategy ('recommended')")
    if wanted not in records:
        raise UserError(f"--from-advice {path}: no strategy {wanted!r} (it has {', '.join(records)})")
    found = records[wanted]
    try:
        config = found.get("config")
        strategy = (Strategy.from_dict(config, default_model=advice.get("model")) if config is not None
                    else _from_record(found, advice.get("model"), wanted))
        check_encoder_options(strategy)
        check_named(strategy, wanted)
    except UserError as exc:
        raise UserError(f"--from-advice {path}: strategy {wanted!r}: {exc}") from None
    return wanted, strategy


#: advice.json's keys that --from-advice reads, and their JSON types (besides null).
ADVICE_KEYS: dict[str, tuple[type, ...]] = {"model": (str,), "recommended": (str,), "recommendation": (dict,),
                                            "strategies": (list,)}
#: A format-1 strategy's keys that describe its run (a file without ``config``), and their types.
RECORD_KEYS: dict[str, tuple[type, ...]] = {"name": (str,), "kind": (str,), "method": (str,), "max_length": (int,),
                                            "granularity": (dict,), "fusion": (dict,), "config": (dict,)}
RECORD_GRANULARITY_KEYS: dict[str, tuple[type, ...]] = {"level": (str,), "chunking": (str,), "late": (bool,)}


def check_advice_strategies(advice: Any) -> dict[str, dict[str, Any]]:
    """name -> strategy record of an advice file's data, every part --from-advice reads checked against the
    schema: the top-level ``model``, ``recommended`` and ``strategies`` typed, each strategy an object with a
    unique string ``name``, its ``config`` (:func:`~longembed.retrieval.strategy_schema.check_strategy_dict`:
    unknown keys named) or a format-1 record's ``granularity`` and ``fusion`` objects typed."""
    if not isinstance(advice, dict) or not isinstance(advice.get("strategies"), list):
        raise UserError("not an advice.json (no 'strategies' list)")
    for key, kinds in ADVICE_KEYS.items():
        check_type(key, advice.get(key), kinds)
    check_type("recommendation.choice", (advice.get("recommendation") or {}).get("choice"), (str,))
    records: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(advice["strategies"], start=1):
        if not isinstance(record, dict) or not isinstance(record.get("name"), str) or not record["name"]:
            raise UserError(f"strategies[{number}] must be an object with a 'name' string, got {record!r}")
        name = record["name"]
        if name in records:
            raise UserError(f"two strategies are called {name!r}")
        try:
            for key, kinds in RECORD_KEYS.items():
                check_type(key, record.get(key), kinds)
            if record.get("config") is not None:
                check_strategy_dict(record["config"])
            else:
                _check_record_objects(record)
        except UserError as exc:
            raise UserError(f"strategy {name!r}: {exc}") from None
        records[name] = record
    return records


def _check_record_objects(record: dict[str, Any]) -> None:
    for key, value in (record.get("granularity") or {}).items():
        if key not in RECORD_GRANULARITY_KEYS:
            raise UserError(f"granularity: unknown field {key!r} (its fields: {', '.join(RECORD_GRANULARITY_KEYS)})")
        check_type(f"granularity.{key}", value, RECORD_GRANULARITY_KEYS[key])
    fusion = record.get("fusion")
    if fusion is not None:
        check_fusion_fields(fusion)
        if not fusion.get("source") or not fusion.get("method"):
            raise UserError(f"fusion must name its 'source' (bm25) and its 'method' (rrf or linear), got {fusion!r}")


def check_named(strategy: Strategy, name: str) -> None:
    """A UserError when ``strategy`` is not what advise calls ``name`` (a config edited into another kind of
    strategy: BM25 under a dense name, a fusion under a name without +bm25, ...); the fusion's method, the
    chunking and the encoder's options may differ from what advise chose."""
    made = strategy.name.split(FUSION_SUFFIX)[0] + (FUSION_SUFFIX if strategy.fuse is not None else "")
    expected = name.replace(TRAINED_LATE_CHUNKS, LATE_CHUNKS, 1) if name.startswith(TRAINED_LATE_CHUNKS) else name
    expected = expected.removesuffix(TUNED_SUFFIX) if expected.endswith(FUSION_SUFFIX + TUNED_SUFFIX) else expected
    if made != expected:
        raise UserError(f"its config describes the strategy {made!r}, not {name!r} (kind {strategy.kind}); "
                        "fix the config, or give --strategy NAME of the one wanted")


def _from_record(record: dict[str, Any], model: str | None, name: str) -> Strategy:
    """A format-1 strategy (no ``config``) from what it records of its run."""
    if record.get("kind") == BM25 or name == BM25:
        return Strategy(BM25)
    granularity = record.get("granularity") or {}
    fusion = record.get("fusion") or {}
    if model is None:
        raise UserError("names no model")
    return Strategy(model=model, method=record.get("method"), max_length=record.get("max_length"),
                    granularity=granularity.get("level", "document"),
                    chunking=granularity.get("chunking") or DEFAULT_CHUNKING, late=bool(granularity.get("late", True)),
                    fuse=fusion.get("source"), fuse_method=fusion.get("method"), fuse_k=fusion.get("k"),
                    fuse_weight=fusion.get("weight"))
