"""The server's Prometheus metrics, in a registry of its own (two servers in one process never mix)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from longembed.serving.batcher import BatchRecord

CONTENT_TYPE = CONTENT_TYPE_LATEST
_TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
_INPUT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
_SECOND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass
class ServerMetrics:
    """Requests, tokens, overflow outcomes, batch sizes and latency."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _longest_call: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter("longembed_requests", "HTTP requests by route and status", ["route", "status"], registry=r)
        self.inputs = Counter("longembed_inputs", "Inputs embedded", ["route"], registry=r)
        self.tokens = Counter("longembed_tokens", "Tokens embedded (prompt and special tokens included)", ["route"], registry=r)
        self.over_window = Counter("longembed_inputs_over_window", "Inputs longer than the model's window Lo", registry=r)
        self.truncated = Counter("longembed_inputs_truncated", "Inputs cut to Lo tokens (overflow=truncate)", registry=r)
        self.refused = Counter("longembed_inputs_refused", "Inputs refused by the overflow policy (413)", registry=r)
        self.batch_inputs = Histogram("longembed_batch_inputs", "Inputs per model batch", buckets=_INPUT_BUCKETS, registry=r)
        self.batch_tokens = Histogram("longembed_batch_tokens", "Tokens per model batch", buckets=_TOKEN_BUCKETS, registry=r)
        self.batch_seconds = Histogram("longembed_batch_seconds", "Seconds per model batch", buckets=_SECOND_BUCKETS, registry=r)
        self.call_seconds = Histogram(
            "longembed_model_call_seconds", "Seconds per model call (a batch runs as one or more calls; a call is the "
            "longest work a waiting request can be stuck behind)", buckets=_SECOND_BUCKETS, registry=r)
        self.longest_call = Gauge("longembed_model_call_seconds_max", "The longest model call since the server started",
                                  registry=r)
        self.latency = Histogram(
            "longembed_request_seconds", "Request latency in seconds", ["route"], buckets=_SECOND_BUCKETS, registry=r
        )
        self.queue_tokens = Gauge("longembed_queue_tokens", "Tokens waiting for a batch", registry=r)
        self.queue_inputs = Gauge("longembed_queue_inputs", "Inputs waiting for a batch", registry=r)
        self.client_disconnects = Counter(
            "longembed_client_disconnects", "Requests whose client left before the answer (queued work cancelled)",
            ["route"], registry=r,
        )

    def record_batch(self, batch: BatchRecord) -> None:
        self.batch_inputs.observe(batch.n_inputs)
        self.batch_tokens.observe(batch.n_tokens)
        self.batch_seconds.observe(batch.seconds)
        for seconds in batch.call_seconds:
            self.call_seconds.observe(seconds)
        if batch.call_seconds:
            self._longest_call = max(self._longest_call, *batch.call_seconds)
            self.longest_call.set(self._longest_call)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
