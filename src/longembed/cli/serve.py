"""``longembed serve``: an OpenAI-compatible (and TEI-shaped) embedding server for an extended model, and
with ``--index DIR`` a search server for that index (``POST /search`` and a search page at ``/``)."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import longembed.search as search
import longembed.serving as serving
from longembed.cli.dtype_flag import resolve_dtype_flag
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options, settings_from_args
from longembed.config import DTYPE_AUTO
from longembed.encoder import LongContextEncoder, load_encoder
from longembed.errors import UserError
from longembed.serving import ServerSettings

#: The environment variable that gives the server its API key.
API_KEY_ENV = "LONGEMBED_API_KEY"


def api_key_of(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The key the server requires: ``--api-key``, else ``$LONGEMBED_API_KEY``, else none.

    An empty or blank key (``--api-key "$KEY"`` with KEY unset, an empty variable) is a ValueError,
    never an open server: serving without a key on purpose takes ``--no-auth``, which ignores the
    variable (``--api-key`` and ``--no-auth`` together are an argument error).
    """
    if args.no_auth:
        if environ.get(API_KEY_ENV, "").strip():
            print(f"longembed serve: --no-auth: ${API_KEY_ENV} is set but not used", flush=True)
        return None
    if args.api_key is not None:
        source = "--api-key"
        key = args.api_key
    elif API_KEY_ENV in environ:
        source, key = f"${API_KEY_ENV}", environ[API_KEY_ENV]
    else:
        return None
    if not key.strip():
        raise UserError(f"{source} is empty: give a key, or --no-auth to serve without one on purpose")
    return key


def run(args: argparse.Namespace) -> int:
    api_key = api_key_of(args, os.environ)  # before anything slow: a bad key is an error at once
    serving.require_serving_extra()
    # the key may come from the environment, so that it stays out of the process list
    settings = settings_from_args(ServerSettings, args, api_key=api_key)
    # longembed.search (and its database) is imported only for --index: a plain server starts without it;
    # the index's query encodes wait in the server's queue, as every model call does
    index = None if args.index is None else search.FollowingIndex(
        args.index, device=args.device, embed_queries=serving.queued_query_vectors, check_every=args.follow_seconds)
    if index is not None:  # a new version before the next search (uvicorn handles SIGINT and SIGTERM only)
        signal.signal(signal.SIGHUP, lambda *_: index.request_check())
    encoder = served_encoder(args, index)
    access = "API key required" if settings.api_key else (
        "no API key (--no-auth)" if args.no_auth else f"no API key (set --api-key or ${API_KEY_ENV}, or --no-auth)")
    print(f"serving {encoder!r} on http://{args.host}:{args.port} (overflow={settings.overflow}; {access})",
          flush=True)
    if index is not None:
        facts = index.facts()
        print(f"searching {args.index} ({facts['documents']} documents, {facts['chunks']} chunks, "
              f"{facts['strategy']}): POST /search, and the search page at http://{args.host}:{args.port}/",
              flush=True)
    serving.build_server(encoder, settings, host=args.host, port=args.port, index=index).run()
    return 0


def served_encoder(args: argparse.Namespace, index: search.SearchIndex | search.FollowingIndex | None) -> LongContextEncoder:
    """The index's own encoder when it has one (one model in memory for the embedding routes and the
    search; model flags, when given, must be the index's), else the model the flags name."""
    if index is not None and index.encoder is not None:
        check_model_flags(args, index.facts())
        return index.encoder
    args.model = args.model or "default"
    resolve_method(args)
    resolve_dtype_flag(args)
    return load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                        **encoder_options(args))


def check_model_flags(args: argparse.Namespace, facts: dict[str, Any]) -> None:
    """A ValueError naming the flags that differ from the index's model, method and max_length (the
    queries must be embedded as its documents were), or that the index's encoder does not take."""
    given = {"model": None if args.model is None else Path(str(args.model).rstrip("/")).name,
             "method": args.method, "max_length": args.max_length}
    wrong = [name for name, value in given.items() if value is not None and value != facts.get(name)]
    if wrong:
        differences = ", ".join(f"--{name.replace('_', '-')} {given[name]} (the index: {facts.get(name)})"
                                for name in wrong)
        raise UserError(f"--index {args.index} was built with another model than the flags give: {differences}; "
                         "leave the model flags out to serve the index's own model")
    given = encoder_options(args)
    dtype = given.pop("dtype", DTYPE_AUTO)
    if dtype not in (DTYPE_AUTO, facts.get("dtype")):
        raise UserError(f"--index {args.index} holds {facts.get('dtype')} vectors: its queries are embedded in "
                         f"{facts.get('dtype')} too; leave --dtype {dtype} out (or rebuild the index with it)")
    options = [f"--{name.replace('_', '-')}" for name in given]
    if options:
        raise UserError(f"--index {args.index} serves the encoder the index was built with; "
                         f"{', '.join(options)} cannot change it (rebuild the index with them instead)")
