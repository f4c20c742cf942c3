"""How a run is named in tables, plots and comparisons: model, method, Lt and what it changed.

A label shows every setting that makes two runs score different things (tau, scale, chunking, fusion,
queries per length, haystack), so that two rows of a report never look alike; :func:`unique_labels`
adds the folder name where two labels would still clash.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.report.formatting import MISSING
from longembed.results import RunResults

#: Encoder settings that a run's label shows when they differ from these defaults.
LABELLED_SETTINGS = (("scale", "fixed"), ("apply_to", "long"), ("attention_scale", None),
                     ("ntk_variant", "static"), ("preset", None), ("temperature_decay", 0.0), ("dtype", "float32"))


@dataclass
class Run:
    """One run's results and where they came from."""

    path: Path
    results: RunResults
    label: str = ""


def model_name(results: RunResults) -> str:
    """A short model name: "BM25", the packaged model's name, or a model folder's last part."""
    model = str(results.config.encoder.get("model", "?"))
    if model == "bm25":
        return "BM25"
    if model == "default":
        return results.model_name or "default"
    return Path(model.rstrip("/")).name or model


def run_settings(results: RunResults) -> tuple[str, str]:
    """(method, max_length) as shown in tables; "–" for BM25."""
    config = results.config
    if config.is_bm25:
        return MISSING, MISSING
    method = config.resolved.get("method") or config.encoder.get("method") or "?"
    max_length = config.resolved.get("max_length") or config.encoder.get("max_length")
    return str(method), str(max_length) if max_length is not None else MISSING


def run_label(results: RunResults) -> str:
    """"model method max_length", plus the settings that differ from the defaults (tau, scale, ...) and
    the passkey/needle options that change the data."""
    config = results.config
    name = model_name(results)
    if config.is_bm25:
        return " ".join([name, *task_option_parts(config.task_options)])
    return " ".join([name, strategy_label(results), *task_option_parts(config.task_options)])


def strategy_label(results: RunResults) -> str:
    """"method max_length" and every setting that changes what a run scores (tau, scale, chunks,
    fusion, ...): the run's label without its model and data ("bm25" for BM25)."""
    config = results.config
    if config.is_bm25:
        return "bm25"
    method, max_length = run_settings(results)
    parts = [method, max_length]
    temperatures = config.temperatures or {}
    taus = sorted({float(v) for v in temperatures.values()})
    if taus and taus != [1.0]:
        if len(taus) == 1:
            parts.append(f"tau={taus[0]:g}")
        else:
            parts.append(f"tau q={temperatures['query']:g} d={temperatures['document']:g}")
    for key, default in LABELLED_SETTINGS:
        if config.encoder.get(key, default) != default:
            parts.append(f"{key}={config.encoder[key]}")
    strategy = config.retrieval()
    if strategy.chunked:
        parts.append(f"{'late' if strategy.late else 'naive'} chunks {strategy.chunking}")
    elif strategy.multivector:  # late interaction: "late tokens maxsim", "naive tokens tokens:256 maxsim"
        parts.append(f"{'late tokens' if strategy.late else f'naive tokens {strategy.chunking}'} maxsim")
    if strategy.fusion is not None:
        parts.append(fusion_label(strategy.fusion.to_dict()))
    return " ".join(parts)


def fusion_label(fusion: dict[str, Any]) -> str:
    """A hybrid run's label part: "+ bm25 rrf", "+ bm25 rrf k=10", "+ bm25 linear w=0.3" (rrf's
    default k = 60 is not shown)."""
    detail = ""
    if fusion.get("method") == "linear":
        detail = f" w={float(fusion.get('weight', 0.5)):g}"
    elif fusion.get("k", 60) != 60:
        detail = f" k={fusion['k']}"
    return f"+ {fusion.get('source', '?')} {fusion.get('method', '?')}{detail}"


def task_option_parts(options: dict[str, Any]) -> list[str]:
    """The task options a run changed, as label words ("200 q/length", "in blocks of 50",
    "haystack=contracts", "needle haystacks=distinct", "sample of 300 q (seed 0)"):
    runs of different query counts or haystacks score different data and must not look alike."""
    parts = []
    if "queries_per_length" in options:
        parts.append(f"{options['queries_per_length']} q/length")
    if options.get("candidates") == "blocks":
        parts.append("in blocks of 50")
    haystack = options.get("haystack")
    if haystack:
        path = haystack.get("path", "") if isinstance(haystack, dict) else str(haystack)
        parts.append(f"haystack={Path(str(path).rstrip('/')).name}")
    if options.get("needle_haystacks"):
        parts.append(f"needle haystacks={options['needle_haystacks']}")
    if "max_queries" in options:
        parts.append(f"sample of {options['max_queries']} q (seed {options.get('sample_seed', 0)})")
    return parts


def unique_labels(runs: Sequence[Run]) -> None:
    """Give every run a distinct label: its settings, plus its folder name where two would clash."""
    labels = [run_label(r.results) for r in runs]
    for run, label in zip(runs, labels, strict=True):
        run.label = label if labels.count(label) == 1 else f"{label} [{run.path.name}]"
