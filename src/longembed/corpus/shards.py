"""The input of a corpus run: its shards, found in a file or a folder, and their documents read as (id, text).

A shard is one file: ``.txt`` or ``.md`` (text; by default the whole file is one document, its id the
shard name without suffix; with ``unit="line"`` one document per line, empty lines skipped and counted,
the id of line n ``"<shard name without suffix>:<n>"``), ``.jsonl`` (one JSON object per line, with an
id field and a text field) or ``.parquet`` (an id column and a text column).  A folder is read
recursively; every file in it must be a shard of one type, so a stray file is an error rather than
a corpus silently missing it (names starting with ``.`` or ``_``, such as ``_SUCCESS`` or
temporary files, are ignored).  A file reached under two names (a symbolic or hard link) is an error
naming both: it would be embedded twice, its ids written twice.

Every document is checked before any is embedded: a missing or non-string field, an empty text,
invalid Unicode or an id used twice in a shard is a ValueError naming the file and line (or row).
jsonl and parquet ids may be strings or integers; they are written as strings.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from longembed.corpus.arrow import pa, pq, require_arrow
from longembed.errors import MissingFileError, UserError
from longembed.inputs import unicode_problem
from longembed.textfiles import (
    binary_lines,
    lines_through,
    not_utf8_error,
    parse_json_line,
    read_utf8,
    utf8_lines,
)

#: Shard types by file suffix (lower case).
SHARD_SUFFIXES = (".txt", ".md", ".jsonl", ".parquet")
#: Plain-text shards: read whole (one document per file) or by line (``unit``).
TEXT_SUFFIXES = (".txt", ".md")
#: How a text shard is split into documents: the whole file, or one per line.
UNITS = ("file", "line")
#: Names starting with these are not shards (hidden files, ``_SUCCESS``, temporary files).
IGNORED_PREFIXES = (".", "_")
#: Bytes read at a time when hashing a shard.
HASH_BLOCK = 1 << 20


@dataclass(frozen=True)
class Shard:
    """One input file: its path and its name relative to the input (the output keeps that name)."""

    path: Path
    name: str  # POSIX path relative to the input folder, e.g. "2024/part-001.jsonl"

    @property
    def kind(self) -> str:
        """The shard type: ".txt", ".jsonl" or ".parquet"."""
        return Path(self.name).suffix.lower()

    @property
    def id_prefix(self) -> str:
        """The name without its suffix: ``.txt`` ids are ``"<id_prefix>:<line>"``."""
        return str(PurePosixPath(self.name).with_suffix(""))

    def size(self) -> int:
        """The file's size in bytes (recorded with its vectors, so a changed shard is embedded again)."""
        return self.path.stat().st_size

    def sha256(self) -> str:
        """The hex sha256 of the file's bytes (recorded with its vectors: a shard edited in place, even to
        the same size, is embedded again)."""
        digest = hashlib.sha256()
        with self.path.open("rb") as handle:
            for block in iter(lambda: handle.read(HASH_BLOCK), b""):
                digest.update(block)
        return digest.hexdigest()


def find_shards(input_path: Path) -> list[Shard]:
    """The shards of ``input_path`` (a shard file, or a folder of shards of one type), sorted by name.

    Errors: a missing path, a file that is not a shard type, a folder holding other files or more
    than one shard type, one file under two names (a link), or no shard at all.
    """
    input_path = Path(input_path)
    if input_path.is_file():
        if input_path.suffix.lower() not in SHARD_SUFFIXES:
            raise UserError(f"{input_path}: unsupported shard type {input_path.suffix!r}; use {_types()}")
        return [Shard(input_path.resolve(), input_path.name)]
    if not input_path.is_dir():
        raise MissingFileError(f"input not found: {input_path}")
    shards, others = [], []
    for path in sorted(input_path.rglob("*")):
        relative = path.relative_to(input_path)
        if any(part.startswith(IGNORED_PREFIXES) for part in relative.parts) or not path.is_file():
            continue
        if path.suffix.lower() in SHARD_SUFFIXES:
            shards.append(Shard(path.resolve(), relative.as_posix()))
        else:
            others.append(relative.as_posix())
    if others:
        raise UserError(
            f"{input_path} holds {len(others)} file(s) that are not shards ({', '.join(others[:5])}); every "
            f"file must be {_types()} (names starting with '.' or '_' are ignored)"
        )
    if not shards:
        raise UserError(f"{input_path}: no shards found ({_types()})")
    kinds: dict[str, list[str]] = {}
    for shard in shards:
        kinds.setdefault("text" if shard.kind in TEXT_SUFFIXES else shard.kind, []).append(shard.name)
    if len(kinds) > 1:
        found = "; ".join(f"{len(names)} {kind} ({', '.join(names[:3])})" for kind, names in sorted(kinds.items()))
        raise UserError(f"{input_path} mixes shard types: {found}; put one type of shard in a folder")
    _refuse_linked_shards(input_path, shards)
    return shards


