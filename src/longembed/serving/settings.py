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
    #: clients must send ``Authorization: Bearer <api_key>`` (None: no key; ``/health`` stays open)
    api_key: str | None = None
    #: Host header values served besides this machine's loopback names and the bound address
    #: ("*": any; a name such as "embed.example.com", or "*.example.com")
    allowed_hosts: tuple[str, ...] = ()
    #: browser origins allowed to call the server (CORS); none by default
    cors_origins: tuple[str, ...] = ()
    #: seconds shutdown waits for queued work before it cancels what is left (answered 503)
    shutdown_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.overflow not in OVERFLOW_POLICIES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_POLICIES)}; got {self.overflow!r}")
        for name in ("max_batch_tokens", "max_client_batch_size", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("api_key is empty; give a key, or none to serve without one")
        if self.shutdown_seconds < 0:
            raise ValueError(f"shutdown_seconds must be >= 0, got {self.shutdown_seconds}")
