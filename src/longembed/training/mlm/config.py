"""Stage I's settings: the model's size and position scheme, and the MLM hyperparameters (plain data).

No torch or transformers import: the recipe's JSON config (``longembed train jina --help``) reads
them without loading the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from longembed.errors import UserError
from longembed.training.choices import PRECISIONS
from longembed.training.config import FlatConfig, require_positive_integers

POSITIONS = ("alibi", "absolute")


@dataclass
class MLMModelConfig:
    """The model's size and position scheme (defaults: the small reproduction of benchmarks/jina_recipe.py).

    ``positions`` "alibi" builds JinaBERT, "absolute" its twin with a learned position table of
    ``training_length`` rows.  ``intermediate_size`` is JinaBERT's I (GEGLU); the twin uses 3I/2.
    ``max_position_embeddings`` is what an ALiBi model declares it can read (Jina: 8192).
    """

    positions: str = "alibi"
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    feed_forward_type: str = "geglu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        if self.positions not in POSITIONS:
            raise UserError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        require_positive_integers(
            self, ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        )
        if self.hidden_size % self.num_attention_heads:
            raise UserError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise UserError(f"{name} must be in [0, 1), got {getattr(self, name)}")


@dataclass
class MLMConfig(FlatConfig):
    """Stage I hyperparameters, named as in the paper (section 4.3); round-trips through JSON.

    Paper values: sequences of 512 tokens, global batch 4096, eta 1e-3 / 6e-4 / 4e-4 (small / base /
    large), 10,000 warm-up steps of 100,000, AdamW (0.9, 0.98, 1e-6), weight decay 0.01, 30% whole-word
    masking with 80/10/10, FP16.  The defaults here are the small reproduction's (benchmarks/jina_recipe.py).
    """

    config_kind: ClassVar[str] = "MLM"

    training_length: int = 128
    batch_size: int = 32
    gradient_accumulation_steps: int = 1
    learning_rate: float = 1e-3
    warmup_steps: int = 60
    max_steps: int = 600
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    mlm_probability: float = 0.3
    whole_word_mask: bool = True
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    save_steps: int = 100
    logging_steps: int = 20
    seed: int = 0
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        require_positive_integers(
            self,
            ("training_length", "batch_size", "gradient_accumulation_steps", "max_steps", "save_steps", "logging_steps"),
        )
        if self.training_length < 8:
            raise UserError(f"training_length must be at least 8 tokens, got {self.training_length}")
        if (
            self.learning_rate <= 0
            or self.warmup_steps < 0
            or self.weight_decay < 0
            or self.max_grad_norm < 0
        ):
            raise UserError(
                "learning_rate must be positive; warmup_steps, weight_decay and max_grad_norm >= 0"
            )
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1 and self.adam_epsilon > 0):
            raise UserError("AdamW needs 0 <= beta1, beta2 < 1 and epsilon > 0")
        if not 0 < self.mlm_probability < 1:
            raise UserError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if (
            self.mask_replace_prob < 0
            or self.random_replace_prob < 0
            or self.mask_replace_prob + self.random_replace_prob > 1
        ):
            raise UserError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1")
        if self.precision not in PRECISIONS:
            raise UserError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
