"""Fine-tune an encoder for late chunking with in-sequence negatives (``longembed train contextual``).

    >>> train_contextual(PATH / "all-MiniLM-L6-v2", "minilm-contextual", data_dir="../shared/data",
    ...                  method="pi", max_length=4096, doc_tokens=2048, max_steps=150)
    >>> load_encoder("minilm-contextual").encode_chunks([long_text], "tokens:256", late=True)

Late chunking embeds a long document in one pass and mean-pools each chunk from token states that saw the
whole document; off the shelf, a chunk's vector is diluted by the rest of the document.  ConTEB / InSeNT
(arXiv 2505.24782, code illuin-tech/contextual-embeddings) fine-tunes the model with that very pooling:
a query must pick its chunk among the other chunks of the same document (in-sequence negatives) and
among the chunks of the other documents of the step (in-batch negatives).  Here:

- **Data** (``data``): SQuAD 2.0 dev articles (paragraphs as chunks, answerable questions as queries) and
  the HotpotQA questions the benchmark does not use (ten passages as chunks, the supporting ones as the
  answers), packed to ``doc_tokens``; never QMSum, SQuALITY, the essays or the benchmark's HotpotQA
  items; ``held_out_articles`` SQuAD articles held out for the short-text check.
- **Model**: any mean-pooling encoder longembed loads, run through the extension method it will be used
  with (``method``/``max_length``, e.g. MiniLM + PI at 4096), with gradients (the encoder's
  ``runner.forward_states``); every weight trains.
- **Loss** (``loss``): ConTEB's weighted InSeNT (``in_sequence_weight``, ``temperature``) plus
  ``distill_weight`` x (1 - cos) between the model's and the original model's vectors of the step's
  queries and answer chunks embedded alone (targets cached on disk after a free-space check, ``targets``).
- **Training** (``trainer``): transformers' Trainer (atomic checkpoints, bit-identical resume, progress bar,
  gradient checkpointing); the record (``longembed_contextual.json``) holds the loss curve and its parts,
  and ``loss_curve.png`` draws it.
- **Folder** (``folder``): the original folder with the trained weights; ``load_encoder(folder)`` opens it
  with the method and Lt it was trained under, ``SentenceTransformer(folder)`` as the original model,
  ``advise --contextual folder`` measures its late chunks beside the original model's strategies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.training.contextual.config import ContextualConfig
    from longembed.training.contextual.loss import QueryTarget, distill_loss, insent_loss
    from longembed.training.contextual.pipeline import (
        RECORD_FILE,
        ContextualResult,
        ContextualSummary,
        train_contextual,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
