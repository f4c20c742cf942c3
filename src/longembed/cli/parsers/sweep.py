"""The flags of ``longembed sweep`` (the command itself: :mod:`longembed.cli.sweep`): the encoder's,
and every :class:`~longembed.evaluation.sweep_spec.SweepSpec` field.

Only light imports here: ``longembed sweep --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse

from longembed.cli.options import CommandHandler, add_encoder_arguments, add_settings_arguments
from longembed.evaluation.spec import BENCHMARK
from longembed.evaluation.sweep_spec import CANDIDATES, PROTOCOL, SweepSpec


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "sweep",
        help="choose a TempScale temperature on one task and score it on others",
        description=(
            "Evaluate TempScale candidates on --select-task only, pick the best (ties: least change from "
            "tau = 1), then compare it with tau = 1 on --score-tasks (the selection task excluded). "
            "Writes OUTPUT/sweep.json, sweep.md and sweep.png and prints the tables."
        ),
    )
    # the candidates set the TempScale options, so they are not encoder flags here
    add_encoder_arguments(
        parser, model_required=True, exclude=("temperature", "temperature_decay", "temperature_reference")
    )
    groups = {name: parser.add_argument_group(name) for name in (CANDIDATES, PROTOCOL, BENCHMARK)}
    add_settings_arguments(parser, SweepSpec, groups)  # every SweepSpec field is a flag
    parser.set_defaults(func=CommandHandler("longembed.cli.sweep", "run"))
