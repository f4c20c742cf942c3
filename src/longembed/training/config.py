"""What the training configs share, the values their flags accept, and a contrastive run's hyperparameters.

Plain data with no torch or transformers import, so that the training commands' ``--help`` lists the
choices and the paper's defaults without loading the training stack.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from longembed.errors import UserError

#: Trainer precisions (fp16 needs CUDA).
PRECISIONS = ("fp32", "bf16", "fp16")
#: Extension methods whose new position rows ``longembed tune`` trains (LongEmbed Fig. 6a: PI > RP).
TUNABLE_METHODS = ("pi", "rp")
#: What ``longembed tune`` trains the new rows for (``training.tune_objectives``).
TUNE_OBJECTIVES = ("contrastive", "distill", "both")
#: The Jina v2 recipe's stages: MLM pre-training, pairs, hard negatives.
STAGES = ("mlm", "pairs", "negatives")
#: Benchmark-safe sources of training pairs (``training.data``).
SOURCES = ("squad", "hotpotqa")
#: What ``longembed retrofit`` can put in place of a BERT's position table (bidirectional ALiBi, Jina's slopes).
RETROFIT_POSITIONS = ("alibi",)


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
class TrainingConfig(FlatConfig):
    """The fields and checks every training run shares (contrastive, MLM, retrofit): the optimizer's
    schedule (``batch_size``, ``learning_rate``, ``warmup_steps``, ``weight_decay``, ``max_steps``), the
    bookkeeping (checkpoints every ``save_steps``, the loss logged every ``logging_steps``), ``seed``,
    ``precision`` (fp16 needs CUDA) and ``device`` (None: cuda if available).

    A subclass sets its own defaults by declaring a field again, lists its other fields that must be
    positive integers in ``positive_integers`` (``max_steps`` there when it may not be None), and adds
    its own checks in :meth:`check`.
    """

    positive_integers: ClassVar[tuple[str, ...]] = ()

    batch_size: int = 16
    learning_rate: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    max_steps: int | None = None
    save_steps: int = 100
    logging_steps: int = 10
    seed: int = 0
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        require_positive_integers(self, ("batch_size", "save_steps", "logging_steps", *self.positive_integers))
        if self.max_steps is not None:
            require_positive_integers(self, ("max_steps",))
        if not self.learning_rate > 0 or self.warmup_steps < 0 or self.weight_decay < 0:
            raise UserError("learning_rate must be positive, warmup_steps and weight_decay >= 0")
        if self.precision not in PRECISIONS:
            raise UserError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        self.check()

    def check(self) -> None:
        """The subclass's own checks (after the shared ones); raise a ValueError naming the field."""


@dataclass
class ContrastiveConfig(TrainingConfig):
    """Hyperparameters of a contrastive run, named as in the papers; round-trips through JSON.

    Defaults are LongEmbed's further tuning (Appendix B and Table 4: lr 5e-4, 100 warm-up steps,
    3 epochs, batch 512, tau 0.01, weight decay 0.01, 7 hard negatives); ``max_steps`` None: ``epochs``
    decide the length of the run.
    """

    config_kind: ClassVar[str] = "contrastive training"

    batch_size: int = 512
    learning_rate: float = 5e-4
    epochs: float = 3.0
    temperature: float = 0.01
    symmetric: bool = False
    hard_negatives: int = 7
    max_seq_length: int | None = None

    def check(self) -> None:
        if not 0 < self.temperature <= 1:
            raise UserError(f"temperature (the InfoNCE tau) must be in (0, 1], got {self.temperature}")
        if self.epochs <= 0:
            raise UserError(f"epochs must be positive, got {self.epochs}")
        if self.hard_negatives < 0:
            raise UserError(f"hard_negatives must be >= 0, got {self.hard_negatives}")


def default_tuning_config(**overrides: Any) -> ContrastiveConfig:
    """The paper's hyperparameters (Appendix B) with weight decay 0 (``longembed.training.tune``'s docstring)."""
    return ContrastiveConfig(**{"weight_decay": 0.0, **overrides})
