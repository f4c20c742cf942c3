"""The flags of ``longembed embed_corpus`` (the command itself: :mod:`longembed.cli.embed_corpus`).

Only light imports here: ``longembed embed_corpus --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse

from longembed.corpus.engines import ENGINES


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine, the Ray actor pool's flags and --id-field."""
    group = parser.add_argument_group("corpus (INPUT a folder of shards or a .parquet file, or --engine ray)")
    group.add_argument("--engine", choices=ENGINES, default="local",
                       help="local: this process; ray: a pool of Ray actors (default: local)")
    group.add_argument("--actors", type=int, default=None,
                       help="Ray actors, each with its own encoder (default: 1)")
    group.add_argument("--cpus-per-actor", type=float, default=None,
                       help="CPUs each actor reserves, and its torch threads (default: 1)")
    group.add_argument("--gpus-per-actor", type=float, default=None,
                       help="GPUs each actor reserves; 1 gives one actor per GPU (default: 0)")
    group.add_argument("--ray-address", default=None,
                       help="the Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray on this machine)")
    group.add_argument("--id-field", default="id",
                       help="the .jsonl field or .parquet column holding each document's id (default: id)")
