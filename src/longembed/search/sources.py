"""What ``longembed index`` reads: documents from folders, ``.jsonl`` files and BEIR corpora.

* a folder, read recursively: every document file (text, Markdown, PDF, HTML, Word:
  :mod:`longembed.documents` reads each by its type, with its locations) is one document, its id the
  file's path relative to the folder (``essays/startupideas.txt``); its ``.jsonl`` files are read as
  below; other files are skipped, and listed by extension; ``--glob`` chooses files (``**/*.txt``);
* a ``.jsonl`` file: one document per line, with an id field and a text field (``--id-field``,
  ``--text-field``; default ``id`` (or BEIR's ``_id``) and ``text``);
* a BEIR ``corpus.jsonl`` (a file of that name, in a folder or given alone): read exactly as ``eval
  --task-dir`` reads it (:func:`longembed.tasks.task_dir.read_corpus`: a non-empty title prepended), so
  an index of a task folder holds the documents eval scored (given the folder, its queries.jsonl is
  left out).

Bad input is one line naming the file (and line, and field): an unreadable file, text that is not
UTF-8, an empty document, an id given twice.  Everything is read and checked before anything is
written, so bad input never costs what is already indexed.  :func:`gather_sources` lists a document
file that cannot be read (damaged, encrypted, no text) with its reason and goes on; :func:`read_sources`
raises it.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from longembed.documents import DOCUMENT_SUFFIXES, DocumentReadError, Location, read_document
from longembed.errors import MissingFileError, UserError, UserFileError
from longembed.tasks.task_dir import read_corpus
from longembed.textfiles import jsonl_objects

#: The files a folder contributes without --glob: one document per document file, one per .jsonl line.
TEXT_SUFFIXES = DOCUMENT_SUFFIXES
JSONL_SUFFIX = ".jsonl"
BEIR_CORPUS, BEIR_QUERIES = "corpus.jsonl", "queries.jsonl"


@dataclass(frozen=True)
class Document:
    """One document to index: its id, the file it came from, its text and the sha256 of that text (what
    an incremental build compares)."""

    id: str
    source: str
    text: str
    #: where each part of the text is (pages, heading paths; :mod:`longembed.documents`), empty if unknown
    locations: tuple[Location, ...] = field(default=(), compare=False)
    #: the absolute path of the file it was read from (a document file, not a .jsonl line), else None
    path: str | None = field(default=None, compare=False)

    @property
    def sha256(self) -> str:
        return text_sha256(self.text)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SourceOptions:
    """How sources are read: ``glob`` (a folder's files; default its .txt, .md and .jsonl), and the
    id and text fields of a .jsonl file's lines."""

    glob: str | None = None
    id_field: str = "id"
    text_field: str = "text"


@dataclass(frozen=True)
class ReadFailure:
    """A document file that could not be read: its id (the relative path) and why (one line)."""

    id: str
    reason: str


@dataclass
class SourceReading:
    """What :func:`gather_sources` read: the documents, the files it could not read (with their
    reasons) and how many files of each other extension a folder held (not documents: skipped)."""

    documents: list[Document] = field(default_factory=list)
    failed: list[ReadFailure] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def read_sources(sources: Sequence[str | Path], options: SourceOptions = SourceOptions()) -> list[Document]:
    """Every document of ``sources``, in order (folders sorted by path); an id given twice, by two
    sources or by one, is an error naming both places, and so is a file that cannot be read."""
    reading = gather_sources(sources, options)
    if reading.failed:
        raise DocumentReadError(reading.failed[0].reason)
    return reading.documents


def gather_sources(sources: Sequence[str | Path], options: SourceOptions = SourceOptions()) -> SourceReading:
    """:func:`read_sources`, except that a document file that cannot be read is listed in ``failed``
    (the rest are read); with no document read at all, an error naming the folders (and the failures)."""
    reading = SourceReading()
    where: dict[str, str] = {}
    for source in sources:
        for document in _read_source(Path(source), options, reading):
            if document.id in where:
                raise UserError(f"{document.source}: document id {document.id!r} is given twice "
                                 f"(first by {where[document.id]})")
            where[document.id] = document.source
            reading.documents.append(document)
    if not reading.documents:
        failed = f"; {len(reading.failed)} could not be read, e.g. {reading.failed[0].reason}" if reading.failed else ""
        raise UserError(f"no documents in {', '.join(map(str, sources))}"
                         + (f" matching --glob {options.glob}" if options.glob
                            else f" ({', '.join(TEXT_SUFFIXES)} or .jsonl files)") + failed)
    return reading


def _read_source(path: Path, options: SourceOptions, reading: SourceReading) -> Iterator[Document]:
    if path.is_dir():
        for file in _folder_files(path, options.glob, reading.skipped):
            yield from _read_file(file, file.relative_to(path).as_posix(), options, reading)
    elif path.is_file():
        yield from _read_file(path, path.name, options, reading)
    else:
        raise MissingFileError(f"{path}: no such file or folder")


def _folder_files(folder: Path, glob: str | None, skipped: Counter[str]) -> list[Path]:
    """The folder's files to read (``glob``'s, else its documents and .jsonl files); the others counted
    in ``skipped`` by extension.  A broken or looping symbolic link among them is kept, so that reading it
    fails naming it rather than the document being silently left out."""
    if glob is not None:
        return sorted(p for p in folder.glob(glob) if _file_like(p))
    suffixes = (*TEXT_SUFFIXES, JSONL_SUFFIX)
    files = [p for p in folder.rglob("*") if _file_like(p)
             and not any(part.startswith(".") for part in p.relative_to(folder).parts) and not _beir_queries(p)]
    skipped.update(p.suffix.lower() or "(no extension)" for p in files if p.suffix.lower() not in suffixes)
    return sorted(p for p in files if p.suffix.lower() in suffixes)


def _file_like(path: Path) -> bool:
    """A file, or a symbolic link that leads nowhere (broken, or a loop)."""
    return path.is_file() or (path.is_symlink() and not path.exists())


def _beir_queries(path: Path) -> bool:
    """A BEIR task folder's queries.jsonl (beside its corpus.jsonl): questions, not documents."""
    return path.name == BEIR_QUERIES and (path.parent / BEIR_CORPUS).is_file()


def _read_file(file: Path, relative: str, options: SourceOptions, reading: SourceReading) -> Iterator[Document]:
    """A .jsonl file's lines (a BEIR corpus.jsonl read as eval reads it), else the file as one document
    (:func:`longembed.documents.read_document`; a file it cannot read goes to ``reading.failed``)."""
    if file.name == BEIR_CORPUS or file.suffix.lower() == JSONL_SUFFIX:
        _check_readable(file)
    if file.name == BEIR_CORPUS:
        for doc_id, text in read_corpus(file).items():
            yield Document(doc_id, str(file), text)
    elif file.suffix.lower() == JSONL_SUFFIX:
        yield from _jsonl_documents(file, options)
    else:
        try:
            document = read_document(file)
        except DocumentReadError as exc:
            reading.failed.append(ReadFailure(relative, str(exc)))
            return
        yield Document(relative, relative, document.text, document.locations, str(file.resolve()))


def _check_readable(file: Path) -> None:
    try:
        with open(file, "rb"):
            pass
    except OSError as exc:
        link = f"; a symbolic link to {os.readlink(file)}" if file.is_symlink() else ""
        raise UserFileError(f"{file}: cannot be read ({exc.strerror or exc}{link})") from None


def _jsonl_documents(file: Path, options: SourceOptions) -> Iterator[Document]:
    id_fields = (options.id_field, "_id") if options.id_field == "id" else (options.id_field,)
    for where, row in jsonl_objects(file):
        key = next((f for f in id_fields if row.get(f) is not None), None)
        if key is None:
            raise UserError(f"{where}: no {' or '.join(repr(f) for f in id_fields)} field (set --id-field)")
        doc_id = row[key]
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or not str(doc_id).strip():
            raise UserError(f"{where}: field {key!r} must be a non-empty string or an integer, not {doc_id!r}")
        text = row.get(options.text_field)
        if text is None:
            raise UserError(f"{where}: no {options.text_field!r} field (set --text-field)")
        if not isinstance(text, str):
            raise UserError(f"{where}: field {options.text_field!r} must be a string, not {type(text).__name__}")
        if not text.strip():
            raise UserError(f"{where}: field {options.text_field!r} is empty (document {str(doc_id)!r})")
        yield Document(str(doc_id), str(file), text)