def _refuse_linked_shards(input_path: Path, shards: list[Shard]) -> None:
    """A ValueError when two shard names are one file (a symbolic or hard link to another shard)."""
    files: dict[tuple[int, int], Shard] = {}
    for shard in shards:
        stat = shard.path.stat()
        first = files.setdefault((stat.st_dev, stat.st_ino), shard)
        if first is not shard:
            raise UserError(
                f"{input_path}: {first.name} and {shard.name} are the same file ({first.path}, through a link); "
                "it would be embedded twice: remove one of the two names"
            )


def _types() -> str:
    return ".txt or .md (text), .jsonl or .parquet"


def text_unit(unit: str | None, kind: str) -> str | None:
    """How a shard of type ``kind`` is split: for .txt/.md ``unit`` ("file", the default, or "line"); None
    for .jsonl (a record per line) and .parquet (a row each), where ``unit="file"`` is an error."""
    if unit is not None and unit not in UNITS:
        raise UserError(f"unit must be one of {UNITS}, got {unit!r}")
    if kind in TEXT_SUFFIXES:
        return unit or "file"
    if unit == "file":
        raise UserError(f"--unit file applies to .txt/.md files; a {kind} file holds one document per "
                         f"{'row' if kind == '.parquet' else 'line'}")
    return None


