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
3. **Encode** (:mod:`.cached_encoder`): queries with the query prompt, documents with the document
   prompt (the model's "query" and "document"/"passage" prompts by default), each side with its own
   TempScale tau; unit vectors; chunks written to the cache as they finish.
4. **Score** (:mod:`.scoring`): cosine similarity, then nDCG@k, MRR@k, recall@k and accuracy@1.
5. **Record** (:class:`~longembed.results.RunFolder`): ``<output_dir>/results.json``, rewritten after
   every task (``complete`` only at the end), never replacing a finished results.json with an
   unfinished one.

``model`` may also be a :class:`BM25Model` (LongEmbed Appendix D): no encoder, no cache.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from longembed.evaluation.bm25 import BM25Model
from longembed.evaluation.cached_encoder import CachedEncoder, chunk_keys, chunk_quantity
from longembed.evaluation.estimate import SideToEncode, estimate_cost
from longembed.evaluation.provenance import (
    encoder_device,
    library_versions,
    package_version,
    resolved_settings,
)
from longembed.evaluation.scoring import (
    Granularity,
    Side,
    Unit,
    average,
    context_spans,
    load_units,
    score_unit,
    task_result,
    task_summary,
)
from longembed.results import RunConfig, RunFolder, RunResults, UnitResult
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, Task, get_task

DATA_DIR_ENV = "LONGEMBED_DATA_DIR"


def default_data_dir() -> Path | None:
    """``$LONGEMBED_DATA_DIR`` if set (the CLI's default ``--data-dir``), else None."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None


def default_prompts(encoder: Any) -> dict[str, str]:
    """The model's prompts named "query" and "document" (or "passage"); "" where it has none."""
    prompts = getattr(encoder, "prompts", None) or {}
    document = prompts.get("document", prompts.get("passage", ""))
    return {"query": prompts.get("query", ""), "document": document}


def resolve_tasks(tasks: Sequence[str | Task] | str | None) -> list[Task]:
    """Task objects from names (or Task objects, kept as they are); None -> ``DEFAULT_TASKS``."""
    if tasks is None:
        tasks = list(DEFAULT_TASKS)
    if isinstance(tasks, str):
        tasks = [t for t in tasks.split(",") if t.strip()]
    out: list[Task] = []
    seen: set[str] = set()
    for task in tasks:
        obj = get_task(task.strip()) if isinstance(task, str) else task
        name = obj.metadata.name
        if name in seen:
            raise ValueError(f"task {name!r} is listed twice")
        seen.add(name)
        out.append(obj)
    if not out:
        raise ValueError("no tasks to evaluate")
    return out


def resolve_lengths(lengths: Sequence[int] | None) -> list[int]:
    """The synthetic lengths to evaluate (sorted); None -> all eight. Unknown lengths are an error."""
    if lengths is None:
        return list(SYNTHETIC_LENGTHS)
    out = sorted({int(n) for n in lengths})
    bad = [n for n in out if n not in SYNTHETIC_LENGTHS]
    if bad:
        raise ValueError(f"lengths {bad} are not LongEmbed lengths; choose from {list(SYNTHETIC_LENGTHS)}")
    if not out:
        raise ValueError("no lengths to evaluate")
    return out


def _bm25_config(model: BM25Model) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run's encoder config, the model's provenance) for BM25."""
    config = {
        "model": "bm25",
        "k1": model.k1,
        "b": model.b,
        "variant": model.method,
        "stopwords": model.stopwords,
        "stemmer": model.stemmer_name,
    }
    provenance = {"name": "bm25", "bm25s": package_version("bm25s"), "PyStemmer": package_version("PyStemmer")}
    return config, provenance


def evaluate_model(
    model: Any,
    tasks: Sequence[str | Task] | str | None = None,
    data_dir: str | Path | None = None,
    lengths: Sequence[int] | None = None,
    output_dir: str | Path | None = None,
    *,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
    query_temperature: float | None = None,
    document_temperature: float | None = None,
    batch_size: int = 16,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    chunk_size: int = 64,
    cache_includes_code: bool = True,
    estimate: bool = True,
    dry_run: bool = False,
    show_progress: bool = True,
    log: Callable[[str], None] | None = print,
    granularity: str = "document",
    chunking: str = "tokens:256",
    late: bool = True,
) -> RunResults:
    """Evaluate an encoder (or :class:`BM25Model`) on LongEmbed tasks; returns the typed results.

    model:       a ``LongContextEncoder`` (or any object with the same ``encode``; ``config``, ``source``,
                 ``tokenizer`` and ``prompts`` are used when present), a :class:`CachedEncoder` around
                 one, or a ``BM25Model``.
    tasks:       task names or Task objects (default ``DEFAULT_TASKS``); a task whose data is missing
                 is skipped and listed under ``skipped``.
    data_dir:    the data folder (None: tasks that need data are skipped; the CLI reads
                 ``$LONGEMBED_DATA_DIR``).
    lengths:     passkey/needle lengths (default all eight).
    output_dir:  where ``results.json`` goes (None: nothing is written).
    query_prompt, document_prompt: literal prefixes; None takes the model's "query" and
                 "document"/"passage" prompts, "" means no prompt.
    query_temperature, document_temperature: TempScale tau per side (None: the encoder's own);
                 a tau other than the encoder's is passed as ``encode(..., temperature=tau)``.
    cache_dir:   embedding cache root (None: ``$LONGEMBED_CACHE_DIR`` or ``~/.cache/longembed/embeddings``);
                 ``use_cache=False`` disables it. The cache needs a model folder to identify the model;
                 an encoder without one runs uncached.
    chunk_size:  texts per cache write (at most; long texts make smaller chunks).
    cache_includes_code: key the cache on the hash of longembed's vector code (default), so that any
                 edit of the encoder invalidates it; False keys on the version only.
    estimate:    time a warm-up to estimate seconds (counts and cache hits are always reported).
    dry_run:     stop after the estimate (nothing encoded, nothing written).
    log:         where progress lines go (None: silent).
    granularity: "document" (one vector per document) or "chunks" (a document scores its best chunk;
                 :class:`~longembed.evaluation.scoring.Granularity`), with ``chunking`` ("tokens:256",
                 "tokens:256:32", "sentences:4") and ``late`` (late chunking; False: naive chunking).
    """
    say = log or (lambda _message: None)
    started = time.perf_counter()
    if batch_size < 1 or chunk_size < 1:
        raise ValueError("batch_size and chunk_size must be positive")
    level = Granularity(granularity, chunking, late)
    task_objects = resolve_tasks(tasks)
    length_list = resolve_lengths(lengths)
    data_path = Path(data_dir).expanduser() if data_dir is not None else None
    versions = library_versions()

    if isinstance(model, BM25Model):
        if level.chunked:
            raise ValueError("BM25 scores whole documents: granularity='chunks' needs an encoder")
        scorer: CachedEncoder | BM25Model = model
        encoder_config, versions["model"] = _bm25_config(model)
        sides: dict[str, Side] = {}
        max_length = None
        config = RunConfig(encoder=encoder_config, tasks=[t.metadata.name for t in task_objects],
                           lengths=length_list, data_dir=None if data_path is None else str(data_path),
                           similarity="bm25")
    else:
        if isinstance(model, CachedEncoder):
            cached = model
        else:
            cached = CachedEncoder(model, cache_dir, use_cache=use_cache, include_code=cache_includes_code,
                                   batch_size=batch_size, chunk_size=chunk_size, show_progress=show_progress,
                                   log=log)
        scorer, encoder = cached, cached.encoder
        encoder_settings = getattr(encoder, "config", None)
        versions["model"] = cached.identity or {"name": type(encoder).__name__, "files": None}
        versions["device"] = encoder_device(encoder)
        max_length = getattr(encoder, "max_length", None)
        prompts = default_prompts(encoder)
        sides = {
            "queries": Side("queries", prompts["query"] if query_prompt is None else query_prompt,
                            cached.temperature(query_temperature, "query temperature")),
            "documents": Side("documents", prompts["document"] if document_prompt is None else document_prompt,
                              cached.temperature(document_temperature, "document temperature")),
        }
        namespaces = {s.name: cached.namespace(s.prompt, s.temperature) for s in sides.values()}
        config = RunConfig(
            encoder=encoder_settings.to_dict() if hasattr(encoder_settings, "to_dict")
            else {"model": type(encoder).__name__},
            resolved=resolved_settings(encoder),
            tasks=[t.metadata.name for t in task_objects],
            lengths=length_list,
            data_dir=None if data_path is None else str(data_path),
            prompts={"query": sides["queries"].prompt, "document": sides["documents"].prompt},
            prompt_source={
                "query": "argument" if query_prompt is not None else "model",
                "document": "argument" if document_prompt is not None else "model",
            },
            temperatures={"query": sides["queries"].temperature, "document": sides["documents"].temperature},
            batch_size=cached.batch_size,
            similarity="cosine",
            cache_dir=None if cached.cache is None else str(cached.cache.root),
            cache_namespaces={name: ns.key for name, ns in namespaces.items() if ns is not None},
            granularity=level.to_dict(),
        )

    results = RunResults(config=config, created=_dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
                         versions=versions)
    units, results.skipped = load_units(task_objects, data_path, length_list, say)
    results.estimate = estimate_cost(
        [(u.label, *_sides_to_encode(u, sides, level)) for u in units],
        None if isinstance(scorer, BM25Model) else scorer,
        batch_size,
        estimate,
        say,
    )
    if dry_run:
        return results
    folder = RunFolder(output_dir, RunResults) if output_dir is not None else None
    if folder is not None:
        folder.write(results)

    by_task: dict[str, list[tuple[Unit, UnitResult]]] = {}
    for task in task_objects:
        name = task.metadata.name
        task_units = [u for u in units if u.task == name]
        if not task_units:
            continue
        for unit in task_units:
            by_task.setdefault(name, []).append(
                (unit, score_unit(unit, scorer, sides, max_length, task.metadata.main_score, level))
            )
        results.tasks[name] = task_result(task, by_task[name])
        say(task_summary(name, results.tasks[name]))
        results.average, results.average_tasks, results.average_note = average(results.tasks, length_list)
        results.wall_time_s = round(time.perf_counter() - started, 3)
        if folder is not None:
            folder.write(results)

    results.average, results.average_tasks, results.average_note = average(results.tasks, length_list)
    results.complete = True
    results.wall_time_s = round(time.perf_counter() - started, 3)
    if folder is not None:
        folder.write(results)
        if folder.backup is not None:
            say(f"the previous finished results.json (another configuration) was kept as {folder.backup}")
    return results


def _sides_to_encode(
    unit: Unit, sides: dict[str, Side], level: Granularity
) -> tuple[SideToEncode, SideToEncode]:
    """A unit's documents and queries as the estimate sees them (chunk granularity: the texts that
    are chunked, under their chunk cache quantity)."""
    out = []
    data = unit.data
    for name, texts in (("documents", data.corpus), ("queries", data.queries)):
        side = sides.get(name)
        prompt, tau = (side.prompt, side.temperature) if side else ("", None)
        to_encode = SideToEncode(list(texts.values()), unit.shard(name), prompt, tau)
        if name == "documents" and level.chunked and data.passages is None:
            to_encode.quantity = chunk_quantity(level.chunking, level.late)
        elif name == "documents" and level.chunked and level.late:
            context_texts, spans = context_spans(data)
            to_encode = SideToEncode(
                context_texts, unit.shard("contexts"), prompt, tau, chunk_quantity(None, True),
                chunk_keys(context_texts, spans),
            )
        out.append(to_encode)
    return out[0], out[1]
