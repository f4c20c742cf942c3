"""The hyperparameters of a contrastive run (position tuning, the Jina recipe's pairs and negatives).

Plain data with no torch or transformers import, so that ``longembed tune --help`` shows the paper's
defaults without loading the training stack (``longembed.training.contrastive`` runs them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from longembed.errors import UserError
from longembed.training.choices import PRECISIONS


class FlatConfig:
    """What every flat training config (a dataclass of plain values) shares: ``to_dict``/``from_dict``
    round-trip it through JSON, and ``with_overrides`` changes named fields; an unknown name is a
    ValueError naming the config (``config_kind``) and its known fields, never silently ignored."""

    config_kind: ClassVar[str] = "training"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        cls._check_names(values)
        return cls(**values)

    def with_overrides(self, **options: Any) -> Self:
        """A copy with ``options`` (field names) changed."""
        self._check_names(options)
        return dataclasses.replace(self, **options)  # type: ignore[type-var]

    @classmethod
    def _check_names(cls, values: dict[str, Any]) -> None:
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(values) - known)
        if unknown:
            raise UserError(f"unknown {cls.config_kind} option(s) {unknown}; known: {sorted(known)}")


def require_positive_integers(config: Any, names: Sequence[str]) -> None:
    """Raise a ValueError naming the first of ``names`` that is not a positive integer on ``config``
    (a bool is not an integer here: ``batch_size=True`` is a mistake, not 1)."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(f"{name} must be a positive integer, got {value!r}")


@dataclass
class ContrastiveConfig(FlatConfig):
    """Hyperparameters of a contrastive run, named as in the papers; round-trips through JSON.

    Defaults are LongEmbed's further tuning (Appendix B and Table 4: lr 5e-4, 100 warm-up steps,
    3 epochs, batch 512, tau 0.01, weight decay 0.01, 7 hard negatives).
    """

    config_kind: ClassVar[str] = "contrastive training"

    batch_size: int = 512
    learning_rate: float = 5e-4
    warmup_steps: int = 100
    epochs: float = 3.0
    max_steps: int | None = None
    weight_decay: float = 0.01
    temperature: float = 0.01
    symmetric: bool = False
    hard_negatives: int = 7
    max_seq_length: int | None = None
    save_steps: int = 100
    logging_steps: int = 10
    seed: int = 0
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        require_positive_integers(self, ("batch_size", "save_steps", "logging_steps"))
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise UserError(f"max_steps must be a positive integer, got {self.max_steps!r}")
        if not 0 < self.temperature <= 1:
            raise UserError(f"temperature (the InfoNCE tau) must be in (0, 1], got {self.temperature}")
        if self.learning_rate <= 0 or self.epochs <= 0 or self.warmup_steps < 0 or self.weight_decay < 0:
            raise UserError("learning_rate and epochs must be positive, warmup_steps and weight_decay >= 0")
        if self.hard_negatives < 0:
            raise UserError(f"hard_negatives must be >= 0, got {self.hard_negatives}")
        if self.precision not in PRECISIONS:
            raise UserError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")



def default_tuning_config(**overrides: Any) -> ContrastiveConfig:
    """The paper's hyperparameters (Appendix B) with weight decay 0 (``longembed.training.tune``'s docstring)."""
    return ContrastiveConfig(**{"weight_decay": 0.0, **overrides})
