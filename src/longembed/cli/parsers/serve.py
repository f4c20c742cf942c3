"""The flags of ``longembed serve`` (the command itself: :mod:`longembed.cli.serve`).

Only light imports here: ``longembed serve --help`` imports neither torch nor transformers.

One flag per meaning: ``--overflow`` (the server's policy, the names of :mod:`longembed.overflow`) is
the only overflow flag; the encoder's ``--on-overflow`` is not a serve flag.  Ports outside 0..65535
and blank API keys are argument errors (exit 2).
"""

from __future__ import annotations

import argparse

from longembed.cli.options import CommandHandler, add_encoder_arguments, add_settings_arguments, help_epilog
from longembed.serving.settings import ServerSettings

#: longembed.search.following.FOLLOW_SECONDS, without importing the index's modules (a test keeps them equal)
FOLLOW_SECONDS = 10.0

#: Highest TCP port.
MAX_PORT = 65535


def port_number(text: str) -> int:
    """An argparse type for a TCP port: an integer in 0..65535 (0 picks a free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is an integer in 0..{MAX_PORT}; got {text!r}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"a port is an integer in 0..{MAX_PORT} (0 picks a free one); got {port}")
    return port


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve embeddings over HTTP (OpenAI /v1/embeddings and /v1/models, TEI /embed, /health, /info, "
             "/metrics)",
        description=(
            "Serve the model with its extension method. Inputs longer than the model's window Lo follow "
            "--overflow: extend (the method, up to --max-length; longer is a 413), truncate_to_max (cut to "
            "--max-length, the extension kept, as eval cuts), truncate (cut to Lo, the model as trained; "
            "= truncate_to_window) or error (413 above Lo; = error_over_window). Every cut is counted and "
            "reported. Clients may choose per request ('overflow' field)."
        ),
        epilog=help_epilog([
            "longembed serve --model default --method pi --max-length 4096 --no-auth",
            "curl -s localhost:8080/v1/models",
            "curl -s localhost:8080/v1/embeddings -H 'Content-Type: application/json' \\",
            "    -d '{\"model\": \"default\", \"input\": [\"a long text\"]}'",
            "LONGEMBED_API_KEY=secret longembed serve --model nomic-embed-text-v1.5 --method selfextend \\",
            "    --max-length 8192 --overflow truncate_to_max --port 8081",
            "curl -s localhost:8081/v1/embeddings -H 'Authorization: Bearer secret' \\",
            "    -H 'Content-Type: application/json' -d '{\"model\": \"nomic-embed-text-v1.5\", \"input\": \"a long text\"}'",
        ]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("server")
    group.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)")
    group.add_argument("--port", type=port_number, default=8080, help="port (default: 8080; 0 picks a free one)")
    add_settings_arguments(group, ServerSettings, only=("overflow",))
    auth = group.add_mutually_exclusive_group()
    add_settings_arguments(auth, ServerSettings, only=("api_key",))
    auth.add_argument("--no-auth", action="store_true",
                      help="serve without an API key, on purpose (without it, an empty --api-key or "
                      "$LONGEMBED_API_KEY is an error, not an open server)")
    add_settings_arguments(group, ServerSettings, exclude=("overflow", "api_key"))  # every other field is a flag
    add_encoder_arguments(parser, exclude=("on_overflow",))  # the server plans overflow itself (--overflow)
    add_index_arguments(parser)
    parser.set_defaults(func=CommandHandler("longembed.cli.serve", "run"))


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """``--index DIR``: search an index too (``POST /search`` and the search page at ``/``).  With an
    index of vectors the server serves the index's own model, so ``--model`` has no default here
    (:func:`longembed.cli.serve.served_encoder` fills it in)."""
    group = parser.add_argument_group("search")
    group.add_argument(  # a string, not a Path: Path("s3://bucket/x") is s3:/bucket/x
        "--index", default=None, metavar="DIR|URI",
        help="an index built by longembed index (a folder, or s3://bucket/prefix, gs://, az://): adds POST /search "
        "(body: query, k, and the filters ids and path_prefix) and a search page at /; the server then serves the "
        "index's own model (--model, --method and --max-length may be left out, and must be the index's when given)")
    group.add_argument(
        "--follow-seconds", type=float, default=FOLLOW_SECONDS, metavar="S",
        help="check at most every S seconds, between searches, whether a build has completed a newer version of "
        "the index, and search that one from then on (0: before every search; SIGHUP: before the next one); "
        f"a half-built version is never searched (default: {FOLLOW_SECONDS:g})")
    parser.set_defaults(model=None)
