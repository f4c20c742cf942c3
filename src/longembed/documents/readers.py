"""The reader of each file type, chosen by suffix: a reader takes a path and gives a :class:`DocumentText`.

Every problem (unreadable, encrypted, damaged, no text, an encoding longembed does not read) is a
:class:`DocumentReadError` naming the file and the reason, so a caller can list it and go on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from longembed.documents.html_pages import read_html
from longembed.documents.pdf import read_pdf
from longembed.documents.plain import read_markdown, read_text
from longembed.documents.word import read_docx
from longembed.errors import MissingExtraError, UserError
from longembed.locations import DocumentText

Reader = Callable[[Path], DocumentText]

#: suffix -> reader; a folder contributes these files without --glob
READERS: dict[str, Reader] = {
    ".txt": read_text, ".text": read_text, ".rst": read_text,
    ".md": read_markdown, ".markdown": read_markdown,
    ".pdf": read_pdf,
    ".html": read_html, ".htm": read_html, ".xhtml": read_html,
    ".docx": read_docx,
}
DOCUMENT_SUFFIXES = tuple(READERS)


class DocumentReadError(UserError):
    """A file that could not be read as a document: the message names the file and why."""


def reader_for(path: Path) -> Reader:
    """The reader of ``path``'s suffix; any other file (named by --glob) is read as plain text."""
    return READERS.get(path.suffix.lower(), read_text)


def read_document(path: str | Path) -> DocumentText:
    """``path`` read by its type's reader; a :class:`DocumentReadError` naming the file and why it cannot
    be read (an OS error, a damaged or encrypted file, no text, text that is whitespace only).  A missing
    optional extra stays a :class:`~longembed.errors.MissingExtraError`."""
    path = Path(path)
    try:
        document = reader_for(path)(path)
    except MissingExtraError:
        raise
    except UserError as exc:
        raise DocumentReadError(str(exc)) from None
    except OSError as exc:
        link = f"; a symbolic link to {os.readlink(path)}" if path.is_symlink() else ""
        raise DocumentReadError(f"{path}: cannot be read ({exc.strerror or exc}{link})") from None
    if not document.text.strip():
        raise DocumentReadError(f"{path}: the document is empty")
    return document
