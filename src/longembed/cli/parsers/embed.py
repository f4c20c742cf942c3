"""The flags of ``longembed embed`` (the command itself: :mod:`longembed.cli.embed`).

Only light imports here: ``longembed embed --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_encoder_arguments
from longembed.cli.parsers.embed_corpus import add_corpus_arguments


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "embed",
        help="embed documents into a .npy matrix, or a corpus of shards into parquet files (local or Ray)",
        description="Embed every document of INPUT (.txt: one per line; .jsonl: field 'text') into OUT.npy; "
        "or a folder of shards (.txt, .jsonl or .parquet), a .parquet file, or any INPUT with --engine ray, "
        "into a folder OUT of one .parquet file (id, vector, truncated) per shard, resumable by shard.",
    )
    parser.add_argument("input", type=Path,
                        help=".txt (one document per line), .jsonl (fields 'text', 'id'), .parquet, or a folder of them")
    parser.add_argument("-o", "--output", type=Path, required=True,
                        help="the .npy file to write (.npy is added to a name without it); for a corpus, the "
                        "folder of .parquet files")
    parser.add_argument("--prompt", default=None, help="prefix added to every document, e.g. 'search_document: '")
    parser.add_argument("--prompt-name", default=None, help="a named prompt of the model, e.g. 'document'")
    parser.add_argument("--field", default="text",
                        help="the .jsonl field or .parquet column holding the text (default: text)")
    parser.add_argument("--no-normalize", action="store_true", help="write raw pooled vectors")
    add_encoder_arguments(parser)
    add_corpus_arguments(parser)
    parser.set_defaults(func=CommandHandler("longembed.cli.embed", "run"))
