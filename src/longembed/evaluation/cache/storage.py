"""The embedding cache on disk: namespaces of shards of content-named, atomically written part files.

The layout and its guarantees are described in the benchmark guide ("How the cache is stored"); what
one encode call does with it is :class:`~longembed.evaluation.cache.CachedEncoder`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from longembed.errors import UserError
from longembed.results.files import atomic_write_bytes, atomic_write_text

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
CACHE_ENV = "LONGEMBED_CACHE_DIR"
#: each namespace folder's record of its fingerprint (what its vectors are)
FINGERPRINT_FILE = "fingerprint.json"
_KEY_DTYPE = "S64"  # hex sha256, stored as bytes so that np.load needs no pickle


def default_cache_dir() -> Path:
    """``$LONGEMBED_CACHE_DIR`` if set, else ``~/.cache/longembed/embeddings``.

    A user-wide default (rather than one inside each run's output folder) because the namespace key
    already says exactly which vectors an entry holds: a rerun into a new output folder is then warm.
    """
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "longembed" / "embeddings"


def text_key(text: str) -> str:
    """The cache key of one text: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings (for hashing)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def fingerprint_key(fingerprint: dict[str, Any]) -> str:
    """The namespace name of a fingerprint: sha256 of its canonical JSON (first 24 hex digits)."""
    return hashlib.sha256(canonical_json(fingerprint).encode()).hexdigest()[:24]


@dataclass
class ShardEntries:
    """The cached entries of one shard: vectors (a (dim,) vector, or a (chunks, dim) matrix for chunked
    documents) and token counts by text key."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    def __contains__(self, key: str) -> bool:
        return key in self.vectors

    def __len__(self) -> int:
        return len(self.vectors)


class CacheNamespace:
    """The cached vectors of one fingerprint, organised in shards (one task/length/side each)."""

    def __init__(self, root: Path, fingerprint: dict[str, Any]):
        self.fingerprint = fingerprint
        self.key = fingerprint_key(fingerprint)
        self.path = Path(root) / self.key
        self._shards: dict[str, ShardEntries] = {}

    def _shard_dir(self, shard: str) -> Path:
        parts = [p for p in shard.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise UserError(f"invalid shard name {shard!r}")
        return self.path.joinpath(*parts)

    def _write_fingerprint(self) -> None:
        target = self.path / FINGERPRINT_FILE
        if not target.exists():
            atomic_write_text(target, json.dumps(self.fingerprint, indent=2, sort_keys=True, default=str) + "\n")

    def _part_files(self, shard: str) -> list[Path]:
        directory = self._shard_dir(shard)
        return sorted(directory.glob("part-*.npz")) if directory.is_dir() else []

    def load(self, shard: str) -> ShardEntries:
        """Every entry of ``shard`` on disk (read once, then kept in memory and updated by ``add``).

        An unreadable part (it can only come from outside this module, e.g. a full disk or a manual
        copy) is logged and skipped: its texts are simply encoded again.
        """
        if shard in self._shards:
            return self._shards[shard]
        entries = ShardEntries()
        for part in self._part_files(shard):
            read = _read_part(part)
            if read is None:
                continue
            keys, vectors, tokens = read
            for i, key in enumerate(keys):
                entries.vectors[key] = vectors[i]
                entries.tokens[key] = int(tokens[i])
        self._shards[shard] = entries
        return entries

    def add(
        self, shard: str, keys: Sequence[str], vectors: np.ndarray | Sequence[np.ndarray], tokens: Sequence[int]
    ) -> Path:
        """Store ``vectors`` (one row per key, or one (chunks, dim) matrix per key) and their token
        counts as a new part, atomically."""
        stacked, rows = stack_entries(vectors)
        if len(rows if rows is not None else stacked) != len(keys) or len(tokens) != len(keys):
            raise UserError(f"{len(keys)} keys, {len(tokens)} token counts and vectors of shape {stacked.shape}")
        self._write_fingerprint()
        key_array = np.asarray(list(keys), dtype=_KEY_DTYPE)
        token_array = np.asarray(list(tokens), dtype=np.int64)
        target = self._shard_dir(shard) / f"part-{_content_digest(key_array, stacked, rows)}.npz"
        arrays = {"keys": key_array, "vectors": stacked, "tokens": token_array}
        if rows is not None:
            arrays["rows"] = rows
        atomic_write_bytes(target, lambda h: np.savez(h, **arrays))
        entries = self.load(shard)
        for key, entry, count in zip(keys, _split_entries(stacked, rows), token_array, strict=True):
            entries.vectors[key] = entry
            entries.tokens[key] = int(count)
        return target

    def compact(self, shard: str) -> None:
        """Merge a shard's parts into one (so a warm run opens one file); a no-op with 0 or 1 part.

        The merged part is written before the old ones are removed, and only parts that were read
        are removed, so a crash or a concurrent writer never loses an entry.
        """
        parts = self._part_files(shard)
        if len(parts) <= 1:
            return
        merged: dict[str, tuple[np.ndarray, int]] = {}
        read_ok: list[Path] = []
        for part in parts:
            read = _read_part(part)
            if read is None:
                continue
            read_ok.append(part)
            keys, vectors, tokens = read
            for i, key in enumerate(keys):
                merged[key] = (vectors[i], int(tokens[i]))
        if not merged:
            return
        keys = sorted(merged)
        if len({merged[k][0].ndim for k in keys}) > 1:
            logger.warning("embedding cache: %s mixes single vectors and chunk matrices; not compacted", shard)
            return
        written = self.add(shard, keys, [merged[k][0] for k in keys], [merged[k][1] for k in keys])
        for part in read_ok:
            if part != written:
                part.unlink(missing_ok=True)

    def shards(self) -> Iterator[str]:
        """Names of the shards that have at least one part on disk."""
        if not self.path.is_dir():
            return
        seen = set()
        for part in sorted(self.path.rglob("part-*.npz")):
            shard = part.parent.relative_to(self.path).as_posix()
            if shard not in seen:
                seen.add(shard)
                yield shard


def stored_dtype(array: np.ndarray) -> type:
    """The dtype the cache keeps an array in: float16 stays float16 (late interaction's token vectors),
    anything else is float32."""
    return np.float16 if np.asarray(array).dtype == np.float16 else np.float32


def stack_entries(vectors: np.ndarray | Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    """(the rows as one (n, dim) array, float32 unless every entry is float16; rows per entry or None when
    every entry is one vector)."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        return np.ascontiguousarray(vectors, dtype=stored_dtype(vectors)), None
    half = len(vectors) > 0 and all(np.asarray(v).dtype == np.float16 for v in vectors)
    entries = [np.asarray(v, dtype=np.float16 if half else np.float32) for v in vectors]
    if all(e.ndim == 1 for e in entries):
        dim = entries[0].shape[0] if entries else 0
        return np.ascontiguousarray(np.stack(entries) if entries else np.zeros((0, dim), np.float32)), None
    if not all(e.ndim == 2 for e in entries):
        raise UserError("cache entries must all be vectors or all be (chunks, dim) matrices")
    rows = np.asarray([len(e) for e in entries], dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(entries)), rows


def _split_entries(stacked: np.ndarray, rows: np.ndarray | None) -> list[np.ndarray]:
    """The entries of a part: its rows, or consecutive blocks of ``rows`` rows."""
    if rows is None:
        return list(stacked)
    return np.split(stacked, np.cumsum(rows)[:-1]) if len(rows) else []


def _content_digest(keys: np.ndarray, vectors: np.ndarray, rows: np.ndarray | None = None) -> str:
    """The name of a part: the first 16 hex digits of sha256(keys, vectors[, rows])."""
    extra = b"" if rows is None else rows.tobytes()
    return hashlib.sha256(keys.tobytes() + vectors.tobytes() + extra).hexdigest()[:16]


def _read_part(path: Path) -> tuple[list[str], list[np.ndarray], np.ndarray] | None:
    """A part's (keys, entries, token counts), or None (logged) if it is unreadable, inconsistent, or
    its content does not match the hash in its name."""
    try:
        with np.load(path, allow_pickle=False) as data:
            key_array = np.asarray(data["keys"], dtype=_KEY_DTYPE)
            keys = [k.decode("ascii") for k in key_array]
            stored = data["vectors"]
            vectors = np.ascontiguousarray(stored, dtype=stored_dtype(stored))
            tokens = np.asarray(data["tokens"], dtype=np.int64)
            rows = np.asarray(data["rows"], dtype=np.int64) if "rows" in data.files else None
    except FileNotFoundError:  # removed by a concurrent compaction
        return None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is skipped, never fatal
        logger.warning("embedding cache: skipping unreadable %s (%s: %s)", path, type(exc).__name__, exc)
        return None
    n_rows = vectors.shape[0] if rows is None else int(rows.sum())
    n_entries = vectors.shape[0] if rows is None else len(rows)
    if vectors.ndim != 2 or len(keys) != n_entries or len(tokens) != len(keys) or n_rows != vectors.shape[0]:
        logger.warning("embedding cache: skipping inconsistent %s", path)
        return None
    if path.name != f"part-{_content_digest(key_array, vectors, rows)}.npz":
        logger.warning("embedding cache: skipping %s: its content does not match the hash in its name", path)
        return None
    return keys, _split_entries(vectors, rows), tokens


class EmbeddingCache:
    """A folder of cache namespaces; ``namespace(fingerprint)`` opens (not yet creates) one."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()

    def namespace(self, fingerprint: dict[str, Any]) -> CacheNamespace:
        """The namespace of ``fingerprint``; its folder is created on the first write."""
        return CacheNamespace(self.root, fingerprint)

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.root)!r})"
