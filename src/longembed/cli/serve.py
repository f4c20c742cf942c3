"""``longembed serve``: an OpenAI-compatible (and TEI-shaped) embedding server for an extended model."""

from __future__ import annotations

import argparse

import longembed.serving as serving
from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options
from longembed.encoder import load_encoder
from longembed.serving import ServerSettings


def run(args: argparse.Namespace) -> int:
    resolve_method(args)
    serving.require_serving_extra()
    settings = ServerSettings(
        overflow=args.overflow,
        max_batch_tokens=args.max_batch_tokens,
        max_queue_tokens=args.max_queue_tokens,
        max_client_batch_size=args.max_client_batch_size,
        max_body_bytes=args.max_body_bytes,
        dimensions=args.dimensions,
        allow_any_dimensions=args.allow_any_dimensions,
        served_model_name=args.served_model_name,
        api_key=args.api_key,
        allowed_hosts=args.allowed_hosts,
        cors_origins=args.cors_origins,
        shutdown_seconds=args.shutdown_seconds,
    )
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length, device=args.device,
                           **encoder_options(args))
    access = "API key required" if settings.api_key else "no API key (set --api-key or $LONGEMBED_API_KEY)"
    print(f"serving {encoder!r} on http://{args.host}:{args.port} (overflow={settings.overflow}; {access})",
          flush=True)
    serving.build_server(encoder, settings, host=args.host, port=args.port).run()
    return 0
