"""The flags of ``longembed index`` (the command itself: :mod:`longembed.cli.index`): the encoder's and
the :class:`~longembed.retrieval.strategy.Strategy` fields, the flags ``longembed eval`` runs with, so an
index is built exactly as a run was evaluated.  Only light imports here.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from longembed.cli.options import (
    MODEL_HELP,
    CommandHandler,
    add_encoder_arguments,
    add_settings_arguments,
    help_epilog,
)
from longembed.corpus.engines import ENGINES
from longembed.evaluation.spec import BENCHMARK, EvalSpec
from longembed.retrieval.strategy import Strategy

STRATEGY = "strategy (the flags of longembed eval, or --strategy / --from-advice)"


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``index`` subcommand (handler: :func:`longembed.cli.index.run`)."""
    parser = subparsers.add_parser(
        "index",
        help="build or update a search index of your documents",
        description=(
            "Index documents for longembed search, with one retrieval strategy (the flags of longembed eval, "
            "a name advise prints, or advice.json's recommendation). SOURCE: a folder (read recursively: each "
            ".txt, .md, .rst, .pdf, .html and .docx file one document, its relative path the id; .jsonl files one "
            "document per line; other files skipped and listed), a .jsonl file, or a BEIR corpus.jsonl. A file "
            "that cannot be read (encrypted, damaged, no text) is listed with its reason at the end and in "
            "DIR/reading-report.json, the others are indexed, and the exit code is 3. A rerun embeds only new "
            "and changed documents, retries the files that failed and removes deleted ones; an interrupted build "
            "resumes."
        ),
        epilog=help_epilog([
            "longembed index notes/ --index my-index                                  # MiniLM, 256-token chunks",
            "longembed index notes/ --index my-index --strategy late-chunks+bm25      # a strategy advise names",
            "longembed index corpus.jsonl --index my-index --from-advice runs/advice/advice.json",
            "longembed search --index my-index 'how do tides form?'",
        ]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sources", nargs="*", type=Path, metavar="SOURCE", help="folders and .jsonl files")
    parser.add_argument("--index", required=True, metavar="DIR|URI",
                        help="the index folder (created if missing), or s3://bucket/prefix (gs://, az://: credentials and "
                        "endpoint from the usual environment variables, AWS_ENDPOINT_URL...)")
    add_encoder_arguments(parser, model_help=MODEL_HELP + ", or 'bm25' for BM25 alone (default: the packaged "
                          "all-MiniLM-L6-v2)")
    named = parser.add_argument_group(STRATEGY)
    groups = {name: named for name in _strategy_groups() | {BENCHMARK}}  # one group in --help
    add_settings_arguments(parser, Strategy, groups)
    add_settings_arguments(parser, EvalSpec, groups, only=("estimate",))
    index_reads_whole_documents(parser)
    named.add_argument("--strategy", default=None, metavar="NAME",
                       help="a strategy longembed advise names: bm25, truncate, <method>-<length> (pi-4096), "
                       "naive-chunks, naive-chunks-overlap (--chunking tokens:SIZE made to overlap by SIZE/8, or "
                       "the overlap given), late-chunks (with --method/--max-length: the pass's extension), each dense "
                       "one with +bm25 (fused by RRF); with --from-advice, which of the file's strategies")
    named.add_argument("--from-advice", type=Path, default=None, metavar="ADVICE_JSON",
                       help="the strategy advice.json recommends (or --strategy NAME of its strategies), with its exact "
                       "configuration")
    group = parser.add_argument_group("sources and build")
    group.add_argument("--glob", default=None, help="files of a folder to read, e.g. '**/*.txt' (default: its "
                       "document files (.txt, .md, .rst, .pdf, .html, .docx) and .jsonl files)")
    group.add_argument("--show-text", default=None, metavar="ID",
                       help="print the text the index holds for document ID (what the model read) and exit; "
                       "no SOURCE needed")
    group.add_argument("--id-field", default="id", help="the id field of .jsonl lines (default: id, or _id)")
    group.add_argument("--text-field", default="text", help="the text field of .jsonl lines (default: text)")
    group.add_argument("--rebuild", action="store_true",
                       help="replace an index built with another strategy or model (everything is embedded again)")
    group.add_argument("--ann", choices=("auto", "on", "off"), default="auto",
                       help="an ANN index on the vectors (LanceDB IVF; a search then scores the candidate documents "
                       "exactly, recall@10 >= 0.98 measured): auto from 300,000 chunks, below that an exact scan; on; "
                       "off (exact scan at any size). Default: auto")
    group.add_argument("--no-passage-vectors", dest="passage_vectors", action="store_false",
                       help="do not embed every document's sentence pieces with the index (about 10 per 256-token "
                       "chunk; see the guide for the disk they take): a search then embeds its results' sentences to "
                       "choose their passages, about a second per search on a CPU instead of milliseconds")
    group.add_argument("--engine", choices=ENGINES, default="local",
                       help="local: this process; ray: a pool of Ray actors (default: local)")
    group.add_argument("--actors", type=int, default=1, help="with --engine ray: actors, each with its own encoder")
    group.add_argument("--cpus-per-actor", type=float, default=1.0, help="with --engine ray: CPUs per actor")
    group.add_argument("--ray-address", default=None,
                       help="with --engine ray: the cluster (default: $RAY_ADDRESS, else a local Ray)")
    parser.set_defaults(func=CommandHandler("longembed.cli.index", "run"))


def index_reads_whole_documents(parser: argparse.ArgumentParser) -> None:
    """``--granularity`` without a default here: an index built with no strategy flags reads every token
    (naive chunks of ``--chunking``, :func:`longembed.cli.index.default_granularity`), not a document's
    first window as eval's one-vector-per-document default does."""
    parser.set_defaults(granularity=None)
    for action in parser._actions:
        if action.dest == "granularity":
            action.help = ("document: one vector per document (a document longer than the model's window is cut "
                           "there, and the build says how many were); chunks: a document scores its best chunk. "
                           "Default: chunks (naive, of --chunking: every token read), or document with an "
                           "extension method (--method)")


def _strategy_groups() -> set[str]:
    """The ``--help`` groups of the Strategy's flags (shown here as one group)."""
    return {f.metadata["group"] for f in dataclasses.fields(Strategy) if f.metadata.get("group")}
