"""Document vectors an ``eval`` or ``advise`` run stored in the embedding cache, found by their text.

``longembed index --from-advice`` reads them here, so a document advise has just embedded is not
embedded again; nothing is written (a miss is embedded by the index build itself).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.encoder_protocol import Encoder
from longembed.evaluation.cache.storage import (
    FINGERPRINT_FILE,
    CacheNamespace,
    EmbeddingCache,
    canonical_json,
    text_key,
)
from longembed.evaluation.cache.wrapper import CachedEncoder, chunk_quantity

#: the last part of the cache shards that hold a task's documents ("<task>/<length>/documents")
DOCUMENTS_SHARD = "documents"


class CachedDocumentVectors:
    """Read-only lookup of document vectors (one per text, or a text's chunk vectors) in the namespace
    that ``eval`` and ``advise`` fill for ``encoder`` with this document ``prompt``, its own temperature,
    unit vectors, and ``chunking`` (None: one vector per document) cut late or naive.

    Every task's document shard of that namespace is searched: the index does not know which task the
    texts came from, and the key (the text's sha256 within a namespace that fixes the model's files,
    configuration, prompt, code and library versions) already says the vector is the one it would compute.
    """

    def __init__(self, encoder: Encoder, cache_dir: str | Path | None, prompt: str,
                 chunking: str | None = None, late: bool = True) -> None:
        cached = CachedEncoder(encoder, cache_dir, show_progress=False, log=None)
        quantity = "embedding" if chunking is None else chunk_quantity(chunking, late)
        own = cached.namespace(prompt, None, True, quantity)
        self.namespaces: list[CacheNamespace] = [] if own is None or cached.cache is None else \
            equivalent_namespaces(cached.cache, own.fingerprint)
        self._vectors: dict[str, np.ndarray] | None = None

    def vectors(self) -> dict[str, np.ndarray]:
        """Text key -> vector (or chunk matrix) of every cached document of the namespaces (read once)."""
        if self._vectors is None:
            self._vectors = {}
            for namespace in self.namespaces:
                for shard in namespace.shards():
                    if shard.rsplit("/", 1)[-1] == DOCUMENTS_SHARD:
                        self._vectors.update(namespace.load(shard).vectors)
        return self._vectors

    def __len__(self) -> int:
        return len(self.vectors())

    def __call__(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Each text's cached vector (a (dim,) vector, or a (chunks, dim) matrix), None where it has none."""
        found = self.vectors()
        return [found.get(text_key(text)) for text in texts]


def equivalent_namespaces(cache: EmbeddingCache, fingerprint: dict[str, Any]) -> list[CacheNamespace]:
    """The namespaces of ``cache`` whose vectors are those ``fingerprint`` names: its own, and those that
    differ only in how the encoder was asked for what it resolved to (advise loads a truncating model
    with no max_length, its advice records the length it resolved: the same model, the same vectors)."""
    wanted = _resolved_form(fingerprint)
    found = []
    for path in sorted(cache.root.glob(f"*/{FINGERPRINT_FILE}")):
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(recorded, dict) and _resolved_form(recorded) == wanted:
            found.append(cache.namespace(recorded))
    return found


def _resolved_form(fingerprint: dict[str, Any]) -> str:
    """The fingerprint as canonical JSON, the config's settings that ``resolved`` states (what the encoder
    made of them) left out."""
    resolved = fingerprint.get("resolved") or {}
    config = {k: v for k, v in (fingerprint.get("config") or {}).items() if k not in resolved}
    return canonical_json({**fingerprint, "config": config})
