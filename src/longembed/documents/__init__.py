"""Documents as they come (PDF, HTML, Word, Markdown, text) -> their text and where each part of it is.

One reader per file type (:func:`read_document` picks it by suffix) returns a :class:`DocumentText`: the
text the model reads and a map from character offsets to locations ("page 12", "Install > Models").
"""

from __future__ import annotations

from longembed.documents.readers import (
    DOCUMENT_SUFFIXES,
    DocumentReadError,
    read_document,
    reader_for,
)
from longembed.locations import DocumentText, Location, location_of

__all__ = ["DOCUMENT_SUFFIXES", "DocumentReadError", "DocumentText", "Location", "location_of", "read_document",
           "reader_for"]
