"""Stage I of Jina Embeddings v2: masked-language-model pre-training (section 4.3), and its measure.

The recipe, each part named as in the paper and done with transformers' own tools:

- **Sequences** come from single documents: the first ``training_length`` tokens of each, the rest
  dropped; no packing of several documents into one sequence, one sequence per document
  (:func:`tokenize_documents`).  Batches are padded dynamically, so their masked-token counts vary.
- **Masking**: 30% of the words, whole-word masking, and of the masked tokens 80% become [MASK],
  10% a random token, 10% stay (:class:`~longembed.training.masking.WholeWordMaskCollator`, seeded per
  batch by longembed, not by a library's private random state).  The loss is the cross entropy of
  eq. (2) over the masked tokens.
- **Optimizer**: AdamW (beta1 0.9, beta2 0.98, eps 1e-6, weight decay 0.01), learning rate linear from
  0 to eta over the warm-up steps, then linearly to 0; dropout 0.1 and attention dropout 0.1.
- **Training loop**: transformers' ``Trainer``: checkpoints every ``save_steps`` in
  ``OUTPUT/checkpoints``, a killed run resumes from the last one (the masks, the data order and the
  RNG states are restored, so a resumed run ends with the weights of an uninterrupted one), progress
  bars, fp16/bf16 where the device has them.

Two models (:func:`build_mlm_model`): JinaBERT (``positions="alibi"``, ``JinaBertForMaskedLM``) and
its twin with learned absolute positions (``positions="absolute"``, transformers' ``BertForMaskedLM``
with a ``training_length``-row position table).  They share sizes, post-LN, the MLM head, tokenizer,
data and optimizer; they differ in two things: the positions (the point of the comparison) and the
feed-forward, GEGLU in JinaBERT and BERT's GELU MLP in the twin, whose intermediate size is 3/2 of
JinaBERT's so both feed-forwards have the same parameters and FLOPs (GEGLU: h x 2I + I x h).

:func:`mlm_accuracy_by_length` measures masked-token accuracy of a saved model at several lengths
(the paper's Figure 2); the APE twin runs past its table with PI or RP position ids
(``longembed.extension.ape``).

Modules, one job each: ``config`` (the two settings dataclasses), ``model`` (building and opening the
models), ``data`` (sequences and masking), ``trainer`` (the training loop), ``accuracy`` (the measure).
"""

from __future__ import annotations

from longembed.training.mlm.accuracy import LengthAccuracy, mlm_accuracy_by_length
from longembed.training.mlm.config import POSITIONS, MLMConfig, MLMModelConfig
from longembed.training.mlm.data import mlm_collator, tokenize_documents
from longembed.training.mlm.model import (
    APE_TWIN_INTERMEDIATE_FACTOR,
    build_mlm_model,
    is_alibi_folder,
    load_mlm_model,
    load_tokenizer,
)
from longembed.training.mlm.trainer import MaskedTokensTrainer, MLMSummary, train_mlm

__all__ = [
    "APE_TWIN_INTERMEDIATE_FACTOR",
    "POSITIONS",
    "LengthAccuracy",
    "MLMConfig",
    "MLMModelConfig",
    "MLMSummary",
    "MaskedTokensTrainer",
    "build_mlm_model",
    "is_alibi_folder",
    "load_mlm_model",
    "load_tokenizer",
    "mlm_accuracy_by_length",
    "mlm_collator",
    "tokenize_documents",
    "train_mlm",
]
