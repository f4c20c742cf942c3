"""Retrofit bidirectional ALiBi onto a BERT you already use, by distillation (``longembed retrofit``).

    >>> retrofit_alibi("all-MiniLM-L6-v2", "minilm-alibi", data_dir="../shared/data", max_steps=2000)
    >>> load_encoder("minilm-alibi", method="native")      # reads 8k tokens, no extension method

A BERT's knowledge is in its weights; only its learned position table (512 rows) ties it to 512 tokens.
The retrofit removes the table, puts Jina's bidirectional ALiBi (-m_h |i - j|, Jina's slopes) in every
layer, and trains this student to reproduce the original model (the teacher) on texts up to the
teacher's window Lo.  If ALiBi extrapolates as in Jina Embeddings v2, the student then reads far
beyond Lo with nothing else added.  The design, and why:

- **Student** (``student``): JinaBERT with ``feed_forward_type="original"`` (BERT's feed-forward, the
  third variant of Jina's remote code), the teacher's sizes, activation and LayerNorm epsilon, and
  every teacher weight but ``embeddings.position_embeddings`` copied under the same name; the map is
  checked complete both ways.  All weights train (attention must re-learn where tokens are).
  Dropout 0: the target is the teacher's own output, not a task to regularise for.
- **Loss** (``trainer.distillation_loss``): 1 - cos(student's mean-pooled vector, teacher's), the
  vector users compare, plus ``token_weight`` x MSE of the last-layer token states over real tokens
  (a dense signal: every token's state, which late chunking and token-level uses also read).
- **Texts** (``data``): benchmark-safe text only (``training.data.mlm_documents``: SQuAD dev and
  unused HotpotQA paragraphs; never QMSum, SQuALITY, the essays or the benchmark's HotpotQA items),
  or a user's file; joined in order and cut into texts of 64..Lo tokens, one random length per batch
  (no padding).  On all-MiniLM-L6-v2 the shared data gives 5.9M tokens, about 20,700 texts.
- **Teacher's targets** (``targets``): computed once per text before training and cached on disk as
  numpy, keyed by a digest of the teacher's files and of the planned texts: pooled vectors (float32,
  1.5 KB a text) and, when ``token_weight > 0``, token states (float16, about 221 KB for a 288-token
  MiniLM text: 4.6 GB for all 20,700 texts).  Caching the token states costs disk that this machine
  has (the size is checked against free space first), and saves the teacher's forward, a third of a
  step, in every later epoch, resume and rerun.  ``token_weight=0`` caches and trains on the pooled
  vectors alone.
- **Training** (``trainer``): transformers' Trainer (AdamW, linear warm-up and decay, checkpoints,
  resume at the exact batch with the RNG states, bf16/fp16), the planned batches in order; the loss
  and its two parts are logged and recorded (``RetrofitSummary``), the progress bar shows the loss.
- **Folder** (``folder``): JinaBERT weights and config (``training_length`` = Lo, reach 8192), the
  teacher's tokenizer and sentence-transformers modules (pooling, normalization, prompts), and
  ``longembed_retrofit.json`` (teacher, options, data, targets, summary).

- **Pairs** (``pairs``, optional): ``pairs_weight`` x InfoNCE on benchmark-safe training pairs, a batch
  beside every step (distillation says nothing about texts longer than Lo; the pairs add a retrieval
  signal of their own).
- **Fidelity** (``fidelity``): ``held_out_articles`` SQuAD articles are kept out of the texts and pairs;
  at the end the student's vectors of their paragraphs and questions are compared with the teacher's
  (cosine) and both are scored on question -> paragraph retrieval (nDCG@10).  ``plot`` draws the loss curve.

Modules: ``config`` (RetrofitConfig, plain data), ``student``, ``data``, ``targets``, ``pairs``, ``trainer``,
``folder``, ``fidelity``, ``plot``, ``pipeline`` (:func:`retrofit_alibi`: plan -> targets -> train -> write).  Names are
imported on first use, so the command line's ``--help`` reads ``config`` without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.training.retrofit.config import RetrofitConfig
    from longembed.training.retrofit.pipeline import (
        RECORD_FILE,
        RetrofitResult,
        RetrofitSummary,
        retrofit_alibi,
    )
    from longembed.training.retrofit.student import (
        POSITION_TABLE,
        build_student,
        student_config,
        student_name,
        student_state,
    )
    from longembed.training.retrofit.trainer import distillation_loss

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
