"""The teacher (a BERT with a learned position table) and the student built from it (a JinaBERT).

The student is the teacher's architecture with one change: the absolute position table
``embeddings.position_embeddings`` is gone, and every attention layer adds bidirectional ALiBi,
-m_h |i - j| with Jina's slopes (``longembed.extension.alibi``; optionally scaled, ``slope_scale``).  JinaBERT with
``feed_forward_type="original"`` keeps BERT's parameter names for everything else, so the weight
map is the identity on every other name (:func:`student_state` checks that it is complete).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from transformers import BertConfig, BertModel

from longembed.errors import UserError
from longembed.extension.positions import AbsolutePositions
from longembed.loading import ModelSource, load_transformer_config, quiet_transformers
from longembed.models.configuration_jina_bert import ORIGINAL_FEED_FORWARD
from longembed.models.jina_bert import JinaBertConfig, JinaBertModel
from longembed.weight_files import check_weight_files

#: The one teacher tensor the student does not have: the learned absolute position table.
POSITION_TABLE = "embeddings.position_embeddings.weight"


def teacher_config(source: ModelSource) -> BertConfig:
    """The teacher's BertConfig, or a ValueError saying why ``source`` cannot be retrofitted.

    A retrofit needs BERT's layout (``model_type: bert``, absolute positions, a BERT feed-forward),
    the original table (not a folder that ``longembed tune``/``export`` extended) and mean pooling
    (the distillation loss compares mean-pooled vectors).
    """
    config = load_transformer_config(Path(source.transformer_path))
    if config.model_type != "bert" or getattr(config, "position_embedding_type", "absolute") != "absolute":
        kind = f"{config.model_type} ({getattr(config, 'position_embedding_type', '?')} positions)"
        raise UserError(
            f"retrofit starts from a BERT with a learned absolute position table; {source.name} is a {kind}"
        )
    if source.extended_table is not None:
        raise UserError(
            f"{source.name} has an extended position table ({source.extended_table.method}); retrofit the original model"
        )
    if source.pooling != "mean":
        raise UserError(
            f"{source.name} pools with {source.pooling!r}; the distillation loss compares mean-pooled vectors"
        )
    return config


def teacher_window(config: BertConfig) -> int:
    """Lo: the longest input the teacher reads, its position table's rows (512 for BERT)."""
    return AbsolutePositions("truncate", config).original_length


def load_teacher(source: ModelSource) -> BertModel:
    """The teacher's encoder in float32, eval mode, without BERT's CLS pooler (mean pooling needs none).

    Every weight must load: a missing one, or an unexpected one other than the pooler's, is a
    ValueError (transformers' own load report, which lists the pooler, is not printed).
    """
    path = Path(source.transformer_path)
    check_weight_files(path)
    modeling_logger = logging.getLogger("transformers.modeling_utils")
    modeling_logger.addFilter(_without_load_report)
    try:
        with quiet_transformers():
            model, info = BertModel.from_pretrained(
                path, add_pooling_layer=False, dtype=torch.float32, output_loading_info=True
            )
    finally:
        modeling_logger.removeFilter(_without_load_report)
    unexpected = [k for k in info["unexpected_keys"] if not k.startswith(("pooler.", "bert.pooler."))]
    if info["missing_keys"] or unexpected or info["mismatched_keys"]:
        raise UserError(
            f"{path}: the teacher's weights do not load as a BertModel (missing {sorted(info['missing_keys'])}, "
            f"unexpected {sorted(unexpected)}, mismatched {info['mismatched_keys']})"
        )
    return model.eval()


def _without_load_report(record: logging.LogRecord) -> bool:
    """False for transformers' load report (checked by :func:`load_teacher` itself instead)."""
    return "LOAD REPORT" not in record.getMessage()


def student_config(teacher: BertConfig, training_length: int, slope_scale: float = 1.0) -> JinaBertConfig:
    """The teacher's sizes, activation and LayerNorm epsilon, as a JinaBERT with BERT's feed-forward.

    ``training_length`` is Lo, the longest text the student was trained at; the student declares
    JinaBERT's 8192 as what it reads (``max_position_embeddings``: ALiBi has no table to run out of).
    Dropout is 0: distillation reproduces the teacher's outputs, on at most a few epochs of text,
    where dropout would only add noise to the match.  ``slope_scale`` multiplies Jina's ALiBi slopes
    (recorded as ``alibi_slope_scale``, so the saved folder reads with the slopes it was trained with).
    """
    return JinaBertConfig(
        vocab_size=teacher.vocab_size,
        hidden_size=teacher.hidden_size,
        num_hidden_layers=teacher.num_hidden_layers,
        num_attention_heads=teacher.num_attention_heads,
        intermediate_size=teacher.intermediate_size,
        hidden_act=teacher.hidden_act,
        layer_norm_eps=teacher.layer_norm_eps,
        type_vocab_size=teacher.type_vocab_size,
        pad_token_id=teacher.pad_token_id,
        initializer_range=teacher.initializer_range,
        feed_forward_type=ORIGINAL_FEED_FORWARD,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        training_length=training_length,
        alibi_slope_scale=slope_scale,
        tie_word_embeddings=False,  # the encoder alone: no MLM decoder to tie
    )


def student_name(teacher_name: str) -> str | None:
    """The student's name for a teacher tensor: the same name, or None for the dropped position table."""
    return None if teacher_name == POSITION_TABLE else teacher_name


def student_state(
    teacher_state: Mapping[str, torch.Tensor], student_names: Iterable[str]
) -> dict[str, torch.Tensor]:
    """The student's weights: every teacher tensor but the position table, under the student's names.

    Complete both ways, or a ValueError: every teacher tensor is copied or is the one dropped table
    (which the teacher must have), and every student tensor is filled, with the teacher's shape.
    """
    if POSITION_TABLE not in teacher_state:
        raise UserError(f"the teacher has no {POSITION_TABLE}: not a BERT with a learned position table")
    state = {}
    for name, tensor in teacher_state.items():
        target = student_name(name)
        if target is not None:
            state[target] = tensor.detach().clone()
    student_names = set(student_names)
    missing, unexpected = sorted(student_names - set(state)), sorted(set(state) - student_names)
    if missing or unexpected:
        raise UserError(
            f"the teacher's weights do not map onto the student: student tensors with no teacher tensor {missing}, "
            f"teacher tensors with no place in the student {unexpected}"
        )
    return state


def build_student(teacher: BertModel, training_length: int, slope_scale: float = 1.0) -> JinaBertModel:
    """The student at step 0: a JinaBERT holding every teacher weight but the position table."""
    student = JinaBertModel(student_config(teacher.config, training_length, slope_scale))
    expected = student.state_dict()
    state = student_state(teacher.state_dict(), expected)
    wrong_shape = [name for name, tensor in state.items() if tensor.shape != expected[name].shape]
    if wrong_shape:
        raise UserError(f"teacher and student shapes differ for {wrong_shape}")
    student.load_state_dict(state, strict=True)
    return student.float()