class ShardReader:
    """The documents of one shard as (id, text), checked, in file order.

    ``unit`` splits a .txt/.md shard: "file" (default) one document, "line" one per line.
    ``skipped_empty_lines`` counts the empty lines of a text shard read by line, passed over by the last read.
    """

    def __init__(self, shard: Shard, text_field: str = "text", id_field: str = "id", unit: str | None = None):
        self.shard = shard
        self.text_field = text_field
        self.id_field = id_field
        self.unit = text_unit(unit, shard.kind)
        self.skipped_empty_lines = 0

    def _records(self) -> Iterator[tuple[str, str, str]]:
        if self.unit == "file":
            return self._file()
        return {".txt": self._txt, ".md": self._txt, ".jsonl": self._jsonl, ".parquet": self._parquet}[
            self.shard.kind
        ]()

    def documents(self) -> Iterator[tuple[str, str]]:
        """Every document as (id, text); a ValueError naming file and line at the first bad one."""
        self.skipped_empty_lines = 0
        seen: dict[str, str] = {}
        for where, doc_id, text in self._records():
            if doc_id in seen:
                raise UserError(f"{where}: duplicate id {doc_id!r} (first at {seen[doc_id]})")
            seen[doc_id] = where
            for what, value in (("text", text), ("id", doc_id)):
                problem = unicode_problem(value)
                if problem:
                    raise UserError(f"{where}: the {what} {problem}")
            yield doc_id, text

    def ids(self) -> Iterator[tuple[str, str]]:
        """(where, id) of every document in file order, without :meth:`documents`' duplicate and Unicode
        checks (what finding an id across shards needs)."""
        for where, doc_id, _ in self._records():
            yield where, doc_id

    def count(self) -> int:
        """Read the whole shard, checking every document; the number of documents."""
        return sum(1 for _ in self.documents())

    def chunks(self, rows: int) -> Iterator[tuple[list[str], list[str]]]:
        """The documents as (ids, texts) lists of at most ``rows`` each, in file order."""
        ids: list[str] = []
        texts: list[str] = []
        for doc_id, text in self.documents():
            ids.append(doc_id)
            texts.append(text)
            if len(ids) == rows:
                yield ids, texts
                ids, texts = [], []
        if ids:
            yield ids, texts

    def _file(self) -> Iterator[tuple[str, str, str]]:
        """The whole text file as one document, its id the shard name without suffix."""
        path = self.shard.path
        text = read_utf8(path)
        if not text.strip():
            raise UserError(f"{path}: the file is empty (no text to embed); drop it or add its text")
        yield str(path), self.shard.id_prefix, text

    def _txt(self) -> Iterator[tuple[str, str, str]]:
        """Lines numbered as ``str.splitlines`` numbers them (as ``longembed embed FILE.txt`` reads them).

        The file is decoded a line at a time (:mod:`longembed.textfiles`), so bad UTF-8 is reported at
        the line that holds it, with its byte offset.
        """
        path = self.shard.path
        number = offset = 0
        for raw in binary_lines(path):
            try:
                physical = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = number + lines_through(raw[: exc.start])  # splitlines' breaks on this line count
                raise not_utf8_error(path, line, offset, raw, exc) from None
            offset += len(raw)
            for line in physical.splitlines():
                number += 1
                if line.strip():
                    yield f"{path}:{number}", f"{self.shard.id_prefix}:{number}", line
                else:
                    self.skipped_empty_lines += 1

    def _jsonl(self) -> Iterator[tuple[str, str, str]]:
        path = self.shard.path
        for number, line in utf8_lines(path):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            record = parse_json_line(line, where)
            if not isinstance(record, dict):
                raise UserError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield where, self._id(record, where), self._text(record, where)

    def _parquet(self) -> Iterator[tuple[str, str, str]]:
        require_arrow()
        path = self.shard.path
        try:
            handle = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise UserError(f"{path}: not a readable parquet file ({exc})") from None
        schema = handle.schema_arrow
        for field, what in ((self.id_field, "id"), (self.text_field, "text")):
            if field not in schema.names:
                raise UserError(f"{path}: no column {field!r} (the {what}; columns: {schema.names})")
        if not _is_text(schema.field(self.text_field).type):
            raise UserError(f"{path}: column {self.text_field!r} is {schema.field(self.text_field).type}, not string")
        id_type = schema.field(self.id_field).type
        if not (_is_text(id_type) or pa.types.is_integer(id_type)):
            raise UserError(f"{path}: column {self.id_field!r} is {id_type}; ids must be strings or integers")
        row = 0
        for batch in handle.iter_batches(batch_size=4096, columns=[self.id_field, self.text_field]):
            columns = batch.to_pydict()
            for doc_id, text in zip(columns[self.id_field], columns[self.text_field], strict=True):
                row += 1
                where = f"{path}: row {row} (counting from 1)"
                record = {self.id_field: doc_id, self.text_field: text}
                yield where, self._id(record, where), self._text(record, where)

    def _id(self, record: dict[str, Any], where: str) -> str:
        value = record.get(self.id_field)
        if self.id_field not in record or value is None:
            raise UserError(
                f"{where}: missing field {self.id_field!r} (every .jsonl or .parquet document needs an id; "
                "--id-field names the field)"
            )
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str) or not value:
            raise UserError(f"{where}: the id {value!r} is not a non-empty string or an integer")
        return value

    def _text(self, record: dict[str, Any], where: str) -> str:
        value = record.get(self.text_field)
        if not isinstance(value, str):
            what = "missing" if value is None else f"a {type(value).__name__}"
            raise UserError(f"{where}: expected a string field {self.text_field!r}, got {what}")
        if not value.strip():
            raise UserError(f"{where}: the {self.text_field!r} text is empty; drop the line")
        return value


def _is_text(arrow_type: Any) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or (
        hasattr(pa.types, "is_string_view") and pa.types.is_string_view(arrow_type)
    )
