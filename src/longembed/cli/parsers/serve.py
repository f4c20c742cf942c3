"""The flags of ``longembed serve`` (the command itself: :mod:`longembed.cli.serve`).

Only light imports here: ``longembed serve --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
import os

from longembed.cli.options import CommandHandler, add_encoder_arguments
from longembed.serving.choices import OVERFLOW_POLICIES

#: The environment variable that gives the server its API key (so it stays out of the process list).
API_KEY_ENV = "LONGEMBED_API_KEY"


def _dimensions(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dimensions takes sizes like 768,512,256; got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--dimensions takes positive sizes; got {text!r}")
    return sizes


def _names(text: str) -> tuple[str, ...]:
    """``"a.example.com, b"`` -> ("a.example.com", "b")."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve embeddings over HTTP (OpenAI /v1/embeddings, TEI /embed, /health, /info, /metrics)",
        description=(
            "Serve the model with its extension method. Inputs longer than the model's window Lo follow "
            "--overflow: extend (the method, up to --max-length; longer is a 413), truncate (cut to Lo, "
            "counted and reported) or error (413). Clients may choose per request ('overflow' field)."
        ),
    )
    group = parser.add_argument_group("server")
    group.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    group.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0 picks a free one)")
    group.add_argument("--overflow", choices=OVERFLOW_POLICIES, default="extend",
                       help="what to do with inputs longer than the model's window (default: extend)")
    group.add_argument("--max-batch-tokens", type=int, default=16384,
                       help="tokens per model batch, across concurrent requests (default: 16384)")
    group.add_argument("--max-queue-tokens", type=int, default=None,
                       help="tokens that may wait before requests get 429 (default: 32 x --max-batch-tokens)")
    group.add_argument("--max-client-batch-size", type=int, default=2048, help="inputs per request (default: 2048)")
    group.add_argument("--max-body-bytes", type=int, default=64 * 1024 * 1024,
                       help="largest request body (default: 64 MiB)")
    group.add_argument("--dimensions", type=_dimensions, default=None,
                       help="output sizes clients may ask for with 'dimensions' (default: the model's "
                       "Matryoshka sizes when known, else only the full size)")
    group.add_argument("--allow-any-dimensions", action="store_true",
                       help="let clients cut vectors to any size (the model may not be trained for it)")
    group.add_argument("--served-model-name", default=None, help="the name in responses (default: the folder name)")
    group.add_argument("--shutdown-seconds", type=float, default=30.0,
                       help="on SIGTERM, seconds to finish queued work before the rest is answered 503 (default: 30)")
    safety = parser.add_argument_group("access")
    safety.add_argument("--api-key", default=os.environ.get(API_KEY_ENV),
                        help=f"require 'Authorization: Bearer KEY' on every route but /health (default: ${API_KEY_ENV}, "
                        "else no key)")
    safety.add_argument("--allowed-hosts", type=_names, default=(), metavar="LIST",
                        help="Host header values served besides localhost and the bound address, comma-separated "
                        "('*' for any; needed when binding 0.0.0.0 behind a name)")
    safety.add_argument("--cors-origins", type=_names, default=(), metavar="LIST",
                        help="browser origins allowed to call the server, e.g. http://localhost:3000 (default: none)")
    add_encoder_arguments(parser)
    parser.set_defaults(func=CommandHandler("longembed.cli.serve", "run"))
