"""One shard -> one parquet file, by an encoder loaded once: the unit of work of both engines.

:class:`EmbedJob` is the whole configuration of a corpus run as plain, picklable values, so a Ray
actor on another machine builds the same encoder from it.  :class:`ShardEmbedder` loads that
encoder once and embeds whole shards: called directly by the local engine, and run as a Ray Data
actor (its ``__call__`` takes and returns a batch of shard rows) by the Ray engine.  Both engines
thus read, chunk and encode a shard the same way, and write the same vectors.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from longembed.config import EncoderConfig
from longembed.corpus.shards import Shard, ShardReader, text_unit
from longembed.corpus.writer import shard_metadata, write_vectors
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import UserError
from longembed.loading import default_method

#: Documents encoded per encode() call (and per parquet row group): bounds memory on any shard size;
#: within a chunk the encoder batches by length.
CHUNK_ROWS = 1024
#: How a shard's error begins when its actor could not build the encoder.
LOAD_ERROR = "cannot load the encoder: "


@dataclass
class EmbedJob:
    """What to embed with: ``load_encoder(model, method, max_length, device, **options)``, the
    ``encode`` arguments, which fields hold the id and the text, and how a .txt/.md shard is split
    (``unit``: "file", one document per file, or "line"; None: "file")."""

    model: str = "default"
    method: str | None = None
    max_length: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    batch_size: int = 16
    prompt: str | None = None
    prompt_name: str | None = None
    normalize: bool | None = None  # None: as the model folder says; False: raw pooled vectors
    text_field: str = "text"
    id_field: str = "id"
    unit: str | None = None
    chunk_rows: int = CHUNK_ROWS
    torch_threads: int | None = None  # set in each Ray actor to its share of the cores

    def __post_init__(self) -> None:
        # A local model folder is recorded absolute, so a rerun from another directory matches.
        if Path(self.model).expanduser().exists():
            self.model = str(Path(self.model).expanduser().resolve())
        if self.chunk_rows < 1:
            raise UserError(f"chunk_rows must be at least 1, got {self.chunk_rows}")

    def fingerprint(self, kind: str | None = None) -> dict[str, Any]:
        """Everything that decides the ids and vectors (not device, batch size, chunking or threads):
        the encoder's whole :class:`~longembed.config.EncoderConfig` (a preset expanded, defaults filled
        in), the ``encode`` arguments and, for a text shard (``kind`` .txt/.md) read whole, the unit.
        Recorded in every output file, compared when a run resumes; building it also checks the options,
        before any model is loaded or any actor started.  (A text shard read by line, what every text
        shard was before ``unit`` existed, records no unit: its old outputs stay current.)"""
        method = default_method(self.model) if self.method is None else self.method
        config = EncoderConfig.from_options(self.model, method, self.max_length, **self.options)
        values = {
            "encoder": config.to_dict(),
            "encode": {"prompt": self.prompt, "prompt_name": self.prompt_name, "normalize": self.normalize},
            "fields": {"text": self.text_field, "id": self.id_field},
        }
        if kind is not None and text_unit(self.unit, kind) == "file":
            values["fields"]["unit"] = "file"
        return json.loads(json.dumps(values))  # as it reads back from a file: lists, not tuples

    def load_encoder(self) -> LongContextEncoder:
        return load_encoder(self.model, method=self.method, max_length=self.max_length, device=self.device,
                            **self.options)


@dataclass
class ShardReport:
    """What embedding one shard did (``error``: why it failed, its output left unwritten)."""

    shard: str
    output: str
    documents: int = 0
    skipped_empty_lines: int = 0
    truncated: int = 0
    longest_tokens: int = 0
    seconds: float = 0.0
    worker: str = ""
    error: str = ""

    def as_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ShardReport:
        """From a row of Ray Data's output (numpy scalars become Python values)."""
        values = {f.name: row[f.name] for f in dataclasses.fields(cls)}
        return cls(**{k: v.item() if isinstance(v, np.generic) else v for k, v in values.items()})


class ShardEmbedder:
    """Embeds whole shards into parquet files with one encoder, built once from an :class:`EmbedJob`.

    ``report_load_errors=True`` (Ray actors): an encoder that cannot be built (a method that does not
    fit the model, a missing folder) is not raised, which Ray would bury in an actor's death
    traceback, but returned as every shard's error, starting with :data:`LOAD_ERROR`.
    """

    def __init__(self, job: EmbedJob, report_load_errors: bool = False):
        if job.torch_threads:
            torch.set_num_threads(job.torch_threads)
        self.job = job
        self.fingerprint = job.fingerprint()
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self.load_error = ""
        self.encoder: LongContextEncoder | None = None
        try:
            self.encoder = job.load_encoder()
        except (ValueError, TypeError, OSError, ImportError) as exc:
            if not report_load_errors:
                raise
            self.load_error = f"{LOAD_ERROR}{exc}"

    def embed_shard(self, shard: Shard, output: Path) -> ShardReport:
        """Check every document of ``shard``, then embed it chunk by chunk into ``output``.

        Bad input (ValueError) or a file error (OSError) is returned as the report's ``error`` and
        nothing is written, so the other shards of a run go on.
        """
        report = ShardReport(shard.name, str(output), worker=self.worker, error=self.load_error)
        if self.encoder is None:
            return report
        start = time.perf_counter()
        try:
            source_bytes, source_sha256 = shard.size(), shard.sha256()  # before reading: a later edit shows
            reader = ShardReader(shard, self.job.text_field, self.job.id_field, self.job.unit)
            report.documents = reader.count()  # every document checked before any is encoded
            report.skipped_empty_lines = reader.skipped_empty_lines
            write_vectors(
                output,
                self.encoder.embedding_dim,
                self._encode_chunks(reader, report),
                lambda: shard_metadata(shard, source_bytes, report.documents, self.job.fingerprint(shard.kind),
                                       source_sha256=source_sha256, truncated=report.truncated),
            )
        except (ValueError, OSError) as exc:
            report.error = str(exc)
        report.seconds = time.perf_counter() - start
        return report

    def _encode_chunks(
        self, reader: ShardReader, report: ShardReport
    ) -> Iterator[tuple[list[str], np.ndarray, np.ndarray]]:
        """(ids, vectors, truncated) per chunk of the shard; truncation counted into ``report``."""
        for ids, texts in reader.chunks(self.job.chunk_rows):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # truncation is counted and reported instead
                vectors, stats = self.encoder.encode(
                    texts,
                    batch_size=self.job.batch_size,
                    prompt=self.job.prompt,
                    prompt_name=self.job.prompt_name,
                    normalize_embeddings=self.job.normalize,
                    return_stats=True,
                )
            truncated = np.zeros(len(ids), dtype=bool)
            truncated[stats.truncated_indices] = True
            report.truncated += stats.n_truncated
            report.longest_tokens = max(report.longest_tokens, stats.longest_input_tokens)
            yield ids, vectors, truncated

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Ray Data entry point: a batch of rows (path, name, output), one report row per shard."""
        reports = [
            self.embed_shard(Shard(Path(str(path)), str(name)), Path(str(output))).as_row()
            for path, name, output in zip(batch["path"], batch["name"], batch["output"], strict=True)
        ]
        columns = [f.name for f in dataclasses.fields(ShardReport)]
        return {c: np.array([r[c] for r in reports]) for c in columns}
