"""One codec between result dataclasses and the JSON-ready dicts of their files.

    >>> data = to_data(run_results)             # dataclass -> dict, recursively
    >>> again = from_data(RunResults, data)     # dict -> dataclass, from its type hints

Every result class (:mod:`longembed.results.run_results`, :mod:`longembed.results.sweep_results`) serialises through
these two functions instead of a hand-written ``to_dict`` / ``from_dict`` pair per class, in the manner
of pydantic's ``model_dump`` / ``model_validate`` (which mteb uses) without the dependency:

* nested dataclasses, lists, tuples, dicts and ``X | None`` follow the type hints; dict keys are
  written as strings and read back as their declared type (``dict[int, float]``: "4096" -> 4096);
* numpy scalars and arrays become Python numbers and lists;
* a field's metadata may say how it is written: ``omit_none`` (left out when None, as optional
  counts are), ``omit_empty`` (an empty dict or list left out, so a new field with an empty default
  leaves the files of runs that do not use it as they were: ``task_dirs``, ``task_options``) and
  ``empty_means_none`` (None written as ``{}``, and any empty value read as None: a
  BM25 run's cache use);
* reading, a missing key takes the field's default (or None for an optional field without one), and
  keys no field declares (``format``, keys of newer files) are ignored, so files written by earlier
  versions load.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

import numpy as np

from longembed.errors import UserTypeError


def to_data(value: Any) -> Any:
    """``value`` as plain JSON-ready data: dataclasses (field by field), lists, dicts, numpy values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.metadata.get("omit_none"):
                continue
            if not item and field.metadata.get("omit_empty") and isinstance(item, dict | list):
                continue
            if item is None and field.metadata.get("empty_means_none"):
                item = {}
            out[field.name] = to_data(item)
        return out
    if isinstance(value, dict):
        return {_key(k): to_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    return value


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(key.item() if isinstance(key, np.generic) else key)


def from_data(kind: Any, data: Any) -> Any:
    """``data`` read as the type ``kind`` (a dataclass, ``list[X]``, ``dict[K, V]``, ``X | None``, ...)."""
    if data is None:
        return None
    if dataclasses.is_dataclass(kind):
        return _dataclass_from(kind, data)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or isinstance(kind, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return from_data(members[0], data) if len(members) == 1 else data
    if origin is list:
        return [from_data(args[0], v) for v in data] if args else list(data)
    if origin is tuple:
        return tuple(from_data(args[0], v) for v in data) if args else tuple(data)
    if origin is dict:
        if not args:
            return dict(data)
        return {from_data(args[0], k): from_data(args[1], v) for k, v in data.items()}
    if kind in (int, float) and isinstance(data, str):
        return kind(data)
    return data


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def _dataclass_from(kind: type, data: dict[str, Any]) -> Any:
    """A dataclass from its dict: known keys by their hinted types, missing ones by default or None."""
    if not isinstance(data, dict):
        raise UserTypeError(f"{kind.__name__} needs a JSON object, got {type(data).__name__}")
    hints = _hints(kind)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(kind):
        if not field.init:
            continue
        if field.name in data:
            value = data[field.name]
            if field.metadata.get("empty_means_none") and not value:
                value = None
            values[field.name] = from_data(hints[field.name], value)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if not _optional(hints[field.name]):
                raise KeyError(f"{kind.__name__}.{field.name}")
            values[field.name] = None
    return kind(**values)


def _optional(kind: Any) -> bool:
    return type(None) in typing.get_args(kind)


class Record:
    """``to_dict`` / ``from_dict`` of a result dataclass, through :func:`to_data` / :func:`from_data`."""

    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return from_data(cls, data)
