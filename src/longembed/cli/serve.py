"""``longembed serve``: an OpenAI-compatible (and TEI-shaped) embedding server for an extended model."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

import longembed.serving as serving
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options, settings_from_args
from longembed.encoder import load_encoder
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
        raise ValueError(f"{source} is empty: give a key, or --no-auth to serve without one on purpose")
    return key


def run(args: argparse.Namespace) -> int:
    api_key = api_key_of(args, os.environ)  # before anything slow: a bad key is an error at once
    resolve_method(args)
    serving.require_serving_extra()
    # the key may come from the environment, so that it stays out of the process list
    settings = settings_from_args(ServerSettings, args, api_key=api_key)
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                           **encoder_options(args))
    access = "API key required" if settings.api_key else (
        "no API key (--no-auth)" if args.no_auth else f"no API key (set --api-key or ${API_KEY_ENV}, or --no-auth)")
    print(f"serving {encoder!r} on http://{args.host}:{args.port} (overflow={settings.overflow}; {access})",
          flush=True)
    serving.build_server(encoder, settings, host=args.host, port=args.port).run()
    return 0
