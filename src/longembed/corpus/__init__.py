"""Embedding a corpus of any size: shards in, one parquet file of ids and vectors per shard out.

``embed_corpus(INPUT, OUT, EmbedJob(...), engine="local"|"ray")`` reads ``.txt``, ``.jsonl`` or
``.parquet`` shards (:mod:`~longembed.corpus.shards`), embeds each with an encoder built once per
process or per Ray actor (:mod:`~longembed.corpus.job`), and writes ``OUT/<shard>.parquet``
atomically (:mod:`~longembed.corpus.writer`).  A rerun embeds only the shards whose output is missing,
damaged or stale (:mod:`~longembed.corpus.plan`), so a killed run resumes where it stopped.  The Ray
engine (:mod:`~longembed.corpus.ray_engine`) runs the same shards on a pool of actors, on this machine
or a cluster.  pyarrow and ray are the ``ray`` extra: ``pip install 'longembed[ray]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.corpus.embed import ENGINES, CorpusResult, embed_corpus
    from longembed.corpus.job import CHUNK_ROWS, EmbedJob, ShardEmbedder, ShardReport
    from longembed.corpus.plan import CorpusPlan, plan_corpus
    from longembed.corpus.ray_engine import RaySettings
    from longembed.corpus.shards import Shard, ShardReader, find_shards
    from longembed.corpus.writer import read_embeddings

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
