"""The settings of ``longembed train contextual``: plain data that round-trips through JSON.

No torch or transformers import, so that ``longembed train contextual --help`` shows these defaults
without loading the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from longembed.errors import UserError
from longembed.training.config import TrainingConfig, require_positive_integers


@dataclass
class ContextualConfig(TrainingConfig):
    """Hyperparameters of contextual (late-chunking) fine-tuning; ``to_dict``/``from_dict`` round-trip them.

    - The model runs as longembed runs it for late chunking: ``method`` extends its window to
      ``max_length`` tokens (None: the model's own window, e.g. "truncate"); every training document is
      packed to at most ``doc_tokens`` tokens (special and prompt tokens included), which must fit
      ``max_length``.  A chunk is a paragraph (SQuAD) or a Wikipedia passage (HotpotQA).
    - A step is ``documents_per_step`` documents, each run once, its chunks mean-pooled from the token
      states (late chunking), and up to ``queries_per_document`` of its queries (sampled per step); each
      document is a SQuAD one with probability ``squad_share`` (None: drawn from all documents alike, where
      HotpotQA's one-question texts outnumber SQuAD's articles about 70 to 1).
    - Loss (InSeNT, ConTEB arXiv 2505.24782): ``in_sequence_weight`` x InfoNCE of each query against the
      chunks of its own document (in-sequence negatives) + (1 - ``in_sequence_weight``) x InfoNCE against
      its chunk and every chunk of the step's other documents (in-batch negatives), similarities over
      ``temperature`` (ConTEB: 0.5 and scale 20, i.e. 0.05); plus ``distill_weight`` x the mean of
      1 - cos(model's vector, original model's vector) of the step's queries and their chunks embedded
      alone (short texts stay where the original model put them; the targets are cached).
    - AdamW with ``learning_rate``, linear warm-up over ``warmup_steps`` then linear decay, ``weight_decay``;
      checkpoints every ``save_steps``, the loss logged every ``logging_steps`` (these, ``seed``,
      ``precision`` and ``device`` are :class:`~longembed.training.config.TrainingConfig`'s); ``gradient_checkpointing``
      recomputes each layer in the backward pass (memory of one layer's activations, about 1.3x the time).
    - ``held_out_articles`` SQuAD articles (chosen with ``seed``, as every longembed run chooses them) are
      never trained on: the short-text check scores them.
    """

    config_kind: ClassVar[str] = "contextual training"
    positive_integers: ClassVar[tuple[str, ...]] = (
        "doc_tokens", "max_steps", "documents_per_step", "queries_per_document",
    )

    #: Dataset rows per optimizer step (``training.runs.shared_trainer_arguments``): one planned step,
    #: whose size ``documents_per_step`` decides.
    batch_size: int = 1
    method: str = "truncate"
    max_length: int | None = None
    doc_tokens: int = 2048
    max_steps: int = 100
    documents_per_step: int = 4
    queries_per_document: int = 8
    squad_share: float | None = 0.5
    temperature: float = 0.05
    in_sequence_weight: float = 0.5
    distill_weight: float = 1.0
    learning_rate: float = 5e-5
    warmup_steps: int = 10
    gradient_checkpointing: bool = True
    held_out_articles: int = 5
    save_steps: int = 25
    logging_steps: int = 1

    def check(self) -> None:
        if self.batch_size != 1:
            raise UserError(f"batch_size is one planned step (documents_per_step sizes it), got {self.batch_size}")
        if self.max_length is not None:
            require_positive_integers(self, ("max_length",))
        if self.documents_per_step < 2 and self.in_sequence_weight < 1:
            raise UserError("in-batch negatives need documents_per_step >= 2 (or in_sequence_weight 1)")
        if self.squad_share is not None and not 0 <= self.squad_share <= 1:
            raise UserError(f"squad_share must be in [0, 1] (or None), got {self.squad_share}")
        if not 0 < self.temperature <= 1:
            raise UserError(f"temperature (the InfoNCE tau) must be in (0, 1], got {self.temperature}")
        if not 0 <= self.in_sequence_weight <= 1:
            raise UserError(f"in_sequence_weight must be in [0, 1], got {self.in_sequence_weight}")
        if not self.distill_weight >= 0:
            raise UserError(f"distill_weight must be >= 0, got {self.distill_weight}")
        if not isinstance(self.held_out_articles, int) or self.held_out_articles < 0:
            raise UserError(f"held_out_articles must be an integer >= 0, got {self.held_out_articles!r}")
