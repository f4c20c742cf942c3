"""The flags of ``longembed serve`` (the command itself: :mod:`longembed.cli.serve`).

Only light imports here: ``longembed serve --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_encoder_arguments, add_settings_arguments
from longembed.serving.settings import ServerSettings


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
    add_settings_arguments(group, ServerSettings)  # every ServerSettings field is a flag
    add_encoder_arguments(parser)
    add_index_arguments(parser)
    parser.set_defaults(func=CommandHandler("longembed.cli.serve", "run"))


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """``--index DIR``: search an index too (``POST /search`` and the search page at ``/``).  With an
    index of vectors the server serves the index's own model, so ``--model`` has no default here
    (:func:`longembed.cli.serve.served_encoder` fills it in)."""
    group = parser.add_argument_group("search")
    group.add_argument(
        "--index", type=Path, default=None, metavar="DIR",
        help="an index built by longembed index: adds POST /search (body: query, k, and the filters ids and "
        "path_prefix) and a search page at /; the server then serves the index's own model (--model, --method "
        "and --max-length may be left out, and must be the index's when given)")
    parser.set_defaults(model=None)
