"""The settings of a retrofit (``longembed retrofit``): plain data that round-trips through JSON.

No torch or transformers import, so that ``longembed retrofit --help`` shows these defaults without
loading the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from longembed.errors import UserError
from longembed.training.choices import PRECISIONS
from longembed.training.config import FlatConfig, require_positive_integers

#: The shortest training text: [CLS], at least one token, [SEP].
MIN_TEXT_TOKENS = 3


@dataclass
class RetrofitConfig(FlatConfig):
    """Hyperparameters of a retrofit by distillation; ``to_dict``/``from_dict`` round-trip them.

    - ``max_steps`` optimizer steps of ``batch_size`` texts; every text of a batch has the same
      length, drawn uniformly from [``min_seq_length``, ``max_seq_length``] tokens (special tokens
      included), so no batch holds padding.  ``max_seq_length`` is Lo, at most the teacher's window
      (None: the whole window, 512 for BERT); the student's ``training_length`` is recorded as Lo.
    - Loss: 1 - cos(student's pooled vector, teacher's) + ``token_weight`` x MSE of the last-layer
      token states (``token_weight=0``: the pooled term alone, and no token states are cached);
      with ``pairs_weight > 0``, plus ``pairs_weight`` x InfoNCE (tau ``pairs_temperature``) over
      ``pairs_batch_size`` training pairs with ``hard_negatives`` negatives each (``retrofit.pairs``).
    - The student's ALiBi slopes are Jina's times ``slope_scale`` (1: Jina's).  Jina's steepest head
      (m = 2^-0.5 for 12 heads) hardly sees past 14 tokens, where the teacher's heads read the whole text:
      a smaller scale starts the student closer to the teacher (all-MiniLM-L6-v2 at step 0, 256-token
      held-out SQuAD windows: pooled cosine 0.18 at 1, 0.52 at 0.25; ``benchmarks/retrofit_start.py``), at
      the price of a weaker decay with distance.
    - ``held_out_articles`` SQuAD articles (chosen with ``seed``) are kept out of the texts and pairs
      read from a data folder; the short-text fidelity is scored on them (``retrofit.fidelity``).
    - AdamW with ``learning_rate``, linear warm-up over ``warmup_steps`` then linear decay to 0, and
      ``weight_decay``; checkpoints every ``save_steps``, the loss logged every ``logging_steps``.
    - ``precision`` "bf16" runs the student in bfloat16 autocast (CPU or GPU), "fp16" needs CUDA; the
      teacher's targets are float32 in every case.
    """

    config_kind: ClassVar[str] = "retrofit"

    max_steps: int = 2000
    batch_size: int = 16
    max_seq_length: int | None = None
    min_seq_length: int = 64
    learning_rate: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    token_weight: float = 1.0
    slope_scale: float = 1.0
    pairs_weight: float = 0.0
    pairs_batch_size: int = 16
    pairs_temperature: float = 0.05
    hard_negatives: int = 1
    held_out_articles: int = 5
    save_steps: int = 100
    logging_steps: int = 10
    seed: int = 0
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        require_positive_integers(
            self, ("max_steps", "batch_size", "min_seq_length", "save_steps", "logging_steps", "pairs_batch_size")
        )
        if self.max_seq_length is not None:
            require_positive_integers(self, ("max_seq_length",))
        if self.min_seq_length < MIN_TEXT_TOKENS:
            raise UserError(f"min_seq_length must be at least {MIN_TEXT_TOKENS} tokens, got {self.min_seq_length}")
        if self.max_seq_length is not None and self.max_seq_length < self.min_seq_length:
            raise UserError(
                f"max_seq_length {self.max_seq_length} is shorter than min_seq_length {self.min_seq_length}"
            )
        if not self.learning_rate > 0 or self.warmup_steps < 0 or self.weight_decay < 0:
            raise UserError("learning_rate must be positive, warmup_steps and weight_decay >= 0")
        if not self.token_weight >= 0:
            raise UserError(f"token_weight must be >= 0, got {self.token_weight}")
        if not self.slope_scale > 0:
            raise UserError(f"slope_scale must be positive, got {self.slope_scale}")
        if not self.pairs_weight >= 0:
            raise UserError(f"pairs_weight must be >= 0, got {self.pairs_weight}")
        if not 0 < self.pairs_temperature <= 1:
            raise UserError(f"pairs_temperature (the InfoNCE tau) must be in (0, 1], got {self.pairs_temperature}")
        if not isinstance(self.held_out_articles, int) or self.held_out_articles < 0:
            raise UserError(f"held_out_articles must be an integer >= 0, got {self.held_out_articles!r}")
        if not isinstance(self.hard_negatives, int) or isinstance(self.hard_negatives, bool) or self.hard_negatives < 0:
            raise UserError(f"hard_negatives must be an integer >= 0, got {self.hard_negatives!r}")
        if self.precision not in PRECISIONS:
            raise UserError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
