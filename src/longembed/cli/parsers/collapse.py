"""The flags of ``longembed collapse`` (the command itself: :mod:`longembed.cli.collapse`).

Only light imports here: ``longembed collapse --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import (
    CommandHandler,
    add_cache_arguments,
    add_data_dir_argument,
    add_encoder_arguments,
)
from longembed.collapse.choices import (
    DEFAULT_LENGTHS,
    DEFAULT_SHORT_EDGES,
    DEFAULT_SIGMA_A_TEXTS,
    DEFAULT_TEXTS_PER_BUCKET,
)
from longembed.collapse.corpus import SOURCES


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
    group = p.add_argument_group("collapse")
    group.add_argument("--temperature", "--temperatures", dest="temperatures", type=float, nargs="+",
                       default=[1.0], metavar="T",
                       help="TempScale temperatures in (0, 1], one line per temperature (default 1.0)")
    add_data_dir_argument(group, "folder in the shared data layout", required=True)
    group.add_argument("--output", type=Path, required=True, help="output folder")
    group.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS), metavar="N",
                       help="bucket lengths in tokens seen by the model, special tokens included; lengths above "
                       "--max-length are skipped (default %(default)s)")
    group.add_argument("--short-edges", type=int, nargs="*", default=list(DEFAULT_SHORT_EDGES), metavar="N",
                       help="edges of the short intervals in content tokens; give none to disable "
                       "(default %(default)s)")
    group.add_argument("--texts-per-bucket", type=int, default=DEFAULT_TEXTS_PER_BUCKET,
                       help="texts per bucket (default %(default)s; the paper's figures use more)")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    group.add_argument("--no-sigma-a", action="store_true", help="skip sigma_a (the slow part at long lengths)")
    group.add_argument("--sigma-a-texts", type=int, default=DEFAULT_SIGMA_A_TEXTS, metavar="N",
                       help="measure sigma_a on the first N texts of each bucket (default %(default)s; 0: all)")
    add_cache_arguments(group)
    group.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=CommandHandler("longembed.cli.collapse", "run"))
    return p
