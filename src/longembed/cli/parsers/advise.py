"""The flags of ``longembed advise`` (the command itself: :mod:`longembed.cli.advise`): the encoder's
(every strategy's encoder gets them; the strategies choose the method) and every
:class:`~longembed.advice.spec.AdviseSpec` field.

Only light imports here: ``longembed advise --help`` imports neither torch, transformers nor numpy.
"""

from __future__ import annotations

import argparse

from longembed.advice.spec import ADVICE, DATA, AdviseSpec
from longembed.cli.options import CommandHandler, add_encoder_arguments, add_settings_arguments


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``advise`` subcommand (handler: :func:`run`)."""
    parser = subparsers.add_parser(
        "advise",
        help="which retrieval strategy for this model on your documents: scores, costs, a recommendation",
        description=(
            "Run the candidate strategies for one model on your data, asked about documents of up to --max-length "
            "tokens: BM25; the model truncated to its window; the extension method that fits its positions at "
            "--max-length (when above the window); naive chunks; late chunks (mean-pooling "
            "models); each of those fused with BM25. Each is an ordinary benchmark run in OUTPUT/runs/<strategy>/ "
            "(cached: a rerun resumes). Prints an estimate first and samples the data when it is over "
            "--budget-seconds (and says so). Writes OUTPUT/advice.md (scores with 95% intervals, differences from "
            "the best with their intervals and a lower bound simultaneous over the strategies, costs measured on "
            "this machine: encode seconds per 1k tokens, vectors per document, index bytes, query latency; the "
            "recommendation: the cheapest strategy shown within --margin points of the best, else the best, and "
            "when the data cannot tell, the queries that would; every strategy's eval, serve and index commands), "
            "advice.png and advice.json."
        ),
    )
    add_encoder_arguments(parser, model_required=True, exclude=("method",))
    groups = {name: parser.add_argument_group(name) for name in (DATA, ADVICE)}
    add_settings_arguments(parser, AdviseSpec, groups)  # every AdviseSpec field is a flag
    parser.set_defaults(func=CommandHandler("longembed.cli.advise", "run"))
