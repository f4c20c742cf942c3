"""EncoderConfig: everything that decides what vector a text gets, in one round-trippable object.

It is the single source of truth for an encoder (and the key of the benchmark's embedding cache):
``save``/``load`` write and read it as JSON, like a sentence-transformers module config.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.extension.methods import METHODS, POSITION_SCHEMES
from longembed.extension.scaling import APPLY_MODES, SCALE_MODES
from longembed.loading import POOLING_MODES

OVERFLOW_MODES = ("truncate", "error")
ATTENTION_SCALES = (None, "logn")


@dataclass
class EncoderConfig:
    """How to encode: the model, the extension method and its switches.

    model:            folder, sentence-transformers folder, hub id, or "default".
    method:           one of ``longembed.extension.METHODS``.
    max_length:       Lt, the most tokens an input may have (prompt and special tokens included);
                      longer inputs are truncated with a warning, or rejected (``on_overflow``).
    original_length:  Lo, the model's trained context; read from the model config when None.
    position_scheme:  "ape", "rope" or "alibi"; detected from the model config when None.
    scale:            "fixed" (s = ceil(Lt / Lo)) or "per_document" (s = ceil(n / Lo)).
    apply_to:         "long" (only inputs longer than Lo are extended) or "all".
    attention_scale:  None or "logn" (logits x max(1, log n / log Lo)).
    temperature:      TempScale tau in (0, 1]: logits / tau in every layer.
    temperature_decay, temperature_reference: length-aware TempScale, tau(n) = temperature x
                      (log reference / log n) ** decay above ``reference`` tokens (0: constant tau).
    ntk_factor:       NTK lambda; None -> Table 6 by scale.
    group_size, window: SelfExtend g and w; None -> Table 6 by scale.
    yarn_options:     extra YaRN rotary parameters (beta_fast, beta_slow, ...).
    pooling:          "mean", "cls" or "last"; read from the model folder when None.
    prompts:          named prompts ("query", "document", ...), merged over the folder's.
    """

    model: str = "default"
    method: str = "truncate"
    max_length: int | None = None
    original_length: int | None = None
    position_scheme: str | None = None
    scale: str = "fixed"
    apply_to: str = "long"
    attention_scale: str | None = None
    temperature: float = 1.0
    temperature_decay: float = 0.0
    temperature_reference: int = 512
    ntk_factor: float | None = None
    group_size: int | None = None
    window: int | None = None
    yarn_options: dict[str, float] = field(default_factory=dict)
    pooling: str | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    on_overflow: str = "truncate"

    def __post_init__(self) -> None:
        self.model = str(self.model)
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose from: {', '.join(METHODS)}")
        _check_choice("scale", self.scale, SCALE_MODES)
        _check_choice("apply_to", self.apply_to, APPLY_MODES)
        _check_choice("attention_scale", self.attention_scale, ATTENTION_SCALES)
        _check_choice("on_overflow", self.on_overflow, OVERFLOW_MODES)
        if self.position_scheme is not None:
            _check_choice("position_scheme", self.position_scheme, POSITION_SCHEMES)
        if self.pooling is not None:
            _check_choice("pooling", self.pooling, POOLING_MODES)
        if not (
            isinstance(self.temperature, int | float)
            and 0 < self.temperature <= 1
            and math.isfinite(self.temperature)
        ):
            raise ValueError(f"temperature must be in (0, 1] (TempScale), got {self.temperature!r}")
        if not (isinstance(self.temperature_decay, int | float) and 0 <= self.temperature_decay <= 4):
            raise ValueError(f"temperature_decay must be in [0, 4], got {self.temperature_decay!r}")
        for name in ("max_length", "original_length", "group_size", "window", "temperature_reference"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.ntk_factor is not None and self.ntk_factor <= 0:
            raise ValueError(f"ntk_factor must be positive, got {self.ntk_factor!r}")

    @classmethod
    def from_options(cls, model: str, method: str, max_length: int | None, **options: Any) -> EncoderConfig:
        """Build from ``load_encoder``'s keyword options, with a clear error for unknown ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"unknown option(s) {unknown}; valid options: {sorted(known - {'model', 'method', 'max_length'})}"
            )
        return cls(model=str(model), method=method, max_length=max_length, **options)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> EncoderConfig:
        return cls(**json.loads(Path(path).read_text()))


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
