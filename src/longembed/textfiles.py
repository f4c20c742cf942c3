"""Text files read line by line as UTF-8, with an error that names the true line and byte of bad input.

Python's text mode decodes a file in blocks of 8 KB, ahead of the lines handed out, so a
``UnicodeDecodeError`` surfaces at whichever line the reader was on when the block holding the bad
bytes was decoded: a count of lines read names the wrong line (line 150 reported as 113, 146 or 93).
Here the file is read as bytes, one line at a time, and each line decoded on its own: the error names
the 1-based line that holds the bad bytes and their offset in the file, e.g.
``data.jsonl:150: not UTF-8 text (byte 0xff at byte offset 10493 of the file)``.

Lines end at ``\\n`` (a ``\\r\\n`` ending leaves its ``\\r`` on the line, which ``str.strip`` and JSON
ignore).  A ``.gz`` file is read decompressed; its offsets count decompressed bytes, and a file that is
not gzip, or is cut short, is a ValueError naming it and the line reached (not gzip's bare ``EOFError``).
A JSON line is parsed by :func:`parse_json_line`: whatever it holds, a ValueError naming file and line.
A ``.jsonl`` file of objects is read by :func:`jsonl_records` (every line's object or its problem, for a
reader that reports them all) or :func:`jsonl_objects` (the first problem raised).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from longembed.errors import UserError


def open_binary(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes; a ``.gz`` file decompressed."""
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115


def binary_lines(path: Path) -> Iterator[bytes]:
    """The raw lines of ``path`` (a ``.gz`` file decompressed); a damaged ``.gz`` is a ValueError naming the
    file and the line where decompression failed."""
    number = 0
    try:
        with open_binary(path) as handle:
            for number, raw in enumerate(handle, start=1):  # noqa: B007 - read after the loop, on an error
                yield raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise UserError(
            f"{path}:{number + 1}: not a readable gzip file ({exc or 'cut short'}); compress it again, or "
            "drop the .gz suffix if it is plain text"
        ) from None


def parse_json_line(line: str, where: str) -> Any:
    """One JSON value from ``line``; anything that is not one (bad syntax, nesting too deep for the parser,
    an integer of more digits than Python converts) is a ValueError naming ``where`` (file:line)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise UserError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer beyond sys.get_int_max_str_digits()
        raise UserError(f"{where}: not valid JSON ({exc})") from None


@dataclass(frozen=True)
class JsonlRecord:
    """One non-blank line of a ``.jsonl`` file: where it is (``file:line``) and its JSON object, or why it
    holds none (``problem``: one line naming file and line)."""

    where: str
    record: dict[str, Any] | None
    problem: str | None = None


def jsonl_records(path: Path | str, lines: Iterable[tuple[int, str]] | None = None) -> Iterator[JsonlRecord]:
    """Every non-blank line of the ``.jsonl`` file ``path`` as a :class:`JsonlRecord` (``lines``: its
    (number, text) lines when already read; default :func:`utf8_lines`, whose bad bytes raise)."""
    for number, line in utf8_lines(path) if lines is None else lines:
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = parse_json_line(line, where)
        except ValueError as exc:
            yield JsonlRecord(where, None, str(exc))
            continue
        if not isinstance(record, dict):
            yield JsonlRecord(where, None, f"{where}: expected a JSON object, got {type(record).__name__}")
            continue
        yield JsonlRecord(where, record)


def jsonl_objects(path: Path | str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) of every non-blank line of a ``.jsonl`` file; the first line that is not
    a JSON object (or not UTF-8) is a ValueError naming file and line."""
    for line in jsonl_records(path):
        if line.record is None:
            raise UserError(line.problem)
        yield line.where, line.record


def utf8_lines(path: Path | str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text with its line ending) of every line of ``path``, decoded as UTF-8.

    Bytes that are not UTF-8 raise a ValueError naming the file, the line and the byte offset.
    """
    path = Path(path)
    offset = 0
    for number, raw in enumerate(binary_lines(path), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise not_utf8_error(path, number, offset, raw, exc) from None
        offset += len(raw)
        yield number, text


def read_utf8(path: Path | str) -> str:
    """The whole of ``path`` decoded as UTF-8; bad bytes raise a ValueError naming the file, the line
    that holds them (counted as ``str.splitlines`` counts) and their byte offset."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = lines_before(data[:line_start]) + lines_through(data[line_start : exc.start])
        raise not_utf8_error(path, line, line_start, data[line_start:], exc, exc.start - line_start) from None


def lines_before(data: bytes) -> int:
    """How many lines ``str.splitlines`` counts in ``data`` (valid UTF-8 that ends a line, or is empty)."""
    return len(data.decode("utf-8").splitlines())


def lines_through(prefix: bytes) -> int:
    """The 1-based line, counted as ``str.splitlines`` counts, of the byte that follows ``prefix`` (valid
    UTF-8 from the start of a physical line): 1, plus the line breaks (\r, \f, U+2028, ...) within it."""
    return len((prefix.decode("utf-8") + "x").splitlines())


def not_utf8_error(
    path: Path, line: int, line_offset: int, raw: bytes, exc: UnicodeDecodeError, start: int | None = None
) -> UserError:
    """The error (a :class:`~longembed.errors.UserError`, so a ValueError) for bad bytes at ``start`` (default ``exc.start``) of ``raw``, the line that starts
    at byte ``line_offset`` of the file."""
    start = exc.start if start is None else start
    bad = raw[start : start + 1].hex()
    return UserError(
        f"{path}:{line}: not UTF-8 text (byte 0x{bad} at byte offset {line_offset + start} of the file); "
        "save the file as UTF-8"
    )


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be tokenized as Unicode (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"holds a lone surrogate (U+{ord(text[exc.start]):04X}) at character {exc.start}: not valid "
            "Unicode; decode its source with errors='replace' or drop the character"
        )
    return None
