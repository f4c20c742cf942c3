"""``longembed index --engine ray``: the documents embedded by a pool of Ray actors, the rows written
by the build's process into the same table, in the same order, as a local build.

Each actor holds one encoder and a :class:`~longembed.search.embedding.DocumentEmbedder` (the class
the local build uses) and turns one batch of whole documents into chunk rows; the batches are the
local build's batches, handed out in order and appended in order (``ActorPool.map`` keeps it), so the
table equals a local build's row for row.  Ray is started and checked by the corpus engine's helpers
(:mod:`longembed.corpus.ray_engine`): ``--ray-address`` or ``$RAY_ADDRESS`` joins a cluster, else a
local Ray starts with the actors' CPUs.

Past one machine: the actors run on the cluster's nodes and only the rows travel back to the driver,
which is the only writer of the index (Lance allows one writer per commit; a single driver keeps the
build's order and its crash-safety).  The index itself can live on object storage (``--index
s3://bucket/my-index``: LanceDB reads and writes it there), so searchers on other machines open it
without copying; the documents' texts must be readable by the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from longembed.corpus.ray_engine import RaySettings, check_resources, connect, disconnect, ray
from longembed.retrieval.strategy import Strategy
from longembed.search.embedding import DocumentEmbedder
from longembed.search.sources import Document
from longembed.search.store import ChunkRows
from longembed.search.strategy_encoder import load_strategy_encoder


class _Embedder:
    """A Ray actor: one encoder, batches of documents -> chunk rows."""

    def __init__(self, strategy: Strategy, batch_size: int, device: str | None, threads: int) -> None:
        torch.set_num_threads(threads)  # in the actor's own process
        encoder = None if strategy.lexical_only else load_strategy_encoder(strategy, device)
        self.embedder = DocumentEmbedder(strategy, encoder, batch_size)

    def rows(self, documents: list[Document]) -> ChunkRows:
        return self.embedder.rows(documents)


class RayBuild:
    """The build's engine on Ray (``build_index(..., engine=RayBuild(...))``)."""

    def __init__(self, actors: int = 1, cpus_per_actor: float = 1.0, address: str | None = None,
                 device: str | None = None) -> None:
        self.settings = RaySettings(actors=actors, cpus_per_actor=cpus_per_actor, address=address)
        self.device = device

    def __call__(self, documents: Sequence[Document], strategy: Strategy, batch_size: int,
                 batch_documents: int, append: Callable[[ChunkRows], None], progress: Callable[[int], Any]) -> None:
        if not documents:
            return
        started = connect(self.settings)
        try:
            check_resources(self.settings)
            actor = ray.remote(num_cpus=self.settings.cpus_per_actor)(_Embedder)
            pool = ray.util.ActorPool([
                actor.remote(strategy, batch_size, self.device, self.settings.torch_threads)
                for _ in range(self.settings.actors)
            ])
            batches = [list(documents[i : i + batch_documents]) for i in range(0, len(documents), batch_documents)]
            for batch, rows in zip(batches, pool.map(lambda a, b: a.rows.remote(b), batches), strict=True):
                append(rows)
                progress(len(batch))
        finally:
            if started:
                disconnect()
