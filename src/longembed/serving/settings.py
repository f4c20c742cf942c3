"""A server's limits and defaults (``longembed serve`` options); plain data, no web framework needed."""

from __future__ import annotations

from dataclasses import dataclass

from longembed.serving.choices import OVERFLOW_POLICIES

#: Models trained with Matryoshka representation learning: the output sizes they support.
MATRYOSHKA_DIMENSIONS = {"nomic-embed-text-v1.5": (768, 512, 256, 128, 64)}


@dataclass
class ServerSettings:
    """Limits and defaults of one server (``longembed serve`` options)."""

    overflow: str = "extend"
    max_batch_tokens: int = 16384
    #: tokens that may wait for a batch before requests get 429 (default: 32 batches' worth)
    max_queue_tokens: int | None = None
    max_client_batch_size: int = 2048
    max_body_bytes: int = 64 * 1024 * 1024
    #: output sizes allowed for ``dimensions`` (None: the model's Matryoshka sizes if it is known to have them)
    dimensions: tuple[int, ...] | None = None
    allow_any_dimensions: bool = False
    served_model_name: str | None = None

    def __post_init__(self) -> None:
        if self.overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}; got {self.overflow!r}")
        for name in ("max_batch_tokens", "max_client_batch_size", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
