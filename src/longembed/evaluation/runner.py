"""The LongEmbed benchmark runner: tasks x lengths -> typed results, resumable through the cache.

    >>> from longembed import load_encoder
    >>> from longembed.evaluation import evaluate_model
    >>> enc = load_encoder("default", method="pi", max_length=4096)
    >>> results = evaluate_model(enc, ["passkey", "qmsum"], data_dir="../shared/data", output_dir="runs/minilm-pi")
    >>> results.average, results.tasks["passkey"].by_length

What one run does, and where each step lives:

1. **Plan** (:mod:`.scoring`): load every requested task and length.  A task whose data is absent is
   skipped, not fatal: its message is kept under ``skipped`` and the average says what it covers.
2. **Estimate** (:mod:`.estimate`): count documents, queries, tokens and cache hits, time a warm-up,
   and print the estimate before the long part starts.
3. **Encode** (:mod:`.cache`): queries with the query prompt, documents with the document
   prompt (the model's "query" and "document"/"passage" prompts by default), each side with its own
   TempScale tau; unit vectors; chunks written to the cache as they finish.
4. **Score** (:mod:`.scoring`): cosine similarity, then nDCG@k, MRR@k, recall@k and accuracy@1.
5. **Record** (:class:`~longembed.results.files.RunFolder`): ``<output_dir>/results.json``, rewritten after
   every task (``complete`` only at the end), never replacing a finished results.json with an
   unfinished one.

``model`` may also be a model that scores without vectors (a :class:`~longembed.encoder_protocol.TextScorer`,
such as ``BM25Model``, LongEmbed Appendix D): no encoder, no cache.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from longembed.encoder_protocol import Encoder, TextScorer
from longembed.errors import UserError
from longembed.evaluation.cache.wrapper import CachedEncoder, chunk_keys, chunk_quantity, token_quantity
from longembed.evaluation.estimate import SideToEncode, estimate_cost
from longembed.evaluation.provenance import (
    encoder_device,
    library_versions,
    resolved_settings,
)
from longembed.evaluation.scoring import (
    Side,
    Unit,
    average,
    average_interval,
    check_token_unit,
    context_spans,
    hub_warnings,
    load_units,
    score_unit,
    task_result,
    task_summary,
)
from longembed.evaluation.spec import EvalSpec
from longembed.evaluation.task_options import SyntheticOptions
from longembed.results import RunConfig, RunResults
from longembed.results.files import RunFolder
from longembed.retrieval.pipeline import DenseScores
from longembed.retrieval.strategy import BM25, DOCUMENT, Strategy
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, Task, get_task
from longembed.tasks.subsample import SubsampledTask
from longembed.tasks.task_dir import TaskDirRecord, task_dir_tasks

DATA_DIR_ENV = "LONGEMBED_DATA_DIR"
#: what :func:`run_plan` hands a hybrid unit's scores to: (task, unit, dense scores, BM25 scores)
KeepScores = Callable[[Task, Unit, DenseScores, np.ndarray], None]


def default_data_dir() -> Path | None:
    """``$LONGEMBED_DATA_DIR`` if set (the CLI's default ``--data-dir``), else None."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


def resolve_tasks(
    tasks: Sequence[str | Task] | str | None, synthetic_options: SyntheticOptions | None = None
) -> list[Task]:
    """Task objects from names (or Task objects, kept as they are); None -> ``DEFAULT_TASKS``.
    Passkey and needle, given by name, are built with the ``synthetic_options`` they take
    (``queries_per_length``, ``haystack``, needle's ``needle_haystacks``:
    :class:`~longembed.evaluation.task_options.SyntheticOptions`)."""
    if tasks is None:
        tasks = list(DEFAULT_TASKS)
    if isinstance(tasks, str):
        tasks = [t for t in tasks.split(",") if t.strip()]
    out: list[Task] = []
    seen: set[str] = set()
    for task in tasks:
        if isinstance(task, str):
            name = task.strip()
            task = get_task(name, **(synthetic_options.task_kwargs(name) if synthetic_options else {}))
        name = task.metadata.name
        if name in seen:
            raise UserError(f"task {name!r} is listed twice")
        seen.add(name)
        out.append(task)
    if not out:
        raise UserError("no tasks to evaluate")
    return out


def spec_tasks(spec: EvalSpec, synthetic_options: SyntheticOptions | None = None) -> list[Task]:
    """The run's tasks: ``spec.tasks`` (default the six; passkey and needle built with
    ``synthetic_options``) and one per ``spec.task_dirs`` folder; task folders without ``spec.tasks``
    run alone."""
    folders = task_dir_tasks(spec.task_dirs or [], spec.task_names or [])
    if folders and spec.tasks is None:
        return resolve_tasks(folders)
    return resolve_tasks([*resolve_tasks(spec.tasks, synthetic_options), *folders])


def _record_task_dirs(tasks: list[Task], config: RunConfig, say: Callable[[str], None]) -> None:
    """Keep in the run what each loaded task folder gave (files, counts, queries left out), and say it: a
    :class:`~longembed.tasks.task_dir.TaskDirTask`, or any task holding a folder's ``record`` (``longembed advise``'s prepared tasks)."""
    for task in tasks:
        record = getattr(task, "record", None)
        if isinstance(record, TaskDirRecord):
            config.task_dirs[task.metadata.name] = record.to_dict()
            say(record.describe(task.metadata.name))


def resolve_lengths(lengths: Sequence[int] | None) -> list[int]:
    """The synthetic lengths to evaluate (sorted); None -> all eight. Unknown lengths are an error."""
    if lengths is None:
        return list(SYNTHETIC_LENGTHS)
    out = sorted({int(n) for n in lengths})
    bad = [n for n in out if n not in SYNTHETIC_LENGTHS]
    if bad:
        raise UserError(f"lengths {bad} are not LongEmbed lengths; choose from {list(SYNTHETIC_LENGTHS)}")
    if not out:
        raise UserError("no lengths to evaluate")
    return out


def evaluate_model(
    model: Encoder | CachedEncoder | TextScorer,
    tasks: EvalSpec | Sequence[str | Task] | str | None = None,
    data_dir: str | Path | None = None,
    lengths: Sequence[int] | None = None,
    output_dir: str | Path | None = None,
    **options: Any,
) -> RunResults:
    """Evaluate a model on LongEmbed tasks (or your own task folders); returns the typed results.

    Called as ``evaluate_model(encoder, spec)`` with an :class:`~longembed.evaluation.spec.EvalSpec`, or
    with its fields as keyword arguments (``evaluate_model(encoder, ["passkey"], lengths=[256],
    batch_size=8)``; given with a spec, they replace its fields).

    Args:
        model: any encoder: a ``LongContextEncoder``, a plain sentence-transformers ``SentenceTransformer``,
            any object with ``encode(texts, ...)`` (:class:`~longembed.encoder_protocol.Encoder`; with a
            ``metadata`` to name it), a :class:`CachedEncoder` around one, or a model that scores
            without vectors such as ``BM25Model`` (:class:`~longembed.encoder_protocol.TextScorer`).
            Vectors are cached when the model has a folder that identifies it.
        tasks: task names or Task objects (default ``DEFAULT_TASKS``), or an ``EvalSpec``; a task whose
            data is missing is skipped and listed under ``skipped``.
        data_dir: the data folder (None: tasks that need data are skipped; the CLI reads
            ``$LONGEMBED_DATA_DIR``).
        lengths: passkey/needle lengths (default all eight).
        output_dir: where ``results.json`` goes, rewritten after each task (None: nothing is written).
        **options: any other :class:`~longembed.evaluation.spec.EvalSpec` field, among them:

            - ``task_dirs``, ``task_names``: retrieval tasks read from your folders (BEIR layout);
            - ``query_prompt``, ``document_prompt``: literal prefixes (None: the model's "query" and
              "document"/"passage" prompts; "": none);
            - ``query_temperature``, ``document_temperature``: TempScale tau per side (None: the
              encoder's own);
            - ``cache_dir``, ``use_cache``, ``cache_includes_code``, ``chunk_size`` (texts per cache
              write): the embedding cache;
            - ``estimate``, ``dry_run``: time a warm-up to estimate seconds; stop after the estimate;
            - ``batch_size``, ``show_progress``, ``log`` (where progress lines go; None: silent);
            - ``strategy``: a :class:`~longembed.retrieval.strategy.Strategy` (granularity, chunking,
              late or naive, fusion with BM25, prompts); its fields may also be given as keywords
              (``granularity="chunks"``, ``fuse="bm25"``, ``query_prompt=""``).

    Returns:
        The :class:`~longembed.results.RunResults`: per task and length the main score with its 95%
        interval, the other metrics, per-query scores, counts, cache use and timings, and the run's
        config and provenance (the same object ``results.json`` holds).

    Raises:
        UserError: an unknown task, length or option, an option that does not fit the model
            (``granularity="chunks"`` for a model without ``encode_chunks`` or for BM25, a tau its
            ``encode`` cannot take), or unreadable task data.
    """
    started = time.perf_counter()
    spec = _spec_of(tasks, data_dir, lengths, output_dir, options)
    plan = plan_run(model, spec)
    if spec.dry_run:
        return plan.results
    return run_plan(plan, started)


def _spec_of(
    tasks: EvalSpec | Sequence[str | Task] | str | None,
    data_dir: str | Path | None,
    lengths: Sequence[int] | None,
    output_dir: str | Path | None,
    options: dict[str, Any],
) -> EvalSpec:
    """The run's spec: the one given (its fields replaced by any argument given too), or one built
    from the arguments."""
    named = {"data_dir": data_dir, "lengths": lengths, "output_dir": output_dir}
    strategy_fields = {f.name for f in dataclasses.fields(Strategy)}
    chosen = {k: options.pop(k) for k in list(options) if k in strategy_fields}
    base = tasks.strategy if isinstance(tasks, EvalSpec) else Strategy()
    if chosen:
        options["strategy"] = dataclasses.replace(options.get("strategy", base), **chosen)
    if not isinstance(tasks, EvalSpec):
        return EvalSpec(tasks=tasks, **named, **options)
    return dataclasses.replace(tasks, **{k: v for k, v in named.items() if v is not None}, **options)


@dataclass
class RunPlan:
    """Everything a run does, decided before the first vector: what scores, which units, the sides'
    prompts and taus, and the results (config, versions, estimate) that the loop fills in."""

    spec: EvalSpec
    scorer: CachedEncoder | TextScorer
    tasks: list[Task]
    lengths: list[int]
    strategy: Strategy
    sides: dict[str, Side]
    max_length: int | None
    units: list[Unit]
    results: RunResults
    say: Callable[[str], None]


def plan_run(model: Encoder | CachedEncoder | TextScorer, spec: EvalSpec) -> RunPlan:
    """Resolve tasks and lengths, describe the run (config, versions), load the units, estimate the cost."""
    say = spec.log or (lambda _message: None)
    strategy = spec.strategy
    synthetic = SyntheticOptions.from_spec(spec)
    task_objects, length_list = spec_tasks(spec, synthetic), resolve_lengths(spec.lengths)
    synthetic.check(task_objects)
    for note in synthetic.notes():
        say(note)
    task_objects, sampled = _sampled(task_objects, spec, say)
    data_path = Path(spec.data_dir).expanduser() if spec.data_dir is not None else None
    described = RunConfig(encoder={}, tasks=[t.metadata.name for t in task_objects], lengths=length_list,
                          data_dir=None if data_path is None else str(data_path),
                          task_options={**synthetic.record(), **sampled})
    versions = library_versions()
    if isinstance(model, TextScorer):
        name = model.metadata.name
        if strategy.granularity != DOCUMENT:
            raise UserError(f"{name} scores whole documents: granularity={strategy.granularity!r} needs an encoder")
        if strategy.fusion is not None:
            raise UserError(f"fuse='bm25' fuses an encoder's ranking with BM25's: the model is {name} already")
        scorer: CachedEncoder | TextScorer = model
        sides, max_length = {}, None
        described.encoder, versions["model"] = dict(model.metadata.config), dict(model.metadata.provenance)
        described.similarity = model.metadata.config.get("model", name)
        strategy = dataclasses.replace(strategy, model=BM25, method=None, max_length=None, encoder_options={})
    else:
        scorer = model if isinstance(model, CachedEncoder) else cached_encoder(model, spec)
        sides = _sides(scorer, spec)
        max_length = scorer.max_length
        _describe_encoder(described, scorer, sides, spec)
        strategy = _resolved(strategy, described.encoder)
        versions["model"] = scorer.identity or {"name": type(scorer.encoder).__name__, "files": None}
        versions["device"] = encoder_device(scorer)
    described.strategy = strategy.to_dict()
    results = RunResults(config=described, created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
                         versions=versions)
    units, results.skipped = load_units(task_objects, data_path, length_list, say)
    for unit in units:
        check_token_unit(unit, strategy)
    _record_task_dirs(task_objects, described, say)
    results.estimate = estimate_cost(
        [(u.label, *_sides_to_encode(u, sides, strategy)) for u in units],
        None if isinstance(scorer, TextScorer) else scorer, spec.batch_size, spec.estimate, say,
    )
    return RunPlan(spec, scorer, task_objects, length_list, strategy, sides, max_length, units, results, say)


def _resolved(strategy: Strategy, encoder: dict[str, Any]) -> Strategy:
    """The strategy as run: the encoder's model, method and Lt where the strategy leaves them open."""
    return dataclasses.replace(strategy, model=strategy.model or encoder.get("model"),
                               method=strategy.method or encoder.get("method"),
                               max_length=strategy.max_length or encoder.get("max_length"))


def _sampled(tasks: list[Task], spec: EvalSpec, say: Callable[[str], None]) -> tuple[list[Task], dict[str, int]]:
    """The tasks behind ``spec.max_queries``' seeded sample (:mod:`longembed.tasks.subsample`), and what
    ``RunConfig.task_options`` records of it (nothing without a sample, so a full run's config is unchanged)."""
    if spec.max_queries is None:
        return tasks, {}
    if spec.max_queries < 1:
        raise UserError(f"--max-queries must be at least 1, not {spec.max_queries}")
    say(f"sampling at most {spec.max_queries} queries per task and length (seed {spec.sample_seed}), in whole "
        "groups with the documents they rank")
    sampled: list[Task] = [SubsampledTask(task, spec.max_queries, spec.sample_seed) for task in tasks]
    return sampled, {"max_queries": spec.max_queries, "sample_seed": spec.sample_seed}


def cached_encoder(encoder: Encoder, spec: EvalSpec) -> CachedEncoder:
    """``encoder`` behind the embedding cache the spec chooses (the runner's, the sweep's and collapse's)."""
    return CachedEncoder(encoder, spec.cache_dir, use_cache=spec.use_cache, include_code=spec.cache_includes_code,
                         batch_size=spec.batch_size, chunk_size=spec.chunk_size, show_progress=spec.show_progress,
                         log=spec.log)


def _sides(cached: CachedEncoder, spec: EvalSpec) -> dict[str, Side]:
    """Queries and documents with their prompts (the spec's, else the model's) and taus."""
    prompts = cached.retrieval_prompts()
    query = prompts["query"] if spec.strategy.query_prompt is None else spec.strategy.query_prompt
    document = prompts["document"] if spec.strategy.document_prompt is None else spec.strategy.document_prompt
    return {
        "queries": Side("queries", query, cached.temperature(spec.query_temperature, "query temperature")),
        "documents": Side("documents", document,
                          cached.temperature(spec.document_temperature, "document temperature")),
    }


def _describe_encoder(
    config: RunConfig, cached: CachedEncoder, sides: dict[str, Side], spec: EvalSpec
) -> None:
    """Fill in what the run records of an encoder: its config, prompts, taus, cache namespaces."""
    namespaces = {s.name: cached.namespace(s.prompt, s.temperature) for s in sides.values()}
    config.encoder = cached.config.to_dict()
    config.resolved = resolved_settings(cached)
    config.prompts = {"query": sides["queries"].prompt, "document": sides["documents"].prompt}
    config.prompt_source = {
        "query": "argument" if spec.strategy.query_prompt is not None else "model",
        "document": "argument" if spec.strategy.document_prompt is not None else "model",
    }
    config.temperatures = {"query": sides["queries"].temperature, "document": sides["documents"].temperature}
    config.batch_size = cached.batch_size
    config.cache_dir = None if cached.cache is None else str(cached.cache.root)
    config.cache_namespaces = {name: ns.key for name, ns in namespaces.items() if ns is not None}


def run_plan(plan: RunPlan, started: float, keep: KeepScores | None = None) -> RunResults:
    """Score every unit, task by task, rewriting results.json after each task and at the end.  ``keep``:
    given each hybrid unit's (task, unit, dense scores, BM25 scores) (:func:`score_unit`'s ``keep``)."""
    results = plan.results
    folder = RunFolder(plan.spec.output_dir, RunResults) if plan.spec.output_dir is not None else None
    _record(results, folder, plan.lengths, started)
    for task in plan.tasks:
        name = task.metadata.name
        task_units = [u for u in plan.units if u.task == name]
        if not task_units:
            continue
        scored = [
            (unit, score_unit(unit, plan.scorer, plan.sides, plan.max_length, task.metadata.main_score,
                              plan.strategy, None if keep is None else functools.partial(keep, task)))
            for unit in task_units
        ]
        results.tasks[name] = task_result(task, scored)
        plan.say(task_summary(name, results.tasks[name]))
        for warning in hub_warnings(name, results.tasks[name]):
            plan.say(warning)
        _record(results, folder, plan.lengths, started)
    results.complete = True
    _record(results, folder, plan.lengths, started)
    if folder is not None and folder.backup is not None:
        plan.say(f"the previous finished results.json was kept as {folder.backup}")
    return results


def _record(results: RunResults, folder: RunFolder | None, lengths: list[int], started: float) -> None:
    """Update the average and the wall time; write results.json when the run has a folder."""
    results.average, results.average_tasks, results.average_note = average(results.tasks, lengths)
    results.average_interval = average_interval(results.tasks)
    results.wall_time_s = round(time.perf_counter() - started, 3)
    if folder is not None:
        folder.write(results)


def _sides_to_encode(
    unit: Unit, sides: dict[str, Side], strategy: Strategy
) -> tuple[SideToEncode, SideToEncode]:
    """A unit's documents and queries as the estimate sees them (chunk granularity: the texts that
    are chunked, under their chunk cache quantity)."""
    out = []
    data = unit.data
    for name, texts in (("documents", data.corpus), ("queries", data.queries)):
        side = sides.get(name)
        prompt, tau = (side.prompt, side.temperature) if side else ("", None)
        to_encode = SideToEncode(list(texts.values()), unit.shard(name), prompt, tau)
        if strategy.multivector:  # token states cost what late (one pass) or naive chunks cost
            document = name == "documents"
            late = strategy.late or not document
            to_encode.quantity = token_quantity(late, strategy.chunking, document)
            to_encode.chunking, to_encode.late = strategy.chunking, late
        elif name == "documents" and strategy.chunked and data.passages is None:
            to_encode.quantity = chunk_quantity(strategy.chunking, strategy.late)
            to_encode.chunking, to_encode.late = strategy.chunking, strategy.late
        elif name == "documents" and strategy.chunked and strategy.late:
            context_texts, spans = context_spans(data)
            to_encode = SideToEncode(
                context_texts, unit.shard("contexts"), prompt, tau, chunk_quantity(None, True),
                chunk_keys(context_texts, spans), late=True,
            )
        out.append(to_encode)
    return out[0], out[1]
