"""The one place runs build encoders: :class:`EncoderFactory`, each encoder behind the embedding cache.

``longembed eval`` builds one encoder, the TempScale sweep one per (decay, reference) pair, the
collapse measurement one for all its taus; all three build it here and wrap it in the same
:class:`~longembed.evaluation.cache.CachedEncoder` the runner uses
(:func:`~longembed.evaluation.runner.cached_encoder`), so every vector any of them computes is cached
the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.encoder import load_encoder
from longembed.encoder_protocol import Encoder


@dataclass
class EncoderFactory:
    """Builds encoders of one model and method: ``load_encoder(model, method=..., max_length=...,
    **options, **extra)`` (``device=`` only when one is given); ``build`` replaces ``load_encoder``
    (tests pass stubs).  ``built`` records the ``extra`` options of every encoder built."""

    model: str | Path
    method: str | None = "truncate"
    max_length: int | None = None
    device: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    build: Callable[..., Encoder] = load_encoder
    built: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, **extra: Any) -> Encoder:
        kwargs: dict[str, Any] = {"method": self.method, "max_length": self.max_length, **self.options, **extra}
        if self.device is not None:
            kwargs["device"] = self.device
        self.built.append(dict(extra))
        return self.build(self.model, **kwargs)
