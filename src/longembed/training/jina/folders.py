"""Model folders of the recipe: sentence-transformers files beside a model's own, lengths, the tokenizer.

Every stage's folder opens with ``load_encoder`` and ``SentenceTransformer``: a Transformer module
over the model's weights + mean pooling (section 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from longembed.loading import default_model_path
from longembed.sentence_transformers_folder import set_max_seq_length, transformer_path, write_modules
from longembed.training.contrastive import SentenceTransformer, require_training_extra
from longembed.training.jina.config import DEFAULT_TOKENIZER
from longembed.training.mlm.model import is_alibi_folder

try:  # the ``training`` extra
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
except ImportError:  # pragma: no cover - exercised only without the extra (require_training_extra says so)
    Transformer = Pooling = None  # type: ignore[assignment,misc]

RECORD_FILE = "longembed_jina.json"


def transformer_folder(folder: Path | str) -> Path:
    """The folder that holds config.json (a sentence-transformers folder's Transformer module path)."""
    return transformer_path(folder)


def sentence_model(folder: Path | str, max_seq_length: int, device: str = "cpu") -> SentenceTransformer:
    """``folder`` as a SentenceTransformer: a Transformer module over its weights + mean Pooling (section 5).

    A JinaBERT folder loads through ``AutoModel`` (``models.jina_bert`` registers the config and model),
    an MLM folder's head is left out.
    """
    require_training_extra()
    weights = transformer_folder(folder)
    # BERT's CLS pooler is not part of the recipe (mean pooling); JinaBertModel has none
    model_kwargs = {} if is_alibi_folder(weights) else {"add_pooling_layer": False}
    transformer = Transformer(str(weights), max_seq_length=max_seq_length, model_kwargs=model_kwargs)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return SentenceTransformer(modules=[transformer, pooling], device=device)


def write_sentence_transformers_files(folder: Path) -> None:
    """Add sentence-transformers' files (modules.json, mean pooling, max_seq_length) beside a model
    folder's own (section 5: mean pooling), so that ``SentenceTransformer(folder)`` and ``load_encoder``
    open it; the model's weights (with the MLM head), config and tokenizer are left as they are (no
    model is loaded to write them)."""
    config = json.loads((Path(folder) / "config.json").read_text())
    write_modules(folder, "mean", int(config["hidden_size"]))
    set_max_seq_length(folder, readable_length_of(Path(folder)))


def readable_length(model_config: Any) -> int:
    """The longest input a model takes: an ALiBi model's declared maximum, an APE model's table."""
    return int(model_config.max_position_embeddings)


def readable_length_of(folder: Path) -> int:
    """:func:`readable_length` of a model folder, from its config.json."""
    return int(json.loads((folder / "config.json").read_text())["max_position_embeddings"])


def trained_length(model_config: dict[str, Any]) -> int:
    """The length a model was pre-trained at: JinaBERT's ``training_length``, an APE model's table."""
    return int(model_config.get("training_length") or model_config["max_position_embeddings"])


def tokenizer_folder(name: str) -> Path:
    """The folder of the recipe's ``data.tokenizer``: "default" is the packaged model's."""
    return default_model_path() if name == DEFAULT_TOKENIZER else Path(name)


def device_or_default(device: str | None) -> str:
    """``device``, or the CUDA device where there is one, else the CPU."""
    if device is not None:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"
