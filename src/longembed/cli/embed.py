"""``longembed embed``: embed a .txt/.md file (the whole file one document, or with ``--unit line`` one per
line) or a .jsonl file (one document per line, field ``text``) into a .npy matrix; a folder of shards, a
.parquet file or ``--engine ray`` go to :mod:`longembed.cli.embed_corpus`.

The output is checked before the model loads: an existing file needs ``--overwrite``, and the folder it goes
into must take a new file (tried for real, since ``os.access`` says yes to root on folders it cannot write).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from longembed.cli.dtype_flag import resolve_dtype_flag
from longembed.cli.embed_corpus import is_corpus_run, reject_ray_flags, run_corpus
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options
from longembed.corpus.shards import TEXT_SUFFIXES, text_unit
from longembed.encoder import load_encoder
from longembed.errors import MissingFileError, OutputExistsError, UserError, UserFileError
from longembed.inputs import unicode_problem
from longembed.results.files import atomic_write_bytes, unwritable_folder
from longembed.tasks.base import iter_jsonl
from longembed.textfiles import read_utf8


def read_text_lines(path: Path) -> list[str]:
    """The file's lines as UTF-8; an error naming the file, line and byte if it is not UTF-8."""
    return read_utf8(path).splitlines()


def read_documents(path: Path, field: str = "text", unit: str | None = None) -> list[str]:
    """Documents from a .txt/.md file (``unit`` "file", the default: the whole file; "line": one per
    non-empty line) or a .jsonl file (one per line), with errors naming file:line."""
    if not path.is_file():
        raise MissingFileError(f"input file not found: {path}")
    suffix = path.suffix.lower()
    docs: list[str] = []
    if suffix in TEXT_SUFFIXES and text_unit(unit, suffix) == "file":
        text = read_utf8(path)
        if text.strip():
            _check_text(text, str(path))
            docs.append(text)
    elif suffix in TEXT_SUFFIXES:
        lines = read_text_lines(path)
        for number, line in enumerate(lines, start=1):
            if line.strip():
                _check_text(line, f"{path}:{number}")
                docs.append(line)
        if len(docs) < len(lines):
            warnings.warn(f"{path}: skipped {len(lines) - len(docs)} empty line(s)", stacklevel=2)
    elif suffix == ".jsonl":
        text_unit(unit, suffix)  # --unit file is an error here
        for number, record in iter_jsonl(path):
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise UserError(f"{path}:{number}: expected an object with a string field {field!r}")
            if not record[field].strip():
                raise UserError(f"{path}:{number}: the {field!r} text is empty; drop the line")
            _check_text(record[field], f"{path}:{number}")
            docs.append(record[field])
    else:
        raise UserError(f"{path}: unsupported input type {suffix!r}; use .txt or .md (text) or .jsonl")
    if not docs:
        raise UserError(f"{path}: no documents found")
    return docs


def _check_text(text: str, where: str) -> None:
    problem = unicode_problem(text)
    if problem:
        raise UserError(f"{where}: the text {problem}")


def output_path(path: Path, overwrite: bool = False) -> Path:
    """The .npy file to write, checked before any work: .npy added when missing; a folder, an existing
    file without ``overwrite``, or a folder that cannot take a new file is a clear error now rather than
    after the whole encode."""
    if path.is_dir():
        raise UserError(f"-o {path} is a folder; give a file name, e.g. {path / 'vectors.npy'}")
    if path.suffix != ".npy":
        path = path.with_name(path.name + ".npy")
    if path.is_dir():
        raise UserError(f"-o {path} is a folder; give a file name, e.g. {path / 'vectors.npy'}")
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{path} exists; pass --overwrite to replace it")
    problem = unwritable_folder(path.parent)
    if problem:
        raise UserFileError(f"cannot write {path}: {problem}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserFileError(f"cannot write {path}: the file is not writable")
    return path


def run(args: argparse.Namespace) -> int:
    resolve_method(args)
    resolve_dtype_flag(args)  # in this process: every shard (and Ray actor) embeds in the dtype chosen here
    if is_corpus_run(args):
        return run_corpus(args)
    reject_ray_flags(args)
    output = output_path(args.output, args.overwrite)
    docs = read_documents(args.input, args.field, args.unit)
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                           **encoder_options(args))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # overflow is reported in the summary below
        vectors, stats = encoder.encode(
            docs,
            batch_size=args.batch_size,
            show_progress_bar=True,
            prompt=args.prompt,
            prompt_name=args.prompt_name,
            normalize_embeddings=False if args.no_normalize else None,
            return_stats=True,
        )
    elapsed = time.perf_counter() - start
    atomic_write_bytes(output, lambda handle: np.save(handle, vectors))
    print(f"{encoder!r}")
    print(
        f"embedded {len(docs)} documents ({stats.n_sequences} sequences) -> {output} "
        f"{vectors.shape[0]}x{vectors.shape[1]} float32 in {elapsed:.1f}s; longest input {stats.longest_input_tokens} tokens"
    )
    if stats.n_truncated:
        print(
            f"truncated: {stats.n_truncated} document(s) exceeded --max-length {encoder.max_length} tokens "
            f"(first indices {stats.truncated_indices[:10]}); raise --max-length or use --on-overflow error"
        )
    else:
        print("truncated: none")
    return 0
