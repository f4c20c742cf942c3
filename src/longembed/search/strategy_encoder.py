"""The encoder of an index's strategy, loaded as ``longembed eval`` loads it, in the dtype the index recorded.

Kept apart from the build's modules (the table store, the document readers) so that a search, which only
encodes queries, imports the model's stack and nothing of LanceDB's or the readers' (issue 53).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from longembed.encoder import LongContextEncoder, load_encoder
from longembed.retrieval.strategy import Strategy

#: the dtype of an index whose metadata records none (built before the dtype was recorded)
UNRECORDED_DTYPE = "float32"


def load_strategy_encoder(strategy: Strategy, device: str | None = None, dtype: str | None = None) -> LongContextEncoder:
    """The strategy's encoder, built as ``longembed eval`` builds it; ``dtype``: the precision an index
    recorded (its query encoder runs as its documents were embedded), instead of the strategy's."""
    options: dict[str, Any] = dict(strategy.encoder_options)
    if device is not None:
        options["device"] = device
    if dtype is not None:
        options["dtype"] = dtype
    return load_encoder(strategy.model, method=strategy.method, max_length=strategy.max_length, **options)


def recorded_dtype(metadata: Mapping[str, Any]) -> str:
    """The dtype an index's vectors were embedded in: its metadata's ``dtype``, else the strategy's
    ``--dtype`` option, else float32 (an index built before the dtype was recorded)."""
    options = (metadata.get("config") or {}).get("encoder_options") or {}
    return str(metadata.get("dtype") or options.get("dtype") or UNRECORDED_DTYPE)
