"""Position schemes: the three ways a model encodes position, and how to tell which one it uses.

A method applies to some schemes (its ``schemes``); the scheme is read from the model config
(``detect_position_scheme``) and can be overridden by the user.
"""

from __future__ import annotations

from typing import Any

from longembed.errors import UserError

APE, ROPE, ALIBI = "ape", "rope", "alibi"
POSITION_SCHEMES = (APE, ROPE, ALIBI)

# Architectures whose positions are rotary (checked before falling back to config attributes).
ROPE_MODEL_TYPES = frozenset(
    {"nomic_bert", "modernbert", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "eurobert"}
)
APE_MODEL_TYPES = frozenset(
    {"bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "mpnet", "ernie"}
)
# Models whose position table starts at padding_idx + 1 (fairseq convention).
OFFSET_POSITION_MODEL_TYPES = frozenset({"roberta", "xlm-roberta", "camembert"})


def detect_position_scheme(config: Any) -> str:
    """ "ape", "rope" or "alibi" from a transformers config; ValueError when it cannot tell."""
    model_type = getattr(config, "model_type", "")
    if model_type == "jina_bert" or getattr(config, "position_embedding_type", None) == "alibi":
        return ALIBI
    if (
        model_type in ROPE_MODEL_TYPES
        or getattr(config, "rope_parameters", None)
        or hasattr(config, "rope_theta")
    ):
        return ROPE
    if model_type in APE_MODEL_TYPES and getattr(config, "position_embedding_type", "absolute") == "absolute":
        return APE
    raise UserError(
        f"cannot tell the position scheme of model_type {model_type!r}; pass position_scheme= one of {POSITION_SCHEMES}"
    )
