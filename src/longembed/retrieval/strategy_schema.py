"""The schema of a strategy's dict (advice.json's ``config``, :meth:`Strategy.to_dict`): every key known and
typed, checked before anything is built from a hand-edited file, so that a misspelt key or a wrong type is
one line naming it rather than a traceback, an option ignored, or a half-built index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from longembed.config import EncoderConfig
from longembed.errors import UserError
from longembed.retrieval.strategy import Strategy

_NUMBER = (int, float)
#: key -> the JSON types it may hold (besides null): :meth:`Strategy.to_dict`'s keys, then the run-only
#: keys and the older spellings :meth:`Strategy.from_dict` still reads.
STRATEGY_KEYS: dict[str, tuple[type, ...]] = {
    "model": (str,), "method": (str,), "max_length": (int,), "encoder_options": (dict,),
    "granularity": (str,), "chunking": (str,), "late": (bool,),
    "fuse": (str,), "fuse_method": (str,), "fuse_weight": _NUMBER, "fuse_k": (int,),
    "query_prompt": (str,), "document_prompt": (str,),
    "batch_size": (int,), "device": (str,), "naive": (bool,), "fusion": (dict,),
}
#: The keys of an older nested ``fusion`` object.
FUSION_KEYS: dict[str, tuple[type, ...]] = {"source": (str,), "method": (str,), "k": (int,), "weight": _NUMBER}
#: The encoder's options (``encoder_options``' keys, or an older file's keys of their own).
ENCODER_OPTIONS = tuple(f.name for f in dataclasses.fields(EncoderConfig) if f.name not in ("model", "method",
                                                                                              "max_length"))


def check_strategy_dict(data: Any) -> None:
    """A UserError naming the first key of ``data`` that is unknown or of the wrong type (``encoder_options``'
    keys must be encoder options; a nested ``fusion`` is checked too)."""
    if not isinstance(data, Mapping):
        raise UserError(f"a strategy is a JSON object, got {_json_type(data)}")
    for key, value in data.items():
        if key in STRATEGY_KEYS:
            check_type(key, value, STRATEGY_KEYS[key])
        elif key not in ENCODER_OPTIONS:
            raise UserError(f"unknown field {key!r} (a strategy's fields: {', '.join(STRATEGY_KEYS)}, or an encoder "
                            f"option: {', '.join(ENCODER_OPTIONS)})")
    options = data.get("encoder_options") or {}
    unknown = sorted(str(k) for k in options if k not in ENCODER_OPTIONS)
    if unknown:
        raise UserError(f"encoder_options: unknown option(s) {unknown} (the encoder's options: "
                        f"{', '.join(ENCODER_OPTIONS)})")
    if data.get("fusion") is not None:
        check_fusion_fields(data["fusion"])


def check_fusion_fields(fusion: Mapping[str, Any]) -> None:
    """A UserError naming a nested ``fusion`` object's unknown field or mistyped value."""
    for key, value in fusion.items():
        if key not in FUSION_KEYS:
            raise UserError(f"fusion: unknown field {key!r} (its fields: {', '.join(FUSION_KEYS)})")
        check_type(f"fusion.{key}", value, FUSION_KEYS[key])


def check_encoder_options(strategy: Strategy) -> None:
    """The strategy's encoder options checked as ``load_encoder`` will (names, types, ranges, the method's
    own keys), before anything is loaded or created."""
    if strategy.lexical_only or strategy.method is None:
        return
    EncoderConfig.from_options(strategy.model, strategy.method, strategy.max_length, **strategy.encoder_options)


def check_type(name: str, value: Any, kinds: tuple[type, ...]) -> None:
    """A UserError unless ``value`` is null or one of ``kinds`` (a JSON true/false is not a number)."""
    if value is None or (isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))):
        return
    wanted = "a number" if float in kinds else " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)
    raise UserError(f"{name} must be {wanted} or null, got {_json_type(value)} {value!r}")


_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object",
               list: "a list"}


def _json_type(value: Any) -> str:
    names = {bool: "true/false", str: "a string", int: "an integer", float: "a number", dict: "an object",
             list: "a list", type(None): "null"}
    return names.get(type(value), type(value).__name__)
