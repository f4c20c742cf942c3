"""``advise``: run every candidate strategy for one model on one's data and say which to use.

    >>> from longembed.advice import advise
    >>> advice = advise("path/to/all-MiniLM-L6-v2", max_length=4096, task_dirs=["my-contracts"],
    ...                 output_dir="advice/contracts", budget_seconds=1800)
    >>> advice.recommendation.choice, advice.recommendation.reason

What one advice does, and where each step lives:

1. **Plan**: the model's position scheme, pooling and window decide the strategies
   (:mod:`.strategies`); the data is read once (:mod:`.data`).
2. **Estimate** (:mod:`.estimate`): every strategy's run planned dry, seconds from a timed warm-up;
   printed before anything is encoded; over ``budget_seconds`` the data is sampled, and that is said.
3. **Run**: each strategy is an ordinary ``evaluate_model`` run into ``OUTPUT/runs/<strategy>/``,
   through the embedding cache (a rerun resumes; a hybrid reuses its dense strategy's vectors); a
   hybrid's tuned twin is fitted on the hybrid's stored scores and scored out-of-fold, encoding nothing
   (:mod:`longembed.evaluation.fusion_tuning`).
4. **Measure** (:mod:`.costs`): encode cost, vectors per document, index bytes, query latency.
5. **Conclude** (:mod:`.recommend`): each strategy against the best (``longembed.results.compare``),
   the cheapest one shown within the margin of it (non-inferiority, simultaneous bounds), each
   strategy's config and commands (:mod:`.commands`); written as advice.md, advice.png, advice.json,
   and the full comparison in ``OUTPUT/comparison/``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from longembed.advice.commands import DataFlags, command_dtypes, strategy_commands
from longembed.advice.costs import CostMeter, Measured, cost_sample, machine
from longembed.advice.data import AdviceData, Selection, load_data
from longembed.advice.estimate import (
    DenseEstimate,
    advice_estimate,
    estimate_error,
    fit_budget,
    query_seconds,
    side_seconds,
)
from longembed.advice.judged import JUDGED_WARNING_PERCENT, pool_summary, run_judged_at_10
from longembed.advice.recommend import choose_best, compare_with_best, more_queries_text, recommend
from longembed.advice.spec import AdviseSpec
from longembed.advice.strategies import Candidate, ContextualFacts, ModelFacts, plan_candidates
from longembed.advice.write import write_advice
from longembed.config import DTYPE_AUTO
from longembed.encoder import load_encoder
from longembed.errors import UserError
from longembed.evaluation.cache import CachedEncoder
from longembed.evaluation.encoders import EncoderFactory
from longembed.evaluation.estimate import CostModel, longest_sequence, measure_cost_model
from longembed.evaluation.fusion_tuning import StoredUnit, cross_validate, fusion_grid, query_table, tuned_run
from longembed.evaluation.passage_hits import run_passage_hit
from longembed.evaluation.runner import evaluate_model, plan_run, run_plan
from longembed.evaluation.scoring import Unit
from longembed.evaluation.spec import EvalSpec
from longembed.loading import CONTEXTUAL_RECORD_FILE, recorded_encoder
from longembed.precision import resolve_dtype
from longembed.report.comparison import write_comparison
from longembed.report.table import ScoreRow, score_table
from longembed.results import RunResults
from longembed.results.advice import (
    Advice,
    AdviceEstimate,
    Sampling,
    StrategyCost,
    StrategyResult,
)
from longembed.results.files import RunFolder
from longembed.retrieval.bm25 import BM25Model
from longembed.retrieval.model_files import hash_file
from longembed.retrieval.strategy import DENSE, TRUNCATE, Strategy

RUNS, COMPARISON = "runs", "comparison"


def advise(
    model: str | Path,
    spec: AdviseSpec | None = None,
    *,
    max_length: int | None = None,
    encoder_options: Mapping[str, Any] | None = None,
    device: str | None = None,
    **options: Any,
) -> Advice:
    """Measure the candidate strategies for ``model`` on the spec's data and recommend one.

    model, max_length, encoder_options, device: as for ``load_encoder`` (every strategy's encoder gets the
                 options; ``max_length`` is N, the document length asked about: the extension strategies
                 run at N, which must not be below the model's window Lo).
    spec:        an :class:`~longembed.advice.spec.AdviseSpec`; its fields may also be given as keyword
                 arguments (which replace the spec's): the data (``task_dirs``/``task_names``, ``haystack``,
                 ``tasks`` with ``data_dir``, ``lengths``, ``queries_per_length``), ``output_dir``,
                 ``methods`` (extension methods instead of the scheme's), ``chunking``, ``budget_seconds``,
                 ``seed``, the cost samples' sizes, prompts, cache, ``batch_size``, ``show_progress``, ``log``.

    Returns the :class:`~longembed.results.advice.Advice`, also written to ``output_dir`` (advice.json,
    advice.md, advice.png; each strategy's run in ``runs/<strategy>/``, the comparison in ``comparison/``).
    """
    began = time.perf_counter()
    spec = _with_options(spec, options)
    if spec.dry_run:
        raise UserError("advise with dry_run runs nothing and returns no advice: call estimate_advice(...) for the "
                         "estimate alone")
    plan = plan_advice(model, spec, max_length, dict(encoder_options or {}), device)
    selection, estimate, sampling = fit_budget(plan.data, plan.estimate, spec.budget_seconds, spec.seed, plan.say)
    runs = plan.run(selection, estimate)
    plan.say(estimate_error(estimate))
    costs, measurement = plan.measure(selection)
    advice = plan.conclude(runs, costs, estimate, sampling, measurement, selection)
    advice.wall_time_s = round(time.perf_counter() - began, 3)
    written = write_advice(advice, plan.out)
    for strategy in advice.strategies:
        if strategy.judged_at_10 is not None:
            low = strategy.judged_at_10 < JUDGED_WARNING_PERCENT
            plan.say(f"judged@10 {strategy.name}: {strategy.judged_at_10:.1f}%" + (
                " - mostly unjudged: its score is biased low (advice.md says how to judge its results)" if low else ""))
    plan.say(f"\nuse {advice.recommendation.choice}: {advice.recommendation.reason.replace('**', '')}")
    chosen = advice.strategy(advice.recommendation.choice)
    reproduce = "reproduce its score" if chosen.tuning is None else "rerun its fitted rule (in-sample score)"
    plan.say(f"{reproduce}: {chosen.commands['eval']}")
    plan.say("wrote " + ", ".join(str(p) for p in written.values()))
    return advice


def estimate_advice(
    model: str | Path,
    spec: AdviseSpec | None = None,
    *,
    max_length: int | None = None,
    encoder_options: Mapping[str, Any] | None = None,
    device: str | None = None,
    **options: Any,
) -> tuple[AdviceEstimate, Sampling | None]:
    """What :func:`advise` would run and how long it would take (``longembed advise --dry-run``).

    The same plan, estimate and budget sampling as ``advise`` (printed through the spec's ``log``), with
    nothing encoded but each encoder's timed warm-up and nothing written: a user sees the strategies, the
    seconds and what a budget would cut before committing to the run.  Arguments as for ``advise``.
    Returns the estimate of what would run (the sample's, when the budget samples) and the sampling, if any.
    """
    spec = _with_options(spec, options)
    plan = plan_advice(model, spec, max_length, dict(encoder_options or {}), device)
    _, estimate, sampling = fit_budget(plan.data, plan.estimate, spec.budget_seconds, spec.seed, plan.say)
    if plan.left_out:
        plan.say("left out: " + "; ".join(f"{name} ({why})" for name, why in plan.left_out.items()))
    plan.say("dry run: nothing encoded beyond the timed warm-ups, nothing written")
    return estimate, sampling


def _with_options(spec: AdviseSpec | None, options: dict[str, Any]) -> AdviseSpec:
    """The spec with ``options`` (field names) replacing its fields, or a spec of ``options`` alone."""
    return AdviseSpec(**options) if spec is None else dataclasses.replace(spec, **options)


def plan_advice(
    model: str | Path, spec: AdviseSpec, max_length: int | None, options: dict[str, Any], device: str | None
) -> AdvicePlan:
    """The model read (configuration and tokenizer only), its strategies, their encoders, the data."""
    if str(model) == "bm25":
        raise UserError("--model bm25: BM25 is always one of the strategies advise compares; give the embedding "
                         "model to advise about (a folder, a hub id, or 'default')")
    factory = EncoderFactory(model, TRUNCATE, None, device, options, load_encoder)
    say = spec.log or (lambda _message: None)
    plain = _cached(factory(lazy=True), spec)
    facts = ModelFacts(plain.position_scheme, plain.pooling, plain.original_length)
    contextual = _contextual(spec, facts, device, options)
    if contextual is not None:
        check_trained_from(contextual[0].folder, plain.encoder.source.transformer_path, str(model))
    base = Strategy(model=str(model), encoder_options=options, chunking=spec.chunking, query_prompt=spec.query_prompt,
                    document_prompt=spec.document_prompt)
    planned, left_out = plan_candidates(facts, max_length, list(spec.methods) if spec.methods else None, base,
                                        contextual[0] if contextual else None)
    by_setting = {(str(model), TRUNCATE, None): plain}
    if contextual is not None:
        by_setting[(contextual[0].folder, contextual[0].method, contextual[0].max_length)] = contextual[1]
    candidates, encoders = [], {}
    for candidate in planned:
        strategy = candidate.strategy
        if not strategy.lexical_only:
            setting = (strategy.model, strategy.method, strategy.max_length)
            if setting not in by_setting:
                by_setting[setting] = _cached(factory(method=strategy.method, max_length=strategy.max_length, lazy=True),
                                              spec)
            encoder = encoders[candidate.name] = by_setting[setting]
            # the strategy as it runs: the encoder's method and Lt (truncate's Lt is the model's Lo)
            candidate = candidate._replace(strategy=dataclasses.replace(
                strategy, method=encoder.encoder.method, max_length=encoder.encoder.max_length))
        candidates.append(candidate)
    data = load_data(spec, max_length or facts.original_length, say)
    return AdvicePlan(spec, str(model), facts, max_length, candidates, left_out, encoders, plain, data,
                      Path(spec.output_dir), say, options)  # type: ignore[arg-type]


def _contextual(
    spec: AdviseSpec, facts: ModelFacts, device: str | None, options: dict[str, Any]
) -> tuple[ContextualFacts, CachedEncoder] | None:
    """The ``--contextual`` folder's facts and encoder (the method and Lt it was trained under), or None."""
    if spec.contextual is None:
        return None
    folder = str(spec.contextual)
    recorded = recorded_encoder(folder)
    if recorded is None:
        raise UserError(f"--contextual {folder}: not a folder written by 'longembed train contextual' (it has no "
                         f"{CONTEXTUAL_RECORD_FILE})")
    if facts.pooling != "mean":
        raise UserError("--contextual measures late chunks, which mean-pool token states; the advised model pools "
                         f"with {facts.pooling!r}")
    encoder = load_encoder(folder, device=device, lazy=True, **options)
    return ContextualFacts(folder, encoder.method, encoder.max_length), _cached(encoder, spec)


def check_trained_from(folder: str | Path, advised: str | Path, model: str) -> None:
    """A UserError unless the ``longembed train contextual`` folder was fine-tuned from the advised model
    (its record's model files, size and sha256, are those of ``advised``, the advised model's transformer
    folder): another model's trained late chunks would stand among this model's strategies unremarked."""
    record_file = Path(folder) / CONTEXTUAL_RECORD_FILE
    try:
        base = json.loads(record_file.read_text(encoding="utf-8"))["model"]
        files = dict(base["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{record_file}: not a valid contextual-training record (no model files: {exc})") from None
    differ = [name for name, recorded in files.items() if not _same_file(Path(advised) / name, recorded)]
    if differ or not files:
        raise UserError(f"--contextual {folder} was fine-tuned from {base.get('name')!r}, not from the advised model "
                        f"{model!r} (its {', '.join(differ) or 'model files'} differ): its late chunks are not a "
                        f"strategy of this model; give --model {base.get('name')}, or a folder trained from {model}")


def _same_file(path: Path, recorded: Any) -> bool:
    if not path.is_file() or not isinstance(recorded, dict):
        return False
    described = hash_file(path)
    return (described["size"], described["sha256"]) == (recorded.get("size"), recorded.get("sha256"))


def _cached(encoder: Any, spec: AdviseSpec) -> CachedEncoder:
    return CachedEncoder(encoder, spec.cache_dir, use_cache=spec.use_cache, batch_size=spec.batch_size,
                         show_progress=spec.show_progress, log=spec.log)


class TunedRun(NamedTuple):
    """A tuned fusion's name and its out-of-fold run."""

    name: str
    results: RunResults


@dataclass
class AdvicePlan:
    """Everything an advice does, decided before the first vector: its strategies, their encoders
    (behind the embedding cache, by strategy name; strategies of one encoder share it) and the data."""

    spec: AdviseSpec
    model: str
    facts: ModelFacts
    max_length: int | None
    candidates: list[Candidate]
    left_out: dict[str, str]
    encoders: dict[str, CachedEncoder]
    plain: CachedEncoder  # the model as it is (truncate): prompts, token counts
    data: AdviceData
    out: Path
    say: Callable[[str], None]
    encoder_options: dict[str, Any] = field(default_factory=dict)
    #: tuned candidate -> how its rule was chosen (:meth:`TunedFusion.record`), filled in by :meth:`tune`
    tunings: dict[str, dict[str, Any]] = field(default_factory=dict)
    _document_tokens: dict[str, list[int]] = field(default_factory=dict)
    _cost_models: dict[str, CostModel] = field(default_factory=dict)

    def eval_spec(self, selection: Selection, candidate: Candidate | None = None, **extra: Any) -> EvalSpec:
        """The ``evaluate_model`` options of a strategy's run on ``selection``."""
        s = self.spec
        synthetic = {"queries_per_length": selection.queries_per_length, "haystack": s.haystack} if self.data.synthetic else {}
        options = {
            "tasks": selection.tasks, "data_dir": s.data_dir, "lengths": self.data.lengths,
            "strategy": Strategy(query_prompt=s.query_prompt, document_prompt=s.document_prompt),
            "cache_dir": s.cache_dir, "use_cache": s.use_cache, "batch_size": s.batch_size, "show_progress": s.show_progress, "log": s.log, "estimate": False, **synthetic,
        }
        if candidate is not None:
            options["strategy"] = candidate.strategy
        return EvalSpec(**{**options, **extra})

    def prompts(self, encoder: CachedEncoder) -> dict[str, str]:
        """The query and document prompts the runs give (the spec's, else the model's)."""
        model = encoder.retrieval_prompts()
        return {"query": model["query"] if self.spec.query_prompt is None else self.spec.query_prompt,
                "document": model["document"] if self.spec.document_prompt is None else self.spec.document_prompt}

    def cost_model(self, encoder: CachedEncoder) -> CostModel:
        """The encoder's cost model, from a timed warm-up on this machine (fastest of two) at the longest
        sequence any strategy will run through it (measured once)."""
        key = str(id(encoder))
        if key not in self._cost_models:
            self._cost_models[key] = measure_cost_model(encoder.encoder, self.spec.batch_size, self.longest(encoder))
        return self._cost_models[key]

    def longest(self, cached: CachedEncoder) -> int:
        """The longest sequence the strategies of an encoder run (its Lt before the documents were
        counted): a whole document cut at Lt, a naive chunk, a late-chunking window."""
        encoder = cached.encoder
        tokens = [n for counts in self._document_tokens.values() for n in counts]
        if not tokens:
            return encoder.max_length
        return max(longest_sequence(tokens, encoder, s.chunking if s.chunked else None, s.late)
                   for s in (c.strategy for c in self.candidates
                             if self.encoders.get(c.name) is cached and c.strategy.kind == DENSE))

    def document_tokens(self, selection: Selection) -> dict[str, list[int]]:
        """Every unit's documents' tokens (the model's tokenizer, the document prompt), counted once."""
        encoder = self.plain
        prompt = self.prompts(encoder)["document"]
        for unit in self.units(selection):
            texts = list(unit.data.corpus.values())
            if len(self._document_tokens.get(unit.label, ())) != len(texts):
                self._document_tokens[unit.label] = encoder.count_tokens(texts, prompt)
        return self._document_tokens

    def units(self, selection: Selection) -> list[Unit]:
        """The selection's retrieval problems, as every run loads them."""
        return plan_run(BM25Model(), self.eval_spec(selection, log=None, dry_run=True)).units

    def estimate(self, selection: Selection) -> AdviceEstimate:
        """Every strategy's run planned dry on ``selection``: texts and tokens to encode, estimated seconds."""
        planned = {}
        for candidate in (c for c in self.candidates if c.strategy.kind == DENSE):
            encoder = self.encoders[candidate.name]
            dry = evaluate_model(encoder, self.eval_spec(selection, candidate, dry_run=True, log=None))
            assert dry.estimate is not None
            planned[candidate.name] = DenseEstimate(candidate, encoder, dry.estimate)
        tokens = self.document_tokens(selection)
        return advice_estimate(self.candidates, planned, self.cost_model, self.measurement_seconds(selection),
                               self.spec.budget_seconds, tokens)

    def measurement_seconds(self, selection: Selection) -> float:
        """Estimated seconds of the cost measurements' uncached encodes (timing sample, latency queries)."""
        sample = cost_sample(self.units(selection), self.spec.sample_documents, self.spec.latency_queries, self.spec.seed)
        seconds = 0.0
        for candidate in (c for c in self.candidates if c.strategy.kind == DENSE):
            encoder = self.encoders[candidate.name]
            prompts, model = self.prompts(encoder), self.cost_model(encoder)
            tokens = encoder.count_tokens(sample.documents, prompts["document"])
            queries = encoder.count_tokens(sample.queries, prompts["query"])
            seconds += side_seconds(len(tokens), sum(tokens), candidate.strategy, encoder.encoder, model)
            seconds += query_seconds(len(queries), sum(queries), model)
        return seconds

    def run(self, selection: Selection, estimate: AdviceEstimate | None = None) -> dict[str, RunResults]:
        """Each strategy's ``evaluate_model`` run into ``OUTPUT/runs/<strategy>/``; its wall time is
        written next to its estimate (``actual_seconds``), the estimate's error.  A tuned fusion is fitted
        right after its hybrid ran, and the hybrid's stored scores are then let go (one hybrid's at a time)."""
        runs: dict[str, RunResults] = {}
        rows = {} if estimate is None else {row.name: row for row in estimate.strategies}
        twins = {c.tuned_from: i for i, c in enumerate(self.candidates) if c.tuned_from is not None}
        for i, candidate in enumerate(self.candidates):
            if candidate.name in runs:  # a tuned fusion, fitted already
                continue
            self._announce(i)
            began = time.perf_counter()
            stored: list[StoredUnit] = []
            runs[candidate.name] = self.evaluate(candidate, selection, stored)
            if candidate.name in rows:
                rows[candidate.name].actual_seconds = round(time.perf_counter() - began, 1)
            if not runs[candidate.name].tasks:
                raise UserError(f"strategy {candidate.name}: no task could run ({runs[candidate.name].skipped})")
            if candidate.name in twins:
                self._announce(twins[candidate.name])
                began = time.perf_counter()
                twin = self.tune(twins[candidate.name], stored, runs[candidate.name])
                runs[twin.name] = twin.results
                if twin.name in rows:
                    rows[twin.name].actual_seconds = round(time.perf_counter() - began, 1)
        return runs

    def _announce(self, position: int) -> None:
        candidate = self.candidates[position]
        self.say(f"\n[{position + 1}/{len(self.candidates)}] {candidate.name}: {candidate.description}")

    def evaluate(self, candidate: Candidate, selection: Selection, stored: list[StoredUnit]) -> RunResults:
        """One strategy's ``evaluate_model`` run; a hybrid's (task, unit, dense, BM25) scores are kept in
        ``stored`` for its tuned twin."""
        model = BM25Model() if candidate.strategy.lexical_only else self.encoders[candidate.name]
        plan = plan_run(model, self.eval_spec(selection, candidate, output_dir=self.out / RUNS / candidate.name))
        return run_plan(plan, time.perf_counter(), keep=lambda *scores: stored.append(StoredUnit(*scores)))

    def tune(self, position: int, stored: list[StoredUnit], hybrid: RunResults) -> TunedRun:
        """The tuned twin of a hybrid (``self.candidates[position]``): the rule cross-validated on the hybrid's
        stored scores (:mod:`longembed.evaluation.fusion_tuning`), its run out-of-fold, written to its folder;
        the candidate's strategy becomes the rule fitted on every query."""
        candidate = self.candidates[position]
        grid = fusion_grid()
        table = query_table(stored, grid)
        tuned = cross_validate(table, grid, seed=self.spec.seed)
        strategy = candidate.strategy.fused_by(tuned.fusion)
        self.candidates[position] = candidate._replace(strategy=strategy)
        self.tunings[candidate.name] = tuned.record()
        results = tuned_run(stored, hybrid, tuned, table, strategy.to_dict())
        RunFolder(self.out / RUNS / candidate.name, RunResults).write(results)
        self.say(f"fitted on all {len(table.keys)} queries: {tuned.fusion.describe()} (in-sample {tuned.in_sample:.2f}); "
                 f"out-of-fold ({len(tuned.fold_fusions)} folds): {results.average:.2f}")
        return TunedRun(candidate.name, results)

    def measure(self, selection: Selection) -> tuple[dict[str, StrategyCost], dict[str, Any]]:
        """Every strategy's costs on this machine, and how they were measured."""
        s = self.spec
        sample = cost_sample(self.units(selection), s.sample_documents, s.latency_queries, s.seed)
        tokens = sum(self.plain.count_tokens(sample.documents, ""))
        meter = CostMeter(sample, s.batch_size, tokens)
        self.say(f"\nmeasuring costs: {len(sample.documents)} documents ({tokens:,} tokens) encoded uncached and "
                 f"{len(sample.queries)} queries timed per strategy (this machine; noisy)")
        measured: dict[str, Measured] = {}
        for candidate in self.candidates:
            strategy = candidate.strategy
            if strategy.lexical_only:
                measured[candidate.name] = meter.bm25()
            elif strategy.kind == DENSE:
                encoder = self.encoders[candidate.name]
                measured[candidate.name] = meter.dense(strategy, encoder, self.prompts(encoder))
            else:
                dense = next(c.name for c in self.candidates if c.strategy == strategy.dense)
                encoder = self.encoders[candidate.name]
                measured[candidate.name] = meter.hybrid(strategy, measured[dense], encoder, self.prompts(encoder))
        how = {"machine": {**machine(), "device": str(self.plain.device)},
               "sample_documents": len(sample.documents), "sample_tokens": tokens,
               "latency_queries": len(sample.queries), "index_documents": sample.index_documents, "seed": s.seed}
        return {name: meter.cost(m) for name, m in measured.items()}, how

    def conclude(
        self, runs: dict[str, RunResults], costs: dict[str, StrategyCost], estimate: AdviceEstimate,
        sampling: Sampling | None, measurement: dict[str, Any], selection: Selection | None = None,
    ) -> Advice:
        """Each strategy against the best, the recommendation, the full comparison written."""
        averages = score_table(runs).averages()  # strategy -> its run's average over the tasks, with its interval
        scores = {name: row.score for name, row in averages.items()}
        best = choose_best(scores, costs)
        versus, comparison = compare_with_best(runs, best, self.spec.margin, seed=self.spec.seed)
        write_comparison(comparison, self.out / COMPARISON)
        data = self.data_flags(selection or self.data.selection())
        auto = resolve_dtype(DTYPE_AUTO, self.plain.device, self.encoder_options.get("quantization"))
        strategies = [self._result(c, runs[c.name], averages[c.name], costs[c.name], data) for c in self.candidates]
        for strategy in strategies:
            strategy.versus_best = versus.get(strategy.name)
        judged = any(pool_summary(folder) is not None for folder in self.spec.task_dirs or [])
        more = more_queries_text(bool(self.spec.task_dirs), bool(self.data.synthetic), sampling is not None,
                                 self.spec.queries_per_length, judged)
        recommendation = recommend(strategies, self.spec.margin, more)
        return Advice(
            model=self.model, position_scheme=self.facts.position_scheme, pooling=self.facts.pooling,
            original_length=self.facts.original_length, max_length=self.max_length, tasks=self.data.names,
            strategies=strategies, recommendation=recommendation, estimate=estimate, wall_time_s=0.0,
            left_out=self.left_out, sampling=sampling, measurement=measurement, comparison=COMPARISON,
            recommended=recommendation.choice, margin=self.spec.margin,
            created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"), dtype_auto=auto.reason,
        )

    def data_flags(self, selection: Selection) -> DataFlags:
        """The eval data flags that give the runs' data (a budget-sampled real task excepted: its eval
        scores the whole task, and advice.md says so)."""
        s = self.spec
        benchmark = [t for t in (s.tasks or []) if t in self.data.synthetic or t in
                     {p.metadata.name for p in self.data.real if p.record is None}]
        synthetic = bool(self.data.synthetic)
        return DataFlags(
            task_dirs=[str(d) for d in s.task_dirs or []], task_names=list(s.task_names or []), tasks=benchmark,
            data_dir=None if s.data_dir is None or not benchmark else str(s.data_dir),
            lengths=list(self.data.lengths or []) if synthetic else [],
            queries_per_length=selection.queries_per_length if synthetic else None,
            haystack=None if s.haystack is None else str(s.haystack),
            cache_dir=None if s.cache_dir is None else str(s.cache_dir), use_cache=s.use_cache,
        )

    def _result(
        self, candidate: Candidate, run: RunResults, average: ScoreRow, cost: StrategyCost, data: DataFlags,
    ) -> StrategyResult:
        strategy = candidate.strategy
        config = strategy.to_dict()
        return StrategyResult(
            name=candidate.name, description=candidate.description, kind=strategy.kind,
            run=f"{RUNS}/{candidate.name}", score=average.score, interval=run.average_interval, cost=cost,
            method=strategy.method, max_length=strategy.max_length,
            granularity={"level": strategy.granularity, **({"chunking": strategy.chunking, "late": strategy.late}
                                                           if strategy.chunked else {})},
            fusion=None if strategy.fusion is None else strategy.fusion.to_dict(),
            hubs={task if length is None else f"{task}/{length}": stats.describe()
                  for (task, length), stats in run.hubs().items()},
            passage_hit=run_passage_hit(run), judged_at_10=run_judged_at_10(run),
            config=config, commands=strategy_commands(candidate.name, config, data, self.out, self._run_flags()),
            dtypes=command_dtypes(config),
            tuning=self.tunings.get(candidate.name),
        )

    def _run_flags(self) -> list[str]:
        """How the advice's runs ran, beyond the strategy (a batch size other than eval's default)."""
        return [] if self.spec.batch_size == 16 else ["--batch-size", str(self.spec.batch_size)]
