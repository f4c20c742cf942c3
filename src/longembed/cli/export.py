"""``longembed export``: write an extended model as a plain folder other tools load without longembed.

    longembed export --model PATH --method pi --max-length 4096 --output DIR     # APE: pi, gp, rp
    longembed export --model NOMIC --method yarn --max-length 8192 --output DIR  # RoPE: pi, ntk, yarn
    longembed export --model TUNED_DIR --output DIR                               # a tuned folder

The folder loads with ``SentenceTransformer(DIR)`` (or transformers' AutoModel) and gives longembed's
vectors for inputs longer than Lo; what it does to short inputs is in the README.
"""

from __future__ import annotations

import argparse

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import encoder_options
from longembed.export import export_model


def run(args: argparse.Namespace) -> int:
    resolve_method(args)
    folder = export_model(
        args.model, args.method, args.max_length, args.output, overwrite=args.overwrite, **encoder_options(args)
    )
    print(f"wrote {folder}")
    return 0
