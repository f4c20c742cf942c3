"""The dtype an index's vectors were embedded in, read from its metadata: kept free of torch and transformers
so that a search's facts never import the model's stack (a search with a saved query program needs none)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the dtype of an index whose metadata records none (built before the dtype was recorded)
UNRECORDED_DTYPE = "float32"


def recorded_dtype(metadata: Mapping[str, Any]) -> str:
    """The dtype an index's vectors were embedded in: its metadata's ``dtype``, else the strategy's
    ``--dtype`` option, else float32 (an index built before the dtype was recorded)."""
    options = (metadata.get("config") or {}).get("encoder_options") or {}
    return str(metadata.get("dtype") or options.get("dtype") or UNRECORDED_DTYPE)
