"""What the command line reads from the model folder before it runs: the method a folder was built for.

Kept out of ``longembed.cli.options`` because it reads the model folder through ``longembed.loading``
(torch), which the parsers must not import.
"""

from __future__ import annotations

import argparse

from longembed.loading import default_method


def resolve_method(args: argparse.Namespace) -> None:
    """Fill in ``args.method`` when --method was not given: the model folder's recorded method
    (``longembed tune`` / ``export``), else truncate.  BM25 has no method."""
    if getattr(args, "method", "") is None:
        model = getattr(args, "model", None)
        args.method = "truncate" if model in (None, "bm25") else default_method(model)
