"""What a user runs after the advice: the commands that reproduce a strategy's score (``longembed eval``),
serve its index for search (``longembed serve --index``) and build its index (``longembed index --from-advice``), all built
from its ``config`` (:meth:`~longembed.retrieval.strategy.Strategy.to_dict`), so they cannot disagree.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.config import DEFAULT_DTYPE
from longembed.retrieval.strategy import BM25, CHUNKS, Strategy

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


def config_flags(config: Mapping[str, Any]) -> list[str]:
    """A strategy's ``config`` as ``longembed eval`` flags.  The encoder's options are flags of their own
    (``--dtype bfloat16``)."""
    strategy = Strategy.from_dict(config)
    out = [] if strategy.lexical_only else _encoder_flags(strategy)
    if strategy.lexical_only:
        return ["--model", BM25]
    if strategy.chunked:
        out += ["--granularity", CHUNKS, "--chunking", strategy.chunking, "--late" if strategy.late else "--naive"]
    for key in ("fuse", "fuse_method", "fuse_weight", "fuse_k", "query_prompt", "document_prompt"):
        value = getattr(strategy, key)
        if value is not None:
            out += ["--" + key.replace("_", "-"), str(value)]
    return out


def _encoder_flags(strategy: Strategy) -> list[str]:
    out = ["--model", str(strategy.model)]
    options = {"method": strategy.method, "max_length": strategy.max_length, **strategy.encoder_options}
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                out += [flag, f"{k}={v}"]
        elif value is True:
            out.append(flag)
        else:
            out += [flag, str(value)]
    return out


def eval_command(config: Mapping[str, Any], data: DataFlags, output: str | Path, run_flags: Sequence[str] = ()) -> str:
    """``longembed eval`` of the strategy on the advice's data, into ``output`` (``run_flags``: how the
    advice's run ran beyond the strategy, e.g. ``--batch-size 8``)."""
    return shlex.join(["longembed", "eval", *config_flags(config), *run_flags, *data.flags(), "--output", str(output)])


def serve_command(index_dir: str | Path) -> str:
    """``longembed serve --index`` of the strategy's index: ``POST /search`` and the search page, over the
    index the strategy's index command builds (the server embeds queries with the index's own model, so
    no model flags are needed; the embedding routes serve that model too)."""
    return shlex.join(["longembed", "serve", "--index", str(index_dir)])


def index_command(name: str, advice_file: str | Path, index_dir: str | Path) -> str:
    """``longembed index`` of your documents (``SOURCE...``) as the strategy indexes them."""
    return shlex.join(["longembed", "index", "SOURCE...", "--index", str(index_dir), "--from-advice",
                       str(advice_file), "--strategy", name])


def strategy_commands(name: str, config: Mapping[str, Any], data: DataFlags, out: str | Path,
                      run_flags: Sequence[str] = ()) -> dict[str, str]:
    """The strategy's commands: "eval" (into OUT/rerun/NAME), "index" (into OUT/index/NAME), "serve" (a
    search server over that index)."""
    out = Path(out)
    index_dir = out / INDEX / name
    return {"eval": eval_command(config, data, out / RERUN / name, run_flags),
            "index": index_command(name, out / "advice.json", index_dir),
            "serve": serve_command(index_dir)}


def command_dtypes(config: Mapping[str, Any]) -> dict[str, str]:
    """The dtype each of the strategy's commands runs its model in: the strategy's ``--dtype`` when it has
    one, else eval's float32 for all three: ``index --from-advice`` builds in the dtype advise scored (so it
    reuses advise's vectors and search reproduces the score) and ``serve --index`` runs the index's (none
    for BM25: no model)."""
    if config.get("model") == BM25:
        return {}
    dtype = (config.get("encoder_options") or {}).get("dtype") or DEFAULT_DTYPE
    return {"eval": dtype, "serve": dtype, "index": dtype}


def serve_request(config: Mapping[str, Any]) -> str:
    """What to send the server for the vectors of the strategy advice.json's ``config`` records, in words."""
    strategy = Strategy.from_dict(config)
    if strategy.lexical_only:
        return "no model: BM25 needs only the index"
    if strategy.chunked:
        kind = "late" if strategy.late else "naive"
        text = (f"POST /embed_chunks with \"chunking\": \"{strategy.chunking}\", \"late\": "
                f"{'true' if strategy.late else 'false'} ({kind} chunks; a document scores its best chunk)")
    else:
        text = "POST /embed or /v1/embeddings (one vector per document)"
    if strategy.fusion is not None:
        text += f"; fused with BM25's ranking ({strategy.fusion.describe()}) where you search"
    return text
