"""Where each document file of an index is on disk (``INDEX/document-files.json``), so a served index can
hand a PDF hit's original file to the page, and nothing else on disk.

A build records, for every document read from a file by :mod:`longembed.documents` (not a ``.jsonl``
line), its id and the file's absolute path (symlinks resolved).  :func:`servable_file` gives a
document's file only when the index recorded it, it is a PDF, and it is still a regular file at that
path (no symlink on the way, not replaced by something that is not a PDF): any other id is None, whatever it
spells (``../../etc/passwd`` is just an id the index does not hold).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the readers behind Document cost a cold search a second
    from longembed.search.sources import Document

#: the file in the index folder that maps document ids to their files
DOCUMENT_FILES = "document-files.json"
#: the suffixes of the files a served index hands out (a PDF opens at its page; an HTML file would run
#: in the server's origin, so it never is)
SERVABLE_SUFFIXES = (".pdf",)
PDF_MAGIC = b"%PDF-"


def write_document_files(index: str | Path, documents: Iterable[Document], keep: Iterable[str] = ()) -> None:
    """Record the files of ``documents`` in ``index``'s :data:`DOCUMENT_FILES` (replacing it), and the
    recorded files of the ids in ``keep`` (documents kept from an earlier build: a file that failed to
    read this time); an index on object storage (``scheme://``) records none."""
    if "://" in str(index):
        return
    earlier = read_document_files(index)
    files = {doc_id: earlier[doc_id] for doc_id in keep if doc_id in earlier}
    files.update({d.id: d.path for d in documents if d.path is not None})
    text = json.dumps(dict(sorted(files.items())), indent=1, ensure_ascii=False) + "\n"
    target = Path(index) / DOCUMENT_FILES
    partial = target.with_suffix(".json.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)


def read_document_files(index: str | Path) -> dict[str, str]:
    """id -> absolute path of the files ``index`` recorded ({} for none, or an index on object storage)."""
    target = Path(index) / DOCUMENT_FILES
    if "://" in str(index) or not target.is_file():
        return {}
    files = json.loads(target.read_text(encoding="utf-8"))
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def servable_file(files: Mapping[str, str], doc_id: str) -> Path | None:
    """The file of ``doc_id`` if :mod:`this module <longembed.search.document_files>`'s rules let a
    server hand it out, else None."""
    recorded = files.get(doc_id)
    if recorded is None:
        return None
    path = Path(recorded)
    if not path.is_absolute() or path.suffix.lower() not in SERVABLE_SUFFIXES:
        return None
    try:
        if path.resolve(strict=True) != path or not path.is_file():  # moved behind a symlink, or not a file
            return None
        with path.open("rb") as handle:
            return path if handle.read(len(PDF_MAGIC)) == PDF_MAGIC else None
    except OSError:
        return None
