"""A document's text and its map from character offsets to locations (a page, or a heading path).

The map is a sorted tuple of :class:`Location` marks, each holding from its ``start`` to the next mark's;
:func:`location_of` places a span in it, and an index stores it as JSON (:func:`marks_json`).
"""

from __future__ import annotations

import bisect
import json
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


def marks_json(locations: Sequence[Location]) -> str | None:
    """The map as the index stores it (with a document's first chunk, so that a search can place the
    passage it shows, not only the chunk): ``[[start, page, section], ...]``, or None for no map."""
    if not locations:
        return None
    return json.dumps([[mark.start, mark.page, mark.section] for mark in locations], separators=(",", ":"))


def marks_from_json(text: str | None) -> tuple[Location, ...]:
    """The map :func:`marks_json` stored (empty for None: no map, or an index built before maps were)."""
    if not text:
        return ()
    return tuple(Location(int(start), page, section) for start, page, section in json.loads(text))
