"""The encoder of an index's strategy, loaded as ``longembed eval`` loads it, in the dtype the index recorded.

Kept apart from the build's modules (the table store, the document readers) so that a search, which only
encodes queries, imports the model's stack and nothing of LanceDB's or the readers' (issue 53).
"""

from __future__ import annotations

from typing import Any

from longembed.encoder import LongContextEncoder, load_encoder
from longembed.retrieval.strategy import Strategy
from longembed.search.index_dtype import recorded_dtype

__all__ = ["load_strategy_encoder", "recorded_dtype"]


def load_strategy_encoder(strategy: Strategy, device: str | None = None, dtype: str | None = None) -> LongContextEncoder:
    """The strategy's encoder, built as ``longembed eval`` builds it; ``dtype``: the precision an index
    recorded (its query encoder runs as its documents were embedded), instead of the strategy's."""
    options: dict[str, Any] = dict(strategy.encoder_options)
    if device is not None:
        options["device"] = device
    if dtype is not None:
        options["dtype"] = dtype
    return load_encoder(strategy.model, method=strategy.method, max_length=strategy.max_length, **options)

