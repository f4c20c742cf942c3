"""The location map an index stores (JSON on a document's first row) places spans as the reader's map does."""

from __future__ import annotations

from longembed.locations import Location, location_of, marks_from_json, marks_json

PDF = (Location(0, page=1), Location(120, page=2), Location(260, page=3))
SECTIONS = (Location(0, section="Guide"), Location(40, section="Guide > Install"), Location(90, section="Guide > Use"))


def test_a_map_round_trips_through_its_json() -> None:
    for marks in (PDF, SECTIONS):
        assert marks_from_json(marks_json(marks)) == marks


def test_no_map_is_stored_as_none_and_read_as_empty() -> None:
    assert marks_json(()) is None
    assert marks_from_json(None) == ()


def test_the_stored_map_places_spans_as_the_readers_map() -> None:
    stored = marks_from_json(marks_json(PDF))
    for start, end in [(0, 10), (130, 140), (100, 130), (110, 300), (261, 262)]:
        assert location_of(stored, start, end) == location_of(PDF, start, end)
    assert location_of(stored, 130, 140) == ("page 2", 2)
    assert location_of(stored, 100, 130) == ("pages 1-2", 1)
    assert location_of(marks_from_json(marks_json(SECTIONS)), 50, 60) == ("Guide > Install", None)
