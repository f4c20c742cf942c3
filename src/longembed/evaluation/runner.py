"""The LongEmbed evaluation runner: tasks x lengths -> scores, with a resumable embedding cache.

    >>> from longembed import load_encoder
    >>> from longembed.evaluation.runner import evaluate_model
    >>> enc = load_encoder("default", method="pi", max_length=4096)
    >>> results = evaluate_model(enc, ["passkey", "qmsum"], data_dir="../shared/data", output_dir="runs/minilm-pi")
    >>> results["average"], results["tasks"]["passkey"]["by_length"]

What one run does, and why:

1. **Plan.** Load every requested task (and, for passkey/needle, every requested length). A task whose
   data is absent is *skipped*, not fatal: its :class:`TaskDataMissing` message is printed and kept in
   ``results.json`` under ``"skipped"``, and the average says which tasks it covers.
2. **Estimate.** Count documents, queries and tokens per task/length, and how many are already cached;
   time a tiny warm-up (a batch of short inputs and one long input) to fit t(n) = a n + b n^2 seconds per
   sequence, and print the estimate before the long part starts (see :func:`estimate_cost`).
3. **Encode.** Queries with the query prompt, documents with the document prompt (by default the model's
   prompts named "query" and "document"/"passage"), each side with its own TempScale temperature; unit
   vectors. Through :mod:`longembed.evaluation.cache`: chunks are written as they finish, so a killed
   run resumes where it stopped and a finished run reruns from the cache in seconds.
4. **Score.** Cosine similarity (dot product of unit vectors), then :func:`evaluate_scores` (nDCG@k,
   MRR@k, recall@k, accuracy@1). Every number in ``results.json`` is a percentage. A task's score is its
   main metric (accuracy@1 for passkey/needle, nDCG@10 otherwise); for passkey/needle it is the mean over
   the evaluated lengths (LongEmbed section 3.2), each length also reported in ``by_length``.
5. **Record.** ``<output_dir>/results.json`` (rewritten after every task, atomically; ``"complete"`` is
   true only at the end) with the configuration, the library versions, the model's identity, the cost
   estimate, per-task scores, metrics, counts, cache use and wall times.

``model`` may also be :class:`BM25Model` (LongEmbed Appendix D): no encoder, no cache.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import inspect
import json
import math
import os
import platform
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from longembed.evaluation.bm25 import BM25Model
from longembed.evaluation.cache import (
    CacheNamespace,
    EmbeddingCache,
    atomic_write_text,
    count_missing,
    encode_cached,
    text_key,
)
from longembed.evaluation.metrics import evaluate_scores
from longembed.tasks import DEFAULT_TASKS, SYNTHETIC_LENGTHS, RetrievalData, Task, TaskDataMissing, get_task
from longembed.tasks.base import WORDS_PER_TOKEN

RESULTS_FORMAT = "longembed-results/1"
RESULTS_FILE = "results.json"
DATA_DIR_ENV = "LONGEMBED_DATA_DIR"

#: EncoderConfig fields that never change a vector: ``model`` (the folder's *content* is in the
#: fingerprint instead, so a moved or copied folder stays warm), ``prompts`` (the prompt actually used is
#: in the fingerprint), ``temperature`` (the per-call temperature actually used is), and ``on_overflow``
#: (it only decides between truncating and raising).
NON_VECTOR_CONFIG_FIELDS = ("model", "prompts", "temperature", "on_overflow")

#: Subpackages of longembed that cannot change a vector; every other module is in the code fingerprint.
_NON_VECTOR_SUBPACKAGES = ("cli", "evaluation", "report", "tasks", "collapse")

_SMALL_FILE = 2 << 20  # model files up to 2 MiB are hashed whole; larger ones by size + head + tail
_HEAD = 1 << 20


@runtime_checkable
class Encoder(Protocol):
    """What the runner needs from an encoder (``LongContextEncoder`` or anything alike)."""

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray: ...


# --------------------------------------------------------------------------- identity and versions
def _hash_file(path: Path) -> dict[str, Any]:
    """size + sha256 of a small file, or of the first and last MiB of a large one; and the mtime."""
    stat = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        if stat.st_size <= _SMALL_FILE:
            digest.update(handle.read())
            how = "sha256"
        else:
            digest.update(handle.read(_HEAD))
            handle.seek(stat.st_size - _HEAD)
            digest.update(handle.read(_HEAD))
            how = "sha256 of first and last MiB"
    return {
        "size": stat.st_size,
        "sha256": digest.hexdigest(),
        "hashed": how,
        "mtime": _dt.datetime.fromtimestamp(stat.st_mtime, tz=_dt.UTC).isoformat(timespec="seconds"),
    }


def model_folder(model: str | Path) -> Path | None:
    """The folder a model name resolves to without downloading anything (None if it is not local)."""
    from longembed.loading import DEFAULT_MODEL, default_model_path

    if str(model) == DEFAULT_MODEL:
        try:
            return default_model_path()
        except (ImportError, FileNotFoundError):
            return None
    path = Path(model).expanduser()
    return path.resolve() if path.is_dir() else None


def model_identity(encoder: Any) -> dict[str, Any] | None:
    """A cheap, identifying description of the model behind ``encoder`` (None if unknown).

    Every file of the model folder (hidden ones excluded): size and sha256 (whole for files up to
    2 MiB, first and last MiB for larger ones such as the weights), and mtime. The folder path and the
    mtimes are recorded but are not part of the cache key (a copied folder stays warm).
    """
    config = getattr(encoder, "config", None)
    source = getattr(encoder, "source", None)
    folder = model_folder(config.model) if config is not None else None
    if folder is None and source is not None:
        transformer = Path(source.transformer_path)
        folder = transformer.parent if (transformer.parent / "modules.json").is_file() else transformer
    if folder is None or not folder.is_dir():
        return None
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            files[rel.as_posix()] = _hash_file(path)
    return {
        "name": getattr(source, "name", str(folder)),
        "path": str(folder),
        "files": files,
    }


def code_fingerprint() -> str:
    """sha256 of the longembed modules that compute vectors (all but cli, evaluation, report, tasks,
    collapse): part of the cache key, so that a change to the encoder's code never serves stale vectors."""
    import longembed

    root = Path(longembed.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in _NON_VECTOR_SUBPACKAGES:
            continue
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    """Versions of longembed (and its vector code's hash), torch, transformers, numpy and Python."""
    import torch
    import transformers

    import longembed

    return {
        "longembed": longembed.__version__,
        "longembed_code_sha256": code_fingerprint(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _encoder_device(encoder: Any) -> str:
    device = getattr(encoder, "device", None)
    return getattr(device, "type", str(device)) if device is not None else "unknown"


def resolved_settings(encoder: Any) -> dict[str, Any]:
    """What the encoder made of its config (detected scheme, Lo, Lt, pooling, normalization)."""
    names = ("method", "position_scheme", "original_length", "max_length", "pooling", "normalize")
    return {name: getattr(encoder, name) for name in names if hasattr(encoder, name)}


def cache_fingerprint(
    encoder: Any,
    identity: dict[str, Any],
    prompt: str,
    temperature: float,
    versions: dict[str, str],
    include_code: bool = True,
) -> dict[str, Any]:
    """Everything that decides a cached vector: model content, vector-relevant config, prompt, tau, code.

    The mtimes and the folder path of ``identity`` are left out (they do not change a vector); torch and
    transformers versions and the device type are kept (they can change the last bits of a vector).
    ``include_code=False`` leaves out the hash of longembed's vector code (keeping only its version):
    for reusing vectors across code edits known not to change them (e.g. while developing).
    """
    config = getattr(encoder, "config", None)
    config_dict = config.to_dict() if config is not None and hasattr(config, "to_dict") else {}
    return {
        "format": 1,
        "model_files": {
            name: {"size": f["size"], "sha256": f["sha256"]} for name, f in identity["files"].items()
        },
        "config": {k: v for k, v in config_dict.items() if k not in NON_VECTOR_CONFIG_FIELDS},
        "resolved": resolved_settings(encoder),
        "prompt": prompt,
        "temperature": float(temperature),
        "normalize_embeddings": True,
        "code": versions["longembed_code_sha256"] if include_code else f"longembed {versions['longembed']}",
        "torch": versions["torch"],
        "transformers": versions["transformers"],
        "device": _encoder_device(encoder),
    }


# --------------------------------------------------------------------------- prompts, tasks, lengths
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


@dataclass
class Unit:
    """One retrieval problem: a task at one length (passkey/needle) or a whole real task."""

    task: str
    length: int | None
    data: RetrievalData
    load_seconds: float

    @property
    def label(self) -> str:
        return self.task if self.length is None else f"{self.task}/{self.length}"

    def shard(self, side: str) -> str:
        return f"{self.task}/{'all' if self.length is None else self.length}/{side}"


def load_units(
    tasks: Sequence[Task], data_dir: Path | None, lengths: Sequence[int], log: Callable[[str], None]
) -> tuple[list[Unit], dict[str, str]]:
    """Load every task/length; a task with missing data is skipped (name -> message)."""
    units: list[Unit] = []
    skipped: dict[str, str] = {}
    for task in tasks:
        meta = task.metadata
        task_lengths: list[int | None] = (
            [n for n in lengths if n in meta.lengths] if meta.lengths is not None else [None]
        )
        if not task_lengths:
            skipped[meta.name] = f"none of the requested lengths {list(lengths)} is a length of this task"
            log(f"skipped {meta.name}: {skipped[meta.name]}")
            continue
        loaded: list[Unit] = []
        try:
            for length in task_lengths:
                began = time.perf_counter()
                data = task.load(data_dir, length)
                loaded.append(Unit(meta.name, length, data, time.perf_counter() - began))
        except TaskDataMissing as exc:
            skipped[meta.name] = str(exc)
            log(f"skipped {meta.name}: {exc}")
            continue
        units.extend(loaded)
    return units, skipped


# --------------------------------------------------------------------------- encoding
def _accepts_keyword(function: Callable, name: str) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@dataclass
class Side:
    """How one side (queries or documents) is encoded."""

    name: str
    prompt: str
    temperature: float
    namespace: CacheNamespace | None = None


@dataclass
class _Stats:
    cached: int = 0
    encoded: int = 0
    encode_seconds: float = 0.0


class _EncoderRunner:
    """Encodes one side of a unit through the cache, counting tokens once per text."""

    def __init__(self, encoder: Any, batch_size: int, chunk_size: int, show_progress: bool):
        self.encoder = encoder
        self.batch_size = batch_size
        self.chunk_size = chunk_size
        self.show_progress = show_progress
        config = getattr(encoder, "config", None)
        self.configured_temperature = float(getattr(config, "temperature", 1.0))
        self.per_call_temperature = _accepts_keyword(encoder.encode, "temperature")
        self.tokenizer = getattr(encoder, "tokenizer", None)
        self._token_memo: dict[tuple[str, str], int] = {}

    def check_temperature(self, side: Side) -> None:
        if side.temperature != self.configured_temperature and not self.per_call_temperature:
            raise ValueError(
                f"{side.name} temperature {side.temperature} differs from the encoder's "
                f"({self.configured_temperature}) but its encode() takes no temperature= argument"
            )

    def count_tokens(self, texts: Sequence[str], prompt: str) -> list[int]:
        """Tokens per text as the encoder sees it (prompt and special tokens included).

        Without a tokenizer: words / 0.75 (LongEmbed's rough conversion).
        """
        todo = [t for t in dict.fromkeys(texts) if (prompt, text_key(t)) not in self._token_memo]
        if todo:
            if self.tokenizer is not None:
                ids = self.tokenizer(
                    [prompt + t for t in todo], add_special_tokens=True, truncation=False, verbose=False
                )["input_ids"]
                counts = [len(x) for x in ids]
            else:
                counts = [round(len((prompt + t).split()) / WORDS_PER_TOKEN) for t in todo]
            for text, n in zip(todo, counts, strict=True):
                self._token_memo[(prompt, text_key(text))] = n
        return [self._token_memo[(prompt, text_key(t))] for t in texts]

    def encode_texts(self, texts: list[str], side: Side) -> np.ndarray:
        kwargs: dict[str, Any] = {
            "batch_size": self.batch_size,
            "prompt": side.prompt,
            "normalize_embeddings": True,
            "show_progress_bar": False,
        }
        if side.temperature != self.configured_temperature:
            kwargs["temperature"] = side.temperature
        with warnings.catch_warnings():
            # Inputs longer than max_length are truncated with a warning per call; the runner counts
            # them from the token counts instead and reports them per task.
            warnings.simplefilter("ignore", UserWarning)
            return np.asarray(self.encoder.encode(texts, **kwargs), dtype=np.float32)

    def run(self, unit: Unit, texts: list[str], side: Side) -> tuple[np.ndarray, np.ndarray, _Stats]:
        from tqdm.auto import tqdm

        with tqdm(
            total=len(texts), desc=f"{unit.label} {side.name}", unit="text", disable=not self.show_progress
        ) as bar:
            result = encode_cached(
                texts,
                encode=lambda chunk: self.encode_texts(chunk, side),
                count_tokens=lambda chunk: self.count_tokens(chunk, side.prompt),
                namespace=side.namespace,
                shard=unit.shard(side.name),
                chunk_size=self.chunk_size,
                progress=bar.update,
            )
        vectors = result.vectors
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms > 0, norms, 1.0)
        return vectors, result.tokens, _Stats(result.n_cached, result.n_encoded, result.encode_seconds)


# --------------------------------------------------------------------------- cost estimate
@dataclass
class CostModel:
    """Seconds to encode one sequence of n tokens: c + a n + b n^2, fitted on a warm-up (rough)."""

    a: float
    b: float
    c: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)

    def seconds(self, n: float) -> float:
        return self.c + self.a * n + self.b * n * n


def measure_cost_model(encoder: Any, batch_size: int) -> CostModel:
    """Time a warm-up on this machine and fit seconds per sequence.

    Two batched measurements, as the encoder batches real inputs: min(batch_size, 8) inputs of
    n1 = min(512, Lt) tokens, and 2 inputs of n2 = min(Lt, 2048) tokens (min(Lo, 2048) for pcw, whose
    sequences are windows of at most Lo tokens). Through the two points: a n + b n^2 (attention grows
    with n^2), or c + a n when the short inputs cost more per token (per-sequence overhead dominates).
    A first untimed call takes the one-off costs (thread pools, lazy initialisation) out of the fit.
    Costs about 8 x t(512) + 2 x t(2048): ~1.5 s for MiniLM, ~10 s for nomic on 2 CPU cores.
    """
    cap = int(getattr(encoder, "max_length", 512) or 512)
    original = int(getattr(encoder, "original_length", cap) or cap)
    long_cap = original if getattr(encoder, "method", None) == "pcw" else cap
    n1, n2 = min(512, cap), min(long_cap, 2048)
    k1 = max(1, min(batch_size, 8))

    def text(n: int) -> str:
        return " ".join(["hello"] * max(n - 2, 1))

    def timed(texts: list[str]) -> float:
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
        return (time.perf_counter() - began) / len(texts)

    timed([text(min(64, cap))])
    t1 = timed([text(n1)] * k1)
    samples = [{"tokens": n1, "batch": k1, "seconds_per_sequence": t1}]
    if n2 <= n1 * 1.5:
        return CostModel(t1 / n1, 0.0, 0.0, samples)
    t2 = timed([text(n2)] * 2)
    samples.append({"tokens": n2, "batch": 2, "seconds_per_sequence": t2})
    b = (t2 / n2 - t1 / n1) / (n2 - n1)
    a = t1 / n1 - b * n1
    if b < 0:  # short inputs cost more per token: fixed overhead per sequence, then linear
        slope = max((t2 - t1) / (n2 - n1), 0.0)
        return CostModel(slope, 0.0, max(t1 - slope * n1, 0.0), samples)
    if a < 0:
        a, b = 0.0, t2 / (n2 * n2)
    return CostModel(a, b, 0.0, samples)


def document_seconds(n_tokens: int, encoder: Any, model: CostModel) -> float:
    """Estimated seconds for one input of ``n_tokens``: truncated to Lt; pcw splits into Lo windows."""
    cap = int(getattr(encoder, "max_length", n_tokens) or n_tokens)
    n = min(n_tokens, cap)
    original = int(getattr(encoder, "original_length", n) or n)
    if getattr(encoder, "method", None) == "pcw" and n > original:
        windows = math.ceil(n / original)
        return windows * model.seconds(n / windows)
    return model.seconds(n)


def estimate_cost(
    units: Sequence[Unit],
    runner: _EncoderRunner | None,
    sides: dict[str, Side],
    batch_size: int,
    measure: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Documents, queries, tokens and cache hits per unit, and estimated seconds; printed and returned.

    Tokens are counted only for texts not in the cache (a warm rerun tokenizes nothing). Seconds come
    from :func:`measure_cost_model` (a warm-up on this machine, this encoder, this method), skipped when
    there is nothing to encode or ``measure`` is False. BM25 (``runner`` None): tokens = words / 0.75,
    and no time estimate (indexing takes seconds).
    """
    rows: list[dict[str, Any]] = []
    for unit in units:
        row: dict[str, Any] = {"unit": unit.label}
        for side_name, texts in (
            ("documents", list(unit.data.corpus.values())),
            ("queries", list(unit.data.queries.values())),
        ):
            if runner is None:
                tokens = [round(len(t.split()) / WORDS_PER_TOKEN) for t in texts]
                row[side_name] = {
                    "count": len(texts),
                    "cached": 0,
                    "to_encode": len(texts),
                    "tokens": sum(tokens),
                    "max_tokens": max(tokens, default=0),
                }
                continue
            side = sides[side_name]
            n_cached, missing = count_missing(texts, side.namespace, unit.shard(side_name))
            tokens = runner.count_tokens(missing, side.prompt) if missing else []
            row[side_name] = {
                "count": len(texts),
                "cached": n_cached,
                "to_encode": len(missing),
                "tokens": sum(tokens),
                "max_tokens": max(tokens, default=0),
                "_tokens": tokens,
            }
        rows.append(row)

    model = None
    if (
        runner is not None
        and measure
        and any(r["documents"]["to_encode"] + r["queries"]["to_encode"] for r in rows)
    ):
        model = measure_cost_model(runner.encoder, batch_size)
    total_seconds = 0.0
    for row in rows:
        seconds = 0.0
        for side_name in ("documents", "queries"):
            tokens = row[side_name].pop("_tokens", [])
            if model is not None:
                seconds += sum(document_seconds(n, runner.encoder, model) for n in tokens)
        row["seconds"] = round(seconds, 1) if model is not None else None
        total_seconds += seconds

    docs = sum(r["documents"]["count"] for r in rows)
    docs_cached = sum(r["documents"]["cached"] for r in rows)
    queries = sum(r["queries"]["count"] for r in rows)
    queries_cached = sum(r["queries"]["cached"] for r in rows)
    tokens = sum(r["documents"]["tokens"] + r["queries"]["tokens"] for r in rows)
    estimate = {
        "method": (
            "seconds per sequence t(n) = c + a n + b n^2 fitted on a batched warm-up on this machine; inputs "
            "truncated to max_length, pcw counted as windows of Lo; padding ignored (rough)"
            if model is not None
            else ("BM25: no encoding" if runner is None else "not measured")
        ),
        "cost_model": None
        if model is None
        else {"a": model.a, "b": model.b, "c": model.c, "warmup": model.samples},
        "units": rows,
        "documents": docs,
        "documents_cached": docs_cached,
        "queries": queries,
        "queries_cached": queries_cached,
        "tokens_to_encode": tokens,
        "seconds": round(total_seconds, 1) if model is not None else None,
    }
    log(format_estimate(estimate))
    return estimate


def format_estimate(estimate: dict[str, Any]) -> str:
    """The estimate as a small text table."""
    lines = [
        f"{'unit':<16}{'docs':>6}{'cached':>8}{'doc tokens to encode':>22}{'max':>8}"
        f"{'queries':>9}{'cached':>8}{'est. s':>9}"
    ]
    for row in estimate["units"]:
        d, q = row["documents"], row["queries"]
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.0f}"
        lines.append(
            f"{row['unit']:<16}{d['count']:>6}{d['cached']:>8}{d['tokens']:>22,}{d['max_tokens']:>8}"
            f"{q['count']:>9}{q['cached']:>8}{seconds:>9}"
        )
    total = estimate["seconds"]
    when = "" if total is None else f"; estimated {_duration(total)}"
    lines.append(
        f"total: {estimate['documents']} documents ({estimate['documents_cached']} cached), "
        f"{estimate['queries']} queries ({estimate['queries_cached']} cached), "
        f"{estimate['tokens_to_encode']:,} tokens to encode{when} ({estimate['method']})"
    )
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# --------------------------------------------------------------------------- scoring
def _percent(metrics: dict[str, float]) -> dict[str, float]:
    return {name: round(100.0 * value, 4) for name, value in metrics.items()}


def _score_unit(
    unit: Unit,
    model: Any,
    runner: _EncoderRunner | None,
    sides: dict[str, Side],
    max_length: int | None,
) -> dict[str, Any]:
    """Encode (or BM25-score) one unit and evaluate it; metrics in percent."""
    began = time.perf_counter()
    data = unit.data
    doc_ids, doc_texts = list(data.corpus), list(data.corpus.values())
    query_ids, query_texts = list(data.queries), list(data.queries.values())
    cache: dict[str, Any] = {}
    if runner is None:
        scores = model.score(query_texts, doc_texts)
        doc_tokens = np.asarray([round(len(t.split()) / WORDS_PER_TOKEN) for t in doc_texts])
        encode_seconds = 0.0
    else:
        doc_vectors, doc_tokens, doc_stats = runner.run(unit, doc_texts, sides["documents"])
        query_vectors, _, query_stats = runner.run(unit, query_texts, sides["queries"])
        scores = query_vectors @ doc_vectors.T
        encode_seconds = doc_stats.encode_seconds + query_stats.encode_seconds
        cache = {
            "documents_cached": doc_stats.cached,
            "documents_encoded": doc_stats.encoded,
            "queries_cached": query_stats.cached,
            "queries_encoded": query_stats.encoded,
        }
    metrics = evaluate_scores(scores, query_ids, doc_ids, data.qrels)
    counts: dict[str, Any] = {
        "documents": len(doc_ids),
        "queries": len(query_ids),
        "document_tokens_mean": round(float(np.mean(doc_tokens)), 1),
        "document_tokens_max": int(np.max(doc_tokens)),
        "tokens_counted": "tokenizer"
        if runner is not None and runner.tokenizer is not None
        else "words / 0.75",
    }
    if max_length is not None:
        counts["documents_truncated"] = int(np.sum(doc_tokens > max_length))
    return {
        "metrics": _percent(metrics),
        "counts": counts,
        "cache": cache,
        "encode_time_s": round(encode_seconds, 3),
        "wall_time_s": round(time.perf_counter() - began + unit.load_seconds, 3),
    }


def _sum_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("documents", "queries", "documents_truncated"):
        if all(key in p for p in parts):
            out[key] = sum(p[key] for p in parts)
    out["document_tokens_max"] = max(p["document_tokens_max"] for p in parts)
    total_docs = sum(p["documents"] for p in parts)
    out["document_tokens_mean"] = round(
        sum(p["document_tokens_mean"] * p["documents"] for p in parts) / total_docs, 1
    )
    out["tokens_counted"] = parts[0]["tokens_counted"]
    return out


def _task_entry(task: Task, unit_results: list[tuple[Unit, dict[str, Any]]]) -> dict[str, Any]:
    """Aggregate the units of one task: for synthetic tasks every metric is the mean over lengths."""
    meta = task.metadata
    main = meta.main_score
    entry: dict[str, Any] = {"main_score": main}
    if meta.stand_in_for:
        entry["stand_in_for"] = meta.stand_in_for
    if meta.lengths is None:
        ((_, result),) = unit_results
        entry.update(score=result["metrics"][main], **result)
        return entry
    names = list(unit_results[0][1]["metrics"])
    metrics = {n: round(float(np.mean([r["metrics"][n] for _, r in unit_results])), 4) for n in names}
    entry["score"] = metrics[main]
    entry["metrics"] = metrics
    entry["by_length"] = {str(u.length): r["metrics"][main] for u, r in unit_results}
    entry["lengths"] = {str(u.length): {"score": r["metrics"][main], **r} for u, r in unit_results}
    entry["counts"] = _sum_counts([r["counts"] for _, r in unit_results])
    caches = [r["cache"] for _, r in unit_results if r["cache"]]
    entry["cache"] = {k: sum(c[k] for c in caches) for k in caches[0]} if caches else {}
    entry["encode_time_s"] = round(sum(r["encode_time_s"] for _, r in unit_results), 3)
    entry["wall_time_s"] = round(sum(r["wall_time_s"] for _, r in unit_results), 3)
    return entry


def _average(tasks: dict[str, Any], lengths: Sequence[int]) -> tuple[float | None, list[str], str]:
    names = list(tasks)
    if not names:
        return None, [], "no task ran"
    value = round(float(np.mean([tasks[n]["score"] for n in names])), 4)
    notes = [f"unweighted mean of {len(names)} task score(s): {', '.join(names)}"]
    missing = [t for t in DEFAULT_TASKS if t not in tasks]
    if missing:
        notes.append(f"not included: {', '.join(missing)}")
    if any("by_length" in tasks[n] for n in names) and list(lengths) != list(SYNTHETIC_LENGTHS):
        notes.append(f"passkey/needle over lengths {', '.join(map(str, lengths))} only")
    return value, names, "; ".join(notes)


# --------------------------------------------------------------------------- the run
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
) -> dict[str, Any]:
    """Evaluate an encoder (or :class:`BM25Model`) on LongEmbed tasks; returns the results dict.

    model:       a ``LongContextEncoder`` (or any object with the same ``encode``; ``config``, ``source``,
                 ``tokenizer`` and ``prompts`` are used when present), or a ``BM25Model``.
    tasks:       task names or Task objects (default ``DEFAULT_TASKS``); a task whose data is missing
                 is skipped and listed under ``"skipped"``.
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
    """
    say = log or (lambda _message: None)
    started = time.perf_counter()
    is_bm25 = isinstance(model, BM25Model)
    if not is_bm25 and not callable(getattr(model, "encode", None)):
        raise TypeError(f"model must be an encoder with encode() or a BM25Model, not {type(model).__name__}")
    if batch_size < 1 or chunk_size < 1:
        raise ValueError("batch_size and chunk_size must be positive")
    task_objects = resolve_tasks(tasks)
    length_list = resolve_lengths(lengths)
    data_path = Path(data_dir).expanduser() if data_dir is not None else None
    output_path = Path(output_dir) if output_dir is not None else None
    versions = library_versions()

    runner: _EncoderRunner | None = None
    sides: dict[str, Side] = {}
    max_length: int | None = None
    if is_bm25:
        encoder_config: dict[str, Any] = {
            "model": "bm25",
            "k1": model.k1,
            "b": model.b,
            "variant": model.method,
            "stopwords": model.stopwords,
            "stemmer": model.stemmer_name,
        }
        versions["model"] = {
            "name": "bm25",
            "bm25s": _package_version("bm25s"),
            "PyStemmer": _package_version("PyStemmer"),
        }
        cache_root = None
    else:
        config = getattr(model, "config", None)
        encoder_config = config.to_dict() if hasattr(config, "to_dict") else {"model": type(model).__name__}
        max_length = getattr(model, "max_length", None)
        identity = model_identity(model)
        versions["model"] = identity or {"name": type(model).__name__, "files": None}
        versions["device"] = _encoder_device(model)
        runner = _EncoderRunner(model, batch_size, chunk_size, show_progress)
        prompts = default_prompts(model)
        configured = runner.configured_temperature
        cache = None
        if use_cache and identity is not None:
            cache = EmbeddingCache(cache_dir)
        elif use_cache:
            say("embedding cache disabled: this encoder has no model folder to identify it by")
        cache_root = str(cache.root) if cache is not None else None
        for name, prompt, tau in (
            ("queries", query_prompt if query_prompt is not None else prompts["query"], query_temperature),
            (
                "documents",
                document_prompt if document_prompt is not None else prompts["document"],
                document_temperature,
            ),
        ):
            tau = configured if tau is None else float(tau)
            if not 0 < tau <= 1:
                raise ValueError(f"{name} temperature must be in (0, 1], got {tau}")
            side = Side(name, prompt, tau)
            runner.check_temperature(side)
            if cache is not None:
                side.namespace = cache.namespace(
                    cache_fingerprint(
                        model, identity, prompt, tau, versions, include_code=cache_includes_code
                    )
                )
            sides[name] = side

    results: dict[str, Any] = {
        "format": RESULTS_FORMAT,
        "created": _dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
        "complete": False,
        "config": {
            "encoder": encoder_config,
            "resolved": resolved_settings(model) if not is_bm25 else {},
            "tasks": [t.metadata.name for t in task_objects],
            "lengths": length_list,
            "data_dir": str(data_path) if data_path is not None else None,
            "prompts": {"query": sides["queries"].prompt, "document": sides["documents"].prompt}
            if sides
            else None,
            "prompt_source": None
            if is_bm25
            else {
                "query": "argument" if query_prompt is not None else "model",
                "document": "argument" if document_prompt is not None else "model",
            },
            "temperatures": (
                {"query": sides["queries"].temperature, "document": sides["documents"].temperature}
                if sides
                else None
            ),
            "batch_size": batch_size if not is_bm25 else None,
            "similarity": "bm25" if is_bm25 else "cosine",
            "cache_dir": cache_root,
            "cache_namespaces": (
                {s.name: s.namespace.key for s in sides.values() if s.namespace is not None} if sides else {}
            ),
        },
        "versions": versions,
        "estimate": None,
        "average": None,
        "average_tasks": [],
        "average_note": "",
        "tasks": {},
        "skipped": {},
        "wall_time_s": None,
    }

    units, skipped = load_units(task_objects, data_path, length_list, say)
    results["skipped"] = skipped
    results["estimate"] = estimate_cost(units, runner, sides, batch_size, estimate, say)
    if dry_run:
        return results
    if output_path is not None:
        write_results(output_path, results)

    by_task: dict[str, list[tuple[Unit, dict[str, Any]]]] = {}
    for unit in units:
        by_task.setdefault(unit.task, []).append((unit, _score_unit(unit, model, runner, sides, max_length)))
        task = next(t for t in task_objects if t.metadata.name == unit.task)
        if len(by_task[unit.task]) == sum(1 for u in units if u.task == unit.task):
            results["tasks"][unit.task] = _task_entry(task, by_task[unit.task])
            entry = results["tasks"][unit.task]
            say(f"{unit.task}: {entry['main_score']} = {entry['score']:.2f} ({entry['wall_time_s']:.1f} s)")
            _update_average(results, length_list)
            results["wall_time_s"] = round(time.perf_counter() - started, 3)
            if output_path is not None:
                write_results(output_path, results)

    _update_average(results, length_list)
    results["complete"] = True
    results["wall_time_s"] = round(time.perf_counter() - started, 3)
    if output_path is not None:
        write_results(output_path, results)
    from longembed.report.tables import results_summary

    say(results_summary(results))
    return results


def _update_average(results: dict[str, Any], lengths: Sequence[int]) -> None:
    average, names, note = _average(results["tasks"], lengths)
    results["average"], results["average_tasks"], results["average_note"] = average, names, note


def write_results(output_dir: Path, results: dict[str, Any]) -> Path:
    """Write ``output_dir/results.json`` atomically (indented, keys in insertion order)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / RESULTS_FILE
    atomic_write_text(path, json.dumps(json_safe(results), indent=2) + "\n")
    return path


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a run's results: ``path`` is a run folder or its results.json."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {RESULTS_FILE} at {path}")
    results = json.loads(path.read_text())
    if results.get("format") != RESULTS_FORMAT:
        raise ValueError(f"{path} is not a longembed results file (format {results.get('format')!r})")
    return results


def json_safe(value: Any) -> Any:
    """numpy scalars -> Python, NaN/inf -> None, recursively (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


def default_data_dir() -> Path | None:
    """``$LONGEMBED_DATA_DIR`` if set (the CLI's default ``--data-dir``), else None."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else None
