"""The Jina Embeddings v2 training recipe in three stages, as one API (``longembed train jina``).

    >>> config = JinaRecipeConfig()                      # the small reproduction; .save/.load as JSON
    >>> train_jina("mlm", "runs/jina/mlm", config=config, data_dir="../shared/data")
    >>> train_jina("pairs", "runs/jina/pairs", init="runs/jina/mlm", config=config, data_dir=...)
    >>> train_jina("negatives", "runs/jina/negatives", init="runs/jina/pairs", config=config, data_dir=...)
    >>> load_encoder("runs/jina/negatives", method="native")

- **Stage I, ``mlm``** (section 4.3): masked-language-model pre-training of a new JinaBERT
  (``training.mlm``) on Wikipedia paragraphs that the benchmark does not use, or a user's jsonl texts.
  The folder holds the MLM head in the released key layout (``JinaBertForMaskedLM.from_pretrained``),
  the tokenizer, and sentence-transformers files with mean pooling (section 5), so ``load_encoder``
  and ``SentenceTransformer`` open it too.  ``model.positions="absolute"`` trains the APE twin.
- **Stage II, ``pairs``** (section 5.1): the previous folder as a SentenceTransformer (Transformer +
  mean Pooling) trained with the bidirectional InfoNCE of eqs. (3)+(4), tau = 0.05, in-batch
  negatives only (``contrastive.train_contrastive`` with ``symmetric=True, hard_negatives=0``).
- **Stage III, ``negatives``** (section 5.2): the same trainer with hard negatives, eq. (5) (15 per
  pair in the paper: HotpotQA distractors, other paragraphs of the same SQuAD article; missing ones
  are filled with random in-batch-style negatives by ``contrastive.pairs_dataset``).

After each stage the held-out pairs (whole groups kept out of stages II and III) are scored:
query -> positive retrieval among all held-out positives (:func:`held_out_retrieval`).

Every stage checkpoints into ``OUTPUT/checkpoints`` and resumes from there when called again with the
same arguments; a finished folder is never overwritten unless asked.

Modules, one job each: ``config`` (the recipe's settings), ``data`` (each stage's texts and pairs),
``folders`` (model folders: sentence-transformers files, lengths, the tokenizer), ``held_out`` (the
retrieval score after each stage), ``stages`` (:func:`train_jina`).
"""

from __future__ import annotations

from longembed.training.jina.config import (
    JinaRecipeConfig,
    RecipeData,
    check_stage,
    negatives_stage_defaults,
    pairs_stage_defaults,
)
from longembed.training.jina.data import mlm_corpus, read_texts_jsonl, recipe_pairs
from longembed.training.jina.folders import RECORD_FILE, sentence_model, write_sentence_transformers_files
from longembed.training.jina.held_out import held_out_retrieval
from longembed.training.jina.stages import StageResult, train_jina

__all__ = [
    "RECORD_FILE",
    "JinaRecipeConfig",
    "RecipeData",
    "StageResult",
    "check_stage",
    "held_out_retrieval",
    "mlm_corpus",
    "negatives_stage_defaults",
    "pairs_stage_defaults",
    "read_texts_jsonl",
    "recipe_pairs",
    "sentence_model",
    "train_jina",
    "write_sentence_transformers_files",
]
