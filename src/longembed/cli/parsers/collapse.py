"""The flags of ``longembed collapse`` (the command itself: :mod:`longembed.cli.collapse`): the
encoder's, and every :class:`~longembed.collapse.spec.CollapseSpec` field.

Only light imports here: ``longembed collapse --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse

from longembed.cli.options import CommandHandler, add_encoder_arguments, add_settings_arguments
from longembed.collapse.spec import CollapseSpec


def register_cli(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``collapse`` subcommand (handler: :func:`run`)."""
    p = subparsers.add_parser(
        "collapse",
        help="measure length collapse (pairwise cosine, spread, norms, sigma_a) vs text length",
        description=(
            "Cut the same real documents (essays, SQuALITY stories, QMSum meetings) to each length, "
            "add the paper's short intervals [0,100)..[400,500), and record per length and TempScale "
            "temperature: mean pairwise cosine, spread, mean norm and sigma_a of the last layer's "
            "attention. Prints an estimate first; writes OUTPUT/collapse.json and one PNG per metric. "
            "Vectors and sigma_a values are cached: a killed run resumes."
        ),
    )
    add_encoder_arguments(p, model_required=True, exclude=("temperature",))
    add_settings_arguments(p, CollapseSpec)  # every CollapseSpec field is a flag
    p.set_defaults(func=CommandHandler("longembed.cli.collapse", "run"))
    return p
