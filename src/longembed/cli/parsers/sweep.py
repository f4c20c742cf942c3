"""The flags of ``longembed sweep`` (the command itself: :mod:`longembed.cli.sweep`).

Only light imports here: ``longembed sweep --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse

from longembed.cli.options import CommandHandler, add_benchmark_arguments, add_encoder_arguments

#: TempScale taus tried by default (the paper sweeps 0.5..1.0).
DEFAULT_TEMPERATURES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)


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
    group = parser.add_argument_group("candidates")
    group.add_argument(
        "--temperatures",
        "--temperature",
        dest="temperatures",
        nargs="+",
        type=float,
        default=list(DEFAULT_TEMPERATURES),
        metavar="TAU",
        help="taus for queries and documents alike (default: 1.0 0.9 0.8 0.7 0.6 0.5)",
    )
    group.add_argument(
        "--query-temperatures",
        nargs="+",
        type=float,
        default=None,
        metavar="TAU",
        help="also sweep the grid of query taus x document taus (document taus: "
        "--document-temperatures, else --temperatures)",
    )
    group.add_argument(
        "--document-temperatures",
        nargs="+",
        type=float,
        default=None,
        metavar="TAU",
        help="document taus of the grid (query taus: --query-temperatures, else --temperatures)",
    )
    group.add_argument(
        "--decays",
        nargs="+",
        type=float,
        default=None,
        metavar="D",
        help="also sweep length-aware tau(n) = tau x (log ref / log n)^D for every --temperatures value",
    )
    group.add_argument(
        "--decay-reference",
        type=int,
        default=512,
        metavar="N",
        help="ref of the length-aware taus, in tokens (default 512)",
    )
    group = parser.add_argument_group("protocol")
    group.add_argument("--select-task", required=True, help="the one task tau is chosen on, e.g. qmsum")
    group.add_argument(
        "--score-tasks",
        nargs="+",
        required=True,
        metavar="LIST",
        help="comma- or space-separated tasks the choice is measured on (not the selection task)",
    )
    group.add_argument(
        "--tie-tolerance",
        type=float,
        default=0.0,
        help="selection scores within this many points of the best are ties (default 0)",
    )
    group.add_argument(
        "--report-all",
        action="store_true",
        help="also score every candidate on the scoring tasks (reported, not used for selection)",
    )
    group = parser.add_argument_group("benchmark")
    add_benchmark_arguments(group, "sweep folder (default: runs/<model>-<method>-<max_length>-sweep)")
    group.add_argument(
        "--estimate",
        action="store_true",
        help="time a warm-up before every run to estimate seconds (counts are always printed)",
    )
    parser.set_defaults(func=CommandHandler("longembed.cli.sweep", "run"))
