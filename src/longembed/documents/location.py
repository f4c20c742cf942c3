"""A document's text and its map from character offsets to locations (a page, or a heading path).

The map is a sorted tuple of :class:`Location` marks, each holding from its ``start`` to the next mark's.
A span of text (a chunk) is located by :func:`location_of`: the page it starts on ("page 3", or "pages
3-4" when it runs on), or the heading path it starts under ("Install > Models").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """From character ``start`` on (until the next mark): a 1-based ``page``, or a ``section`` path."""

    start: int
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class DocumentText:
    """What a reader gives: the document's ``text`` and its ``locations`` (sorted by start; may be empty)."""

    text: str
    locations: tuple[Location, ...] = ()


#: what joins the headings of a section path
SECTION_SEPARATOR = " > "


def location_of(locations: Sequence[Location], start: int, end: int) -> tuple[str | None, int | None]:
    """(label, first page) of the span ``start``..``end``: ("page 3", 3), ("pages 3-4", 3), ("Install >
    Models", None), or (None, None) when the map has no mark at or before ``start``."""
    if not locations:
        return None, None
    starts = [mark.start for mark in locations]
    first = bisect.bisect_right(starts, start) - 1
    if first < 0:
        return None, None
    mark = locations[first]
    if mark.page is None:
        return mark.section, None
    last = max(first, bisect.bisect_left(starts, end) - 1)
    pages = [m.page for m in locations[first : last + 1] if m.page is not None]
    final = max(pages)
    return (f"page {mark.page}" if final == mark.page else f"pages {mark.page}-{final}"), mark.page
