"""The encode loop of the embedding cache: look texts up, encode the missing ones in chunks, store them.

:mod:`longembed.evaluation.cache` owns the storage format (namespaces, shards, part files); this
module owns what one call does with it, in three steps:

1. **plan** (:func:`plan_lookup`): the distinct texts, which are cached, and which to encode (longest
   first, ties by key: deterministic), cut into chunks (:func:`plan_chunks`);
2. **loop** (:func:`encode_missing`): encode each chunk and write it to the cache as soon as it is
   done, so a run killed mid-way loses at most one chunk;
3. **assemble**: every text's vector (or chunk matrix) in input order, with what it cost
   (:class:`CachedEncoding`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from longembed.errors import UserError
from longembed.evaluation.cache import CacheNamespace, ShardEntries, stack_entries, text_key


@dataclass
class CachedEncoding:
    """The result of :func:`encode_cached`: vectors in input order, plus what it cost.

    For chunked documents ``vectors`` holds every text's chunk vectors one after another and ``rows``
    how many each text has (None: one vector per text).
    """

    vectors: np.ndarray
    tokens: np.ndarray
    n_unique: int
    n_cached: int
    n_encoded: int
    encode_seconds: float
    rows: np.ndarray | None = None

    def owners(self) -> np.ndarray:
        """For each row of ``vectors``, the index of its text."""
        counts = np.ones(len(self.tokens), dtype=np.int64) if self.rows is None else self.rows
        return np.repeat(np.arange(len(counts)), counts)


def plan_chunks(lengths: Sequence[int], chunk_size: int, chunk_chars: int) -> list[tuple[int, int]]:
    """Split a list of texts (given their lengths) into [start, end) chunks.

    At most ``chunk_size`` texts and, past the first text, at most ``chunk_chars`` characters per
    chunk. Greedy from the start, so the chunks of a suffix that begins at a chunk boundary are the
    same as in the full list: a resumed run encodes exactly the batches an uninterrupted run would.
    """
    chunks: list[tuple[int, int]] = []
    start = 0
    while start < len(lengths):
        end, chars = start, 0
        while end < len(lengths) and end - start < chunk_size and (end == start or chars + lengths[end] <= chunk_chars):
            chars += lengths[end]
            end += 1
        chunks.append((start, end))
        start = end
    return chunks


@dataclass
class LookupPlan:
    """What one call has to do: the texts' keys in input order, the distinct texts by key, the keys
    found in the cache and those to encode (in encoding order)."""

    keys: list[str]
    unique: dict[str, str]
    cached: set[str]
    missing: list[str]


def plan_lookup(texts: Sequence[str], keys: Sequence[str] | None, entries: ShardEntries) -> LookupPlan:
    """Keys (the texts' own, or ``keys``), distinct texts, and which of them are cached or missing."""
    keys = [text_key(t) for t in texts] if keys is None else list(keys)
    if len(keys) != len(texts):
        raise UserError(f"{len(keys)} keys for {len(texts)} texts")
    unique: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        unique.setdefault(key, text)
    cached = {k for k in unique if k in entries}
    missing = sorted((k for k in unique if k not in cached), key=lambda k: (-len(unique[k]), k))
    return LookupPlan(keys, unique, cached, missing)


def encode_missing(
    plan: LookupPlan,
    encode: Callable[[list[str]], np.ndarray | list[np.ndarray]],
    count_tokens: Callable[[list[str]], list[int]],
    store: Callable[[list[str], np.ndarray | list[np.ndarray], list[int]], None],
    chunk_size: int,
    chunk_chars: int,
    progress: Callable[[float], None] | None,
    weight: Callable[[str], float] | None = None,
) -> tuple[ShardEntries, float]:
    """Encode the plan's missing texts chunk by chunk, ``store`` each chunk as it is done; returns the
    computed entries and the seconds spent encoding.  ``progress`` gets, after each chunk, the weight
    of the texts it did (``weight`` of each, default 1: a count)."""
    computed = ShardEntries()
    seconds = 0.0
    for start, end in plan_chunks([len(plan.unique[k]) for k in plan.missing], chunk_size, chunk_chars):
        chunk_keys = plan.missing[start:end]
        chunk_texts = [plan.unique[k] for k in chunk_keys]
        began = time.perf_counter()
        encoded = encode(chunk_texts)
        seconds += time.perf_counter() - began
        vectors = (
            np.asarray(encoded, dtype=np.float32) if isinstance(encoded, np.ndarray)
            else [np.asarray(e, dtype=np.float32) for e in encoded]
        )
        if len(vectors) != len(chunk_texts):
            raise UserError(f"the encoder returned {len(vectors)} vectors for {len(chunk_texts)} texts")
        tokens = count_tokens(chunk_texts)
        store(chunk_keys, vectors, tokens)
        for i, key in enumerate(chunk_keys):
            computed.vectors[key] = vectors[i]
            computed.tokens[key] = int(tokens[i])
        if progress is not None:
            done = set(chunk_keys)
            progress(sum(_weight(weight, plan.unique[k]) for k in plan.keys if k in done))
    return computed, seconds


def _weight(weight: Callable[[str], float] | None, text: str) -> float:
    return 1 if weight is None else weight(text)


def encode_cached(
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray | list[np.ndarray]],
    count_tokens: Callable[[list[str]], list[int]],
    namespace: CacheNamespace | None,
    shard: str,
    chunk_size: int = 64,
    chunk_chars: int = 200_000,
    progress: Callable[[float], None] | None = None,
    keys: Sequence[str] | None = None,
    weight: Callable[[str], float] | None = None,
    before_encoding: Callable[[], None] | None = None,
) -> CachedEncoding:
    """Vectors of ``texts`` (in order), from the cache where possible, encoding the rest in chunks.

    ``encode`` returns one vector per text, or one (chunks, dim) matrix per text (chunked documents).
    ``keys`` replaces the texts' own keys (:func:`~longembed.evaluation.cache.text_key`) when a vector
    depends on more than the text (e.g. the chunk spans a task gives).

    Identical texts are encoded once. Missing texts are encoded in chunks (:func:`plan_chunks`), each
    written to the cache as soon as it is done. With ``namespace=None`` nothing is read or written.
    ``progress(n)`` is called after each chunk with the weight of the texts done (``weight(text)``
    each; default 1, a count); ``before_encoding()`` once before the first text is encoded (not at all
    when everything is cached): a progress bar restarts its clock there, so loading the weights does
    not count as the first chunk's time.
    """
    entries = namespace.load(shard) if namespace is not None else ShardEntries()
    plan = plan_lookup(texts, keys, entries)
    if progress is not None and plan.cached:
        progress(sum(_weight(weight, plan.unique[k]) for k in plan.keys if k in plan.cached))
    if before_encoding is not None and plan.missing:
        before_encoding()

    def store(chunk_keys: list[str], vectors: np.ndarray | list[np.ndarray], tokens: list[int]) -> None:
        if namespace is not None:
            namespace.add(shard, chunk_keys, vectors, tokens)

    computed, seconds = encode_missing(plan, encode, count_tokens, store, chunk_size, chunk_chars, progress, weight)
    if namespace is not None and plan.missing:
        namespace.compact(shard)
    found = [(computed if key in computed else entries) for key in plan.keys]
    vectors, rows = stack_entries([source.vectors[key] for source, key in zip(found, plan.keys, strict=True)])
    return CachedEncoding(
        vectors=vectors,
        tokens=np.asarray([source.tokens[key] for source, key in zip(found, plan.keys, strict=True)], dtype=np.int64),
        n_unique=len(plan.unique),
        n_cached=len(plan.cached),
        n_encoded=len(plan.missing),
        encode_seconds=seconds,
        rows=rows,
    )


def count_missing(
    texts: Sequence[str], namespace: CacheNamespace | None, shard: str, keys: Sequence[str] | None = None
) -> tuple[int, list[str]]:
    """(number of distinct texts already cached, the distinct texts that are not), for estimates;
    ``keys`` as in :func:`encode_cached`."""
    entries = namespace.load(shard) if namespace is not None else ShardEntries()
    plan = plan_lookup(texts, keys, entries)
    missing = set(plan.missing)
    return len(plan.cached), [plan.unique[k] for k in plan.unique if k in missing]
