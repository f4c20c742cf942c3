"""``POST /search`` bodies checked before any work: each field, with a 4xx that names it.

The body: ``{"query": str, "k": int, "ids": [str], "path_prefix": str, "passages": str}``.  ``query`` is required;
``k`` (1..:data:`MAX_K`, default :data:`DEFAULT_K`) is how many documents come back; the two optional
filters restrict the search to documents whose id is in ``ids``, or whose source path starts with
``path_prefix`` (both may be given: a document must pass both); ``passages`` is "query" (default: each
result shows its best sentence window for the query) or "chunk" (the chunk that scored it: no embedding
beyond the query's, for throughput).  A field the route does not read is a
400 naming it, as on the other routes.  The query's length in tokens is checked by the route
(:mod:`longembed.serving.search_route`), against the served model's window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from longembed.retrieval.passages import PASSAGE_CHOICES
from longembed.serving.validation import ApiError, reject_unknown_fields

#: The fields ``POST /search`` reads.
SEARCH_FIELDS = ("query", "k", "ids", "path_prefix", "passages")
DEFAULT_K = 10
#: The most documents one search returns.
MAX_K = 100


@dataclass(frozen=True)
class SearchRequest:
    """A checked search: the question, how many documents, and the optional filters."""

    query: str
    k: int = DEFAULT_K
    ids: list[str] | None = None
    path_prefix: str | None = None
    passages: str = "query"


def search_request(body: dict[str, Any]) -> SearchRequest:
    """The body as a :class:`SearchRequest`, or an :class:`ApiError` (400) naming the bad field."""
    reject_unknown_fields(body, SEARCH_FIELDS, "/search")
    return SearchRequest(_query(body.get("query")), _k(body.get("k")), _ids(body.get("ids")),
                         _path_prefix(body.get("path_prefix")), _passages(body.get("passages")))


def _query(value: Any) -> str:
    if value is None:
        raise ApiError(400, "'query' is required: the question to search for", "query")
    if not isinstance(value, str):
        raise ApiError(400, f"'query' must be a string, got {type(value).__name__}", "query")
    if not value.strip():
        raise ApiError(400, "'query' is empty (or only whitespace): type a question", "query")
    _check_unicode(value, "query")
    return value


def _k(value: Any) -> int:
    if value is None:
        return DEFAULT_K
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'k' must be an integer from 1 to {MAX_K}, got {value!r}", "k")
    if not 1 <= value <= MAX_K:
        raise ApiError(400, f"'k' must be from 1 to {MAX_K}, got {value}", "k")
    return value


def _ids(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ApiError(400, f"'ids' must be a list of document ids, got {type(value).__name__}", "ids")
    if not value:
        raise ApiError(400, "'ids' is an empty list, which matches no document: leave it out to search them all",
                       "ids")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ApiError(400, f"'ids[{i}]' must be a string (a document id), got {type(item).__name__}", "ids")
        _check_unicode(item, f"ids[{i}]", "ids")
    return value


def _path_prefix(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"'path_prefix' must be a string, got {type(value).__name__}", "path_prefix")
    if not value:
        raise ApiError(400, "'path_prefix' is empty: leave it out to search every document", "path_prefix")
    _check_unicode(value, "path_prefix")
    return value


def _passages(value: Any) -> str:
    if value is None:
        return "query"
    if value not in PASSAGE_CHOICES:
        raise ApiError(400, f"'passages' must be one of {', '.join(map(repr, PASSAGE_CHOICES))}, got {value!r}",
                       "passages")
    return value


def _check_unicode(text: str, label: str, field_name: str | None = None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"'{label}' is not valid Unicode (a lone surrogate)", field_name or label) from None
