"""A server's limits and defaults (``longembed serve`` options); plain data, no web framework needed."""

from __future__ import annotations

from dataclasses import dataclass

from longembed.errors import UserError
from longembed.flag_fields import flag_field
from longembed.overflow import overflow_names, resolve_overflow
from longembed.serving.scheduling import SCHEDULERS

#: The server's overflow names (:mod:`longembed.overflow`): what happens to an input longer than Lo.
OVERFLOW_POLICIES = overflow_names("server")

#: Models trained with Matryoshka representation learning: the output sizes they support.
MATRYOSHKA_DIMENSIONS = {"nomic-embed-text-v1.5": (768, 512, 256, 128, 64)}


@dataclass
class ServerSettings:
    """Limits and defaults of one server.  Each field is a ``longembed serve`` flag of the same name
    (``max_batch_tokens`` -> ``--max-batch-tokens``), with the help text given here."""

    overflow: str = flag_field(
        "what to do with inputs longer than the model's window Lo: extend (the method, up to --max-length; "
        "longer is a 413), truncate_to_max (cut to --max-length, the extension kept, as eval cuts), truncate "
        "(= truncate_to_window: cut to Lo, the extension unused) or error (= error_over_window: 413)",
        "extend", choices=OVERFLOW_POLICIES)
    max_batch_tokens: int = flag_field("tokens per model batch, across concurrent requests", 16384)
    max_queue_tokens: int | None = flag_field(
        "tokens that may wait for a batch before requests get 429 (default: 32 x --max-batch-tokens)", None)
    max_client_batch_size: int = flag_field("inputs per request", 2048)
    max_body_bytes: int = flag_field("largest request body in bytes", 64 * 1024 * 1024)
    max_document_tokens: int = flag_field(
        "longest text, in tokens, the chunk routes take (late chunking runs it as overlapping windows of "
        "--max-length), and most tokens one /tokenize request lists", 65536)
    max_chunks_per_request: int = flag_field("chunk vectors per request (/embed_chunks, late_chunking)", 8192)
    max_token_vectors: int = flag_field("token vectors per /embed_all request (each is a full-size vector)", 16384)
    dimensions: tuple[int, ...] | None = flag_field(
        "output sizes clients may ask for with 'dimensions', e.g. 768,512,256 (default: the model's "
        "Matryoshka sizes when known, else only the full size)", None, metavar="LIST")
    allow_any_dimensions: bool = flag_field(
        "let clients cut vectors to any size (the model may not be trained for it)", False)
    served_model_name: str | None = flag_field("the name in responses (default: the folder name)", None)
    api_key: str | None = flag_field(
        "require 'Authorization: Bearer KEY' on every route but /health, /docs and /metrics included (default: "
        "$LONGEMBED_API_KEY, else no key; an empty key is an error, --no-auth serves without one on purpose)", None)
    allowed_hosts: tuple[str, ...] = flag_field(
        "Host header values served besides localhost and the bound address, comma-separated ('*' for any; "
        "needed when binding 0.0.0.0 behind a name)", (), metavar="LIST")
    cors_origins: tuple[str, ...] = flag_field(
        "browser origins allowed to call the server, e.g. http://localhost:3000 (default: none)", (), metavar="LIST")
    shutdown_seconds: float = flag_field(
        "on SIGTERM, the whole shutdown takes at most this many seconds: accepted work that can finish by "
        "then finishes, the rest is answered 503 with Retry-After", 30.0)
    # scheduling and early refusal (issue 40)
    scheduler: str = flag_field(
        "which waiting inputs run next: fair (cheapest request first, with aging: short requests are not "
        "starved by long ones, and none waits forever) or fifo (arrival order)", "fair", choices=SCHEDULERS)
    sub_batch_tokens: int = flag_field(
        "under --scheduler fair, the most padded tokens of one model call: a batch runs as calls of at most this "
        "many tokens, shortest first, and cheaper requests that arrive meanwhile are run between its calls, so a "
        "short request waits for about one call, not a whole batch (an input longer than this runs alone; "
        "smaller calls cost a little throughput; fifo runs a batch as one call)", 8192)
    queue_seconds: float = flag_field(
        "longest a request may wait for the model; a request that would wait longer (estimated from the queue "
        "and the measured tokens/s) gets 429 with Retry-After at once. A client may ask for less with the "
        "header X-Longembed-Queue-Seconds. 0: no limit", 60.0)

    def __post_init__(self) -> None:
        resolve_overflow(self.overflow, "server")
        for name in ("max_batch_tokens", "sub_batch_tokens", "max_client_batch_size", "max_body_bytes", "max_document_tokens",
                     "max_chunks_per_request", "max_token_vectors"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be positive, got {getattr(self, name)}")
        if self.api_key is not None and not self.api_key.strip():
            raise UserError("api_key is empty; give a key, or none to serve without one")
        if self.api_key is not None and not (self.api_key.isascii() and self.api_key.isprintable()
                                             and self.api_key == self.api_key.strip()):
            raise UserError("api_key must be printable ASCII without spaces at its ends: a client cannot send "
                             "any other key in an HTTP header")
        if self.queue_seconds < 0:
            raise UserError(f"queue_seconds must be >= 0 (0: no limit), got {self.queue_seconds}")
        if self.scheduler not in SCHEDULERS:
            raise UserError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}")
        if self.shutdown_seconds < 0:
            raise UserError(f"shutdown_seconds must be >= 0, got {self.shutdown_seconds}")
