"""``longembed embed``: embed a .txt (one document per line) or .jsonl (field ``text``) file."""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from longembed.cli.options import add_encoder_arguments, encoder_options


def register_cli(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "embed",
        help="embed documents into a .npy matrix",
        description="Embed every document of INPUT (.txt: one per line; .jsonl: field 'text') into OUT.npy.",
    )
    parser.add_argument("input", type=Path, help=".txt (one document per line) or .jsonl (field 'text')")
    parser.add_argument("-o", "--output", type=Path, required=True, help="where to write the .npy matrix")
    parser.add_argument(
        "--prompt", default=None, help="prefix added to every document, e.g. 'search_document: '"
    )
    parser.add_argument("--prompt-name", default=None, help="a named prompt of the model, e.g. 'document'")
    parser.add_argument("--field", default="text", help="the .jsonl field holding the text (default: text)")
    parser.add_argument("--no-normalize", action="store_true", help="write raw pooled vectors")
    add_encoder_arguments(parser)
    parser.set_defaults(func=run)


def read_documents(path: Path, field: str = "text") -> list[str]:
    """Documents from a .txt (one per non-empty line) or .jsonl file, with errors naming the line."""
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        lines = path.read_text(encoding="utf-8").splitlines()
        docs = [line for line in lines if line.strip()]
        if len(docs) < len(lines):
            warnings.warn(f"{path}: skipped {len(lines) - len(docs)} empty line(s)", stacklevel=2)
    elif suffix == ".jsonl":
        docs = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise ValueError(f"{path}:{number}: expected an object with a string field {field!r}")
            docs.append(record[field])
    else:
        raise ValueError(
            f"{path}: unsupported input type {suffix!r}; use .txt (one document per line) or .jsonl"
        )
    if not docs:
        raise ValueError(f"{path}: no documents found")
    return docs


def run(args: argparse.Namespace) -> int:
    from longembed import load_encoder

    docs = read_documents(args.input, args.field)
    encoder = load_encoder(
        args.model, method=args.method, max_length=args.max_length, **encoder_options(args)
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # overflow is reported in the summary below
        vectors = encoder.encode(
            docs,
            batch_size=args.batch_size,
            show_progress_bar=True,
            prompt=args.prompt,
            prompt_name=args.prompt_name,
            normalize_embeddings=False if args.no_normalize else None,
        )
    elapsed = time.perf_counter() - start
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.output, vectors)
    stats = encoder.last_stats
    print(f"{encoder!r}")
    print(
        f"embedded {len(docs)} documents ({stats.n_sequences} sequences) -> {args.output} "
        f"{vectors.shape[0]}x{vectors.shape[1]} float32 in {elapsed:.1f}s; longest input {stats.longest_input_tokens} tokens"
    )
    if stats.n_truncated:
        print(
            f"truncated: {stats.n_truncated} document(s) exceeded --max-length {encoder.max_length} tokens "
            f"(first indices {stats.truncated_indices[:10]}); raise --max-length or use --on-overflow error"
        )
    else:
        print("truncated: none")
    return 0
