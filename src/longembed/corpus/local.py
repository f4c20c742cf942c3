"""The local engine: the shards embedded one after another in this process, by one encoder.

The baseline the Ray engine is measured against, and the engine for a corpus that one process
handles in acceptable time.  The model is loaded only when there is a shard to embed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from longembed.corpus.job import EmbedJob, ShardEmbedder, ShardReport
from longembed.corpus.shards import Shard


def embed_shards_locally(
    tasks: Sequence[tuple[Shard, Path]], job: EmbedJob, on_report: Callable[[ShardReport], None]
) -> list[ShardReport]:
    """Embed each (shard, output file) of ``tasks`` in order; ``on_report`` sees each report as it is made."""
    if not tasks:
        return []
    embedder = ShardEmbedder(job)
    reports = []
    for shard, output in tasks:
        report = embedder.embed_shard(shard, output)
        on_report(report)
        reports.append(report)
    return reports
