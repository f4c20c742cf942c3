"""Stage I's two models, built new or opened from a folder: JinaBERT (ALiBi) and its APE twin.

Both are transformers masked-language models with the MLM decoder tied to the word embeddings;
the twin's GELU feed-forward has 3/2 of JinaBERT's intermediate size so both have the same
parameters and FLOPs (GEGLU: h x 2I + I x h).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from longembed.errors import MissingFileError, UserError
from longembed.loading import quiet_transformers
from longembed.models.jina_bert import JinaBertConfig, JinaBertForMaskedLM
from longembed.training.mlm.config import MLMModelConfig

#: The GEGLU feed-forward has 3 h I weights; a GELU MLP with 3I/2 units has the same.
APE_TWIN_INTERMEDIATE_FACTOR = 1.5


def build_mlm_model(
    model_config: MLMModelConfig, tokenizer: PreTrainedTokenizerBase, training_length: int, seed: int = 0
) -> PreTrainedModel:
    """A randomly initialised MLM model (seeded): ``JinaBertForMaskedLM`` or the APE twin.

    The vocabulary is the tokenizer's; the MLM decoder is tied to the word embeddings in both.
    """
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=model_config.hidden_size,
        num_hidden_layers=model_config.num_hidden_layers,
        num_attention_heads=model_config.num_attention_heads,
        hidden_dropout_prob=model_config.hidden_dropout_prob,
        attention_probs_dropout_prob=model_config.attention_probs_dropout_prob,
        initializer_range=model_config.initializer_range,
        pad_token_id=tokenizer.pad_token_id,
        hidden_act="gelu",
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    if model_config.positions == "alibi":
        config = JinaBertConfig(
            **common,
            intermediate_size=model_config.intermediate_size,
            feed_forward_type=model_config.feed_forward_type,
            max_position_embeddings=max(model_config.max_position_embeddings, training_length),
            training_length=training_length,
        )
        return JinaBertForMaskedLM(config)
    config = BertConfig(
        **common,
        intermediate_size=round(APE_TWIN_INTERMEDIATE_FACTOR * model_config.intermediate_size),
        max_position_embeddings=training_length,
        position_embedding_type="absolute",
    )
    return BertForMaskedLM(config)


def is_alibi_folder(folder: Path | str) -> bool:
    """Whether a model folder holds a JinaBERT (ALiBi) model, from its config.json."""
    config_file = Path(folder) / "config.json"
    if not config_file.is_file():
        raise MissingFileError(f"{folder} has no config.json: not a model folder")
    config = json.loads(config_file.read_text())
    return config.get("model_type") == "jina_bert" or config.get("position_embedding_type") == "alibi"


def load_mlm_model(folder: Path | str) -> PreTrainedModel:
    """The MLM model saved in ``folder`` (JinaBERT or a BERT-style APE model), float32, train mode off."""
    with quiet_transformers():
        if is_alibi_folder(folder):
            return JinaBertForMaskedLM.from_pretrained(folder, dtype=torch.float32).eval()
        return AutoModelForMaskedLM.from_pretrained(folder, dtype=torch.float32).eval()


def load_tokenizer(path: Path | str) -> PreTrainedTokenizerBase:
    """A fast WordPiece/BPE tokenizer from a model folder (whole-word masking needs its offsets)."""
    if not Path(path).is_dir():
        raise MissingFileError(f"tokenizer folder {path} does not exist")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if not tokenizer.is_fast or tokenizer.mask_token is None:
        raise UserError(f"{path}: MLM training needs a fast tokenizer with a mask token")
    return tokenizer
