"""The flags of ``longembed embed`` (the command itself: :mod:`longembed.cli.embed`).

Only light imports here: ``longembed embed --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from longembed.cli.options import CommandHandler, add_encoder_arguments, help_epilog
from longembed.cli.parsers.embed_corpus import add_corpus_arguments


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "embed",
        help="embed documents into a .npy matrix, or a corpus of shards into parquet files (local or Ray)",
        description="Embed every document of INPUT (.txt/.md: the whole file is one document, or one per line "
        "with --unit line; .jsonl: one per line, field 'text') into OUT.npy; or a folder of shards (.txt/.md, "
        ".jsonl or .parquet), a .parquet file, or any INPUT with --engine ray, into a folder OUT of one .parquet "
        "file (id, vector, truncated) per shard, resumable by shard.",
        epilog=help_epilog([
            "longembed embed notes.txt -o notes.npy --method pi --max-length 4096",
            "longembed embed docs.jsonl -o docs.npy --model multilingual-e5-small --prompt-name passage",
            "longembed embed shards/ -o vectors/ --method pcw --max-length 8192   # a corpus, one parquet per shard",
        ]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", type=Path,
                        help=".txt/.md (text), .jsonl (fields 'text', 'id'), .parquet, or a folder of them")
    parser.add_argument("-o", "--output", type=Path, required=True,
                        help="the .npy file to write (.npy is added to a name without it); for a corpus, the "
                        "folder of .parquet files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing .npy file at -o")
    parser.add_argument("--unit", choices=("file", "line"), default=None,
                        help="what one document is in a .txt/.md file: the whole file (file, the default: a "
                        "folder of text files is a folder of documents, id = file name without suffix) or each "
                        "non-empty line (line, id = NAME:LINE). A .jsonl file is always one document per line "
                        "and a .parquet file one per row")
    parser.add_argument("--prompt", default=None, help="prefix added to every document, e.g. 'search_document: '")
    parser.add_argument("--prompt-name", default=None, help="a named prompt of the model, e.g. 'document'")
    parser.add_argument("--field", default="text",
                        help="the .jsonl field or .parquet column holding the text (default: text)")
    parser.add_argument("--no-normalize", action="store_true", help="write raw pooled vectors")
    add_encoder_arguments(parser)
    add_corpus_arguments(parser)
    parser.set_defaults(func=CommandHandler("longembed.cli.embed", "run"))
