"""What a user runs after the advice: each strategy's configuration (``config`` in advice.json) and the
commands that reproduce its score (``longembed eval``), serve its model (``longembed serve``) and build
its index (``longembed index ... --from-advice advice.json --strategy NAME``).

``config`` holds exactly the ``longembed eval`` options of the strategy's run, keyed as eval's flags
(``--max-length`` -> ``max_length``; ``--late``/``--naive`` -> ``late`` true/false): ``model``,
``method``, ``max_length``, ``granularity``, ``chunking``, ``late``, ``fuse``, ``fuse_method``,
``fuse_weight``, ``fuse_k``, then the encoder options the advice was given (``prompts``, ``dtype``, ...)
and, when set, ``query_prompt``, ``document_prompt``, ``batch_size``.  A key that does not apply is
null: ``chunking`` and ``late`` for one vector per document, the ``fuse*`` keys without fusion, and
``method``/``max_length`` for BM25 (``model`` "bm25").  The eval command is built from ``config``
plus the data flags, so the two cannot disagree (tests/advice parse it with eval's own parser).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.advice.strategies import Candidate
from longembed.results.advice import BM25, HYBRID

#: The configuration keys every strategy has, in order (the eval strategy flags).
STRATEGY_KEYS = ("model", "method", "max_length", "granularity", "chunking", "late", "fuse", "fuse_method",
                 "fuse_weight", "fuse_k")
#: What reciprocal rank fusion runs with when the run names no k (evaluation.fusion's default).
RRF_K = 60
RERUN, INDEX = "rerun", "index"


@dataclass(frozen=True)
class DataFlags:
    """The ``longembed eval`` data flags of the advice's runs (the same for every strategy)."""

    task_dirs: Sequence[str] = ()
    task_names: Sequence[str] = ()
    tasks: Sequence[str] = ()
    data_dir: str | None = None
    lengths: Sequence[int] = ()
    queries_per_length: int | None = None
    haystack: str | None = None
    cache_dir: str | None = None
    use_cache: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def flags(self) -> list[str]:
        out: list[str] = []
        for folder in self.task_dirs:
            out += ["--task-dir", folder]
        for name in self.task_names:
            out += ["--task-name", name]
        if self.tasks:
            out += ["--tasks", ",".join(self.tasks)]
        if self.data_dir is not None:
            out += ["--data-dir", self.data_dir]
        if self.lengths:
            out += ["--lengths", ",".join(str(n) for n in self.lengths)]
        if self.queries_per_length is not None:
            out += ["--queries-per-length", str(self.queries_per_length)]
        if self.haystack is not None:
            out += ["--haystack", self.haystack]
        if self.cache_dir is not None:
            out += ["--cache-dir", self.cache_dir]
        if not self.use_cache:
            out.append("--no-cache")
        return out


def strategy_config(
    candidate: Candidate, model: str, method: str | None, max_length: int | None,
    encoder_options: Mapping[str, Any] | None = None, run_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The strategy's ``config`` (see the module docstring): its eval flags as keys."""
    chunked = candidate.chunked
    hybrid = candidate.kind == HYBRID
    config: dict[str, Any] = {
        "model": "bm25" if candidate.kind == BM25 else (candidate.model or model),
        "method": None if candidate.kind == BM25 else method,
        "max_length": None if candidate.kind == BM25 else max_length,
        "granularity": candidate.granularity,
        "chunking": candidate.chunking if chunked else None,
        "late": candidate.late if chunked else None,
        "fuse": "bm25" if hybrid else None,
        "fuse_method": "rrf" if hybrid else None,
        "fuse_weight": None,
        "fuse_k": RRF_K if hybrid else None,
    }
    if candidate.kind != BM25:
        config.update({k: v for k, v in (encoder_options or {}).items() if v is not None})
    config.update({k: v for k, v in (run_options or {}).items() if v is not None})
    return config


def config_flags(config: Mapping[str, Any], serve: bool = False) -> list[str]:
    """``config`` as flags (``serve``: the encoder's only, no data, chunk or fusion flags)."""
    out: list[str] = []
    for key, value in config.items():
        if value is None or (serve and key in STRATEGY_KEYS[3:] + ("query_prompt", "document_prompt")):
            continue
        flag = "--" + key.replace("_", "-")
        if key == "late":
            out.append("--late" if value else "--naive")
        elif isinstance(value, dict):
            for k, v in value.items():
                out += [flag, f"{k}={v}"]
        elif isinstance(value, bool):
            if value:
                out.append(flag)
        else:
            out += [flag, str(value)]
    return out


def eval_command(config: Mapping[str, Any], data: DataFlags, output: str | Path) -> str:
    """``longembed eval`` of the strategy on the advice's data, into ``output``."""
    return shlex.join(["longembed", "eval", *config_flags(config), *data.flags(), "--output", str(output)])


def serve_command(config: Mapping[str, Any]) -> str | None:
    """``longembed serve`` of the strategy's model (None for BM25: no model to serve)."""
    if config["model"] == "bm25":
        return None
    return shlex.join(["longembed", "serve", *config_flags(config, serve=True)])


def index_command(name: str, advice_file: str | Path, index_dir: str | Path) -> str:
    """``longembed index`` of your documents (``SOURCE...``) as the strategy indexes them."""
    return shlex.join(["longembed", "index", "SOURCE...", "--index", str(index_dir), "--from-advice",
                       str(advice_file), "--strategy", name])


def strategy_commands(name: str, config: Mapping[str, Any], data: DataFlags, out: str | Path) -> dict[str, str]:
    """The strategy's commands: "eval" (into OUT/rerun/NAME), "serve" (not for BM25), "index" (into
    OUT/index/NAME)."""
    out = Path(out)
    commands = {"eval": eval_command(config, data, out / RERUN / name)}
    serve = serve_command(config)
    if serve is not None:
        commands["serve"] = serve
    commands["index"] = index_command(name, out / "advice.json", out / INDEX / name)
    return commands


def serve_request(config: Mapping[str, Any]) -> str:
    """What to send the server for the strategy's vectors, in words."""
    if config["model"] == "bm25":
        return "no model: BM25 needs only the index"
    if config["granularity"] == "chunks":
        kind = "late" if config["late"] else "naive"
        text = (f"POST /embed_chunks with \"chunking\": \"{config['chunking']}\", \"late\": "
                f"{'true' if config['late'] else 'false'} ({kind} chunks; a document scores its best chunk)")
    else:
        text = "POST /embed or /v1/embeddings (one vector per document)"
    if config.get("fuse"):
        text += "; fused with BM25's ranking (reciprocal rank fusion, k = 60) where you search"
    return text
