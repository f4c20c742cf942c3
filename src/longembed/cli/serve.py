"""``longembed serve``: an OpenAI-compatible (and TEI-shaped) embedding server for an extended model."""

from __future__ import annotations

import argparse
import os

import longembed.serving as serving
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options, settings_from_args
from longembed.encoder import load_encoder
from longembed.serving import ServerSettings

#: The environment variable that gives the server its API key.
API_KEY_ENV = "LONGEMBED_API_KEY"


def run(args: argparse.Namespace) -> int:
    resolve_method(args)
    serving.require_serving_extra()
    # the key may come from the environment, so that it stays out of the process list
    settings = settings_from_args(ServerSettings, args, api_key=args.api_key or os.environ.get(API_KEY_ENV))
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                           **encoder_options(args))
    access = "API key required" if settings.api_key else "no API key (set --api-key or $LONGEMBED_API_KEY)"
    print(f"serving {encoder!r} on http://{args.host}:{args.port} (overflow={settings.overflow}; {access})",
          flush=True)
    serving.build_server(encoder, settings, host=args.host, port=args.port).run()
    return 0
