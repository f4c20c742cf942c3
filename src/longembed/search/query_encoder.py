"""The encoder a search embeds its queries with: the index's strategy's, loaded as eval loads it, and
refused when the model's files are not those that built the index."""

from __future__ import annotations

from typing import Any

from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.retrieval.model_files import model_identity, same_files
from longembed.retrieval.strategy import Strategy
from longembed.search.strategy_encoder import load_strategy_encoder, recorded_dtype


def load_query_encoder(strategy: Strategy, metadata: dict[str, Any], device: str | None, path: str,
                       encoder: LongContextEncoder | None = None) -> LongContextEncoder:
    """The strategy's encoder, or ``encoder`` when one is already loaded (a server following an index's new
    versions); a UserError when its files differ from those ``metadata`` recorded."""
    encoder = encoder or load_strategy_encoder(strategy, device, dtype=recorded_dtype(metadata))
    recorded = (metadata.get("model") or {}).get("identity")
    if recorded is not None and not same_files(recorded, model_identity(encoder)):
        raise UserError(f"{path}: the model {strategy.model} is not the one that built this index (its files "
                        "differ): rebuild the index, or use the model it recorded")
    return encoder
