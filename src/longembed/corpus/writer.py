"""The output of a corpus run: one parquet file per input shard, written atomically, and what it records.

``OUT/<shard name>.parquet`` (the shard's relative path with ``.parquet`` for its suffix) holds the
columns ``id`` (string), ``vector`` (fixed_size_list<float32>[dim]) and ``truncated`` (bool: the
document was longer than max_length and was cut), in the shard's order.  The file is written under a
temporary name (``.tmp-...``) and renamed when complete, so a killed run leaves either no file or a
whole one; temporary files are never counted as done and :func:`remove_partial_files` clears them
(so one run at a time may write to an output folder).

The parquet footer records, under the key ``longembed``, the shard's size in bytes and sha256, its
number of documents and the configuration that made the vectors.  A rerun counts a file as done only
when it reads back, holds that many rows, and was made from the same shard bytes (size and sha256) and
configuration: that is what makes a run resumable by shard.  A file written before the sha256 was
recorded (``source_sha256`` None) is embedded again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from longembed.corpus.arrow import pa, pq, require_arrow
from longembed.corpus.shards import Shard
from longembed.errors import MissingFileError, UserError
from longembed.results.files import atomic_write_bytes

OUTPUT_FORMAT = "longembed-corpus-1"
METADATA_KEY = b"longembed"
#: atomic_write_bytes names its temporary files ".tmp-<final name>-<random>".
PARTIAL_PATTERN = ".tmp-*.parquet-*"


def output_file(output_dir: Path, shard: Shard) -> Path:
    """Where ``shard``'s vectors go: its relative path under ``output_dir``, suffix ``.parquet``."""
    return output_dir.joinpath(*PurePosixPath(shard.name).with_suffix(".parquet").parts)


def vector_schema(dim: int) -> Any:
    """id: string, vector: fixed_size_list<float32>[dim], truncated: bool."""
    require_arrow()
    return pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim)), ("truncated", pa.bool_())])


def write_vectors(
    path: Path,
    dim: int,
    chunks: Iterable[tuple[list[str], np.ndarray, np.ndarray]],
    metadata: Callable[[], dict[str, Any]],
) -> int:
    """Write (ids, float32 (n, dim) vectors, bool truncated) chunks as one parquet file, atomically.

    ``metadata()`` is called after the last chunk and stored in the footer.  Returns the rows written.
    """
    schema = vector_schema(dim)
    rows = 0

    def write(handle: Any) -> None:
        nonlocal rows
        writer = pq.ParquetWriter(handle, schema)
        for ids, vectors, truncated in chunks:
            flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
            table = pa.Table.from_arrays(
                [pa.array(ids, pa.string()), pa.FixedSizeListArray.from_arrays(flat, dim), pa.array(truncated)],
                schema=schema,
            )
            writer.write_table(table)
            rows += len(ids)
        writer.add_key_value_metadata({METADATA_KEY: json.dumps(metadata(), sort_keys=True)})
        writer.close()

    atomic_write_bytes(path, write)
    return rows


@dataclass
class WrittenShard:
    """What an output file's footer says about it."""

    rows: int
    documents: int
    source_bytes: int
    config: dict[str, Any]
    source_sha256: str | None = None  # None: written before longembed recorded it


def read_written(path: Path) -> WrittenShard | None:
    """The record of a finished output file; None when the file cannot be read back (damaged).

    A readable parquet file that longembed did not write is a ValueError: it is not overwritten.
    """
    require_arrow()
    try:
        meta = pq.read_metadata(path)
    except (pa.ArrowException, OSError):
        return None
    raw = (meta.metadata or {}).get(METADATA_KEY)
    try:
        record = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        record = {}
    if record.get("format") != OUTPUT_FORMAT:
        raise UserError(f"{path} was not written by longembed embed; move it away or choose another -o folder")
    return WrittenShard(meta.num_rows, record["documents"], record["source_bytes"], record["config"],
                        record.get("source_sha256"))


def shard_metadata(
    shard: Shard, source_bytes: int, documents: int, config: dict[str, Any], *, source_sha256: str, **extra: Any
) -> dict:
    """The footer record of ``shard``'s output (``extra``: counts worth keeping, e.g. truncated)."""
    return {"format": OUTPUT_FORMAT, "shard": shard.name, "source_bytes": source_bytes,
            "source_sha256": source_sha256, "documents": documents, "config": config, **extra}


def read_ids(path: Path) -> list[str]:
    """The id column of one output file."""
    require_arrow()
    return pq.read_table(path, columns=["id"]).column("id").to_pylist()


def stray_outputs(output_dir: Path, expected: Iterable[Path]) -> list[Path]:
    """The output files (``*.parquet``, temporary files aside) under ``output_dir`` other than ``expected``:
    outputs of shards that are no longer in the input."""
    if not output_dir.is_dir():
        return []
    keep = {Path(p) for p in expected}
    return sorted(
        path for path in output_dir.rglob("*.parquet") if path not in keep and not path.name.startswith(".")
    )


def remove_partial_files(output_dir: Path) -> list[Path]:
    """Delete the temporary files a killed run left in ``output_dir``; the paths deleted."""
    if not output_dir.is_dir():
        return []
    partial = sorted(output_dir.rglob(PARTIAL_PATTERN))
    for path in partial:
        path.unlink(missing_ok=True)
    return partial


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    """(ids, float32 (n, dim) vectors) of one output file, or of every output file under a folder in
    name order (temporary files excluded)."""
    require_arrow()
    path = Path(path)
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*.parquet") if not p.name.startswith(".")
    )
    if not files:
        raise MissingFileError(f"no embeddings (.parquet) at {path}")
    ids: list[str] = []
    blocks = []
    for file in files:
        table = pq.read_table(file, columns=["id", "vector"])
        dim = table.schema.field("vector").type.list_size
        ids.extend(table.column("id").to_pylist())
        flat = table.column("vector").combine_chunks().flatten()
        blocks.append(np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim))
    return ids, np.concatenate(blocks)
