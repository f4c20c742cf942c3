"""Embed a corpus: plan the shards, clear what a killed run left, run an engine, report each shard.

    >>> from longembed.corpus import EmbedJob, RaySettings, embed_corpus
    >>> job = EmbedJob("path/to/all-MiniLM-L6-v2", method="pi", max_length=2048)
    >>> result = embed_corpus("shards/", "vectors/", job, engine="ray", ray=RaySettings(actors=2))

Progress is one log line per finished shard (logger ``longembed.corpus.run``); empty ``.txt`` lines
are skipped with a warning; a shard with bad input is reported in ``result.failed`` while the
others are written, so a rerun after fixing it embeds only that shard.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from longembed.corpus.arrow import require_arrow
from longembed.corpus.choices import ENGINES
from longembed.corpus.job import EmbedJob, ShardReport
from longembed.corpus.local import embed_shards_locally
from longembed.corpus.plan import CorpusPlan, plan_corpus
from longembed.corpus.ray_engine import (
    RaySettings,
    connect,
    disconnect,
    embed_shards_on_ray,
    require_ray,
)
from longembed.corpus.writer import remove_partial_files
from longembed.errors import UserError

logger = logging.getLogger(__name__)


@dataclass
class CorpusResult:
    """What a run did: the plan (done before it started, embedded now) and a report per embedded shard."""

    plan: CorpusPlan
    reports: list[ShardReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def embedded(self) -> list[ShardReport]:
        return [r for r in self.reports if not r.error]

    @property
    def failed(self) -> list[ShardReport]:
        return [r for r in self.reports if r.error]

    @property
    def documents(self) -> int:
        return sum(r.documents for r in self.embedded)

    @property
    def truncated(self) -> int:
        return sum(r.truncated for r in self.embedded)


def embed_corpus(
    input_path: str | Path,
    output: str | Path,
    job: EmbedJob,
    engine: str = "local",
    ray: RaySettings | None = None,
    on_report: Callable[[ShardReport], None] | None = None,
) -> CorpusResult:
    """Embed every shard of ``input_path`` not already embedded in ``output`` (see :mod:`longembed.corpus`).

    ``engine="ray"`` uses the Ray this process is connected to, else connects or starts one (and then
    shuts it down at the end).  ``on_report`` replaces the default progress line per shard.
    """
    if engine not in ENGINES:
        raise UserError(f"engine must be one of {ENGINES}, got {engine!r}")
    require_arrow()
    if engine == "ray":
        require_ray()
    plan = plan_corpus(Path(input_path), Path(output), job)
    partial = remove_partial_files(plan.output)
    if partial:
        logger.info("removed %d partial file(s) of an interrupted run", len(partial))
    if plan.done:
        logger.info("%d of %d shard(s) already embedded in %s: skipped", len(plan.done), plan.n_shards, plan.output)
    result = CorpusResult(plan)
    report = on_report or _progress(len(plan.pending))
    start = time.perf_counter()
    if engine == "local" or not plan.pending:
        result.reports = embed_shards_locally(plan.pending, job, report)
    else:
        settings = ray or RaySettings()
        started = connect(settings)
        try:
            result.reports = embed_shards_on_ray(plan.pending, job, settings, report)
        finally:
            if started:
                disconnect()
    result.seconds = time.perf_counter() - start
    for shard in result.embedded:
        if shard.skipped_empty_lines:
            warnings.warn(f"{shard.shard}: skipped {shard.skipped_empty_lines} empty line(s)", stacklevel=2)
    return result


def _progress(total: int) -> Callable[[ShardReport], None]:
    """A reporter logging ``[i/total] shard: n documents in s (docs/s)`` per shard, errors as warnings."""
    count = 0

    def report(shard: ShardReport) -> None:
        nonlocal count
        count += 1
        if shard.error:
            logger.warning("[%d/%d] %s failed: %s", count, total, shard.shard, shard.error)
            return
        rate = shard.documents / shard.seconds if shard.seconds else 0.0
        logger.info("[%d/%d] %s: %d documents in %.1f s (%.1f docs/s) on %s", count, total, shard.shard,
                    shard.documents, shard.seconds, rate, shard.worker)

    return report
