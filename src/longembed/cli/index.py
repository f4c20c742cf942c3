"""``longembed index``: build or update a search index of your documents (:mod:`longembed.search.build`).

    longembed index my-docs --index my-index --model default --granularity chunks --naive --fuse bm25
    longembed index my-docs --index my-index --strategy late-chunks+bm25 --model default --method pi --max-length 4096
    longembed index my-docs --index my-index --from-advice advice/advice.json
    longembed index my-task/corpus.jsonl --index my-index --model bm25

It prints, before embedding, what changes (added, changed, removed, unchanged) and eval's estimate of
the time it takes, then a progress bar; an interrupted build resumes when run again.  At the end it
prints where the time went (reading, loading, planning, tokenizing, encoding, writing, passages, finishing) and the
tokens per second, and lists the files skipped (by extension) and those that could not be read (with their reasons, also in
``INDEX/reading-report.json``); then the exit code is :data:`EXIT_SOME_FILES_FAILED`.  The path of each
document file goes to ``INDEX/document-files.json`` (a served index links a PDF hit to its page).  An
index on object storage (``--index s3://bucket/prefix``) gets neither file, and the build says so.
``--show-text ID`` prints the text the index holds for a document.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from longembed.cli.model_defaults import resolve_method
from longembed.cli.options import given_encoder_flags, strategy_from_args
from longembed.config import DEFAULT_DTYPE, DTYPE_AUTO, EncoderConfig
from longembed.encoder import LongContextEncoder
from longembed.errors import MissingFileError, UserError
from longembed.evaluation.cache.lookup import CachedDocumentVectors
from longembed.evaluation.estimate import format_duration, longest_sequence, measure_cost_model, text_seconds
from longembed.inputs import tokenize_bounded
from longembed.results.advice import strategy_from_advice
from longembed.retrieval.strategy import BM25, CHUNKS, DOCUMENT, Strategy
from longembed.search.build import BuildPlan, build_index
from longembed.search.document_files import DOCUMENT_FILES, write_document_files
from longembed.search.ray_build import RayBuild
from longembed.search.sources import SourceOptions, SourceReading, gather_sources
from longembed.search.stages import StageTimes
from longembed.search.store import IndexStore, indexed_text, remote_scheme

#: encoder flags that say how precisely the model runs, not which strategy: allowed beside --from-advice
PRECISION_FLAGS = ("dtype",)
#: the exit code of a build that indexed what it could but some files could not be read
EXIT_SOME_FILES_FAILED = 3
#: the file in the index folder that lists the files a build could not read (and those it skipped)
READING_REPORT = "reading-report.json"


def run(args: argparse.Namespace) -> int:
    if args.show_text is not None:
        return show_text(args.index, args.show_text)
    if not args.sources:
        raise UserError("give the folders or .jsonl files to index (SOURCE ...), or --show-text ID")
    name, strategy = chosen_strategy(args)
    strategy = with_build_dtype(strategy, args)
    print(f"strategy {name}: {describe(strategy)}")
    times = StageTimes()
    with times.stage("reading"):
        reading = gather_sources(args.sources, SourceOptions(args.glob, args.id_field, args.text_field))
    documents = reading.documents
    engine = None
    if args.engine == "ray":
        engine = RayBuild(args.actors, args.cpus_per_actor, args.ray_address, args.device)
    report = build_index(
        args.index, documents, strategy, name=name, rebuild=args.rebuild, ann=args.ann, device=args.device,
        batch_size=args.batch_size, engine=engine,
        cached=None if args.from_advice is None else advice_cache(args.from_advice, name, strategy),
        on_plan=(lambda plan, encoder: print_estimate(plan, encoder, strategy, args.batch_size))
        if args.estimate else None,
        keep=[failure.id for failure in reading.failed], times=times, passage_vectors=args.passage_vectors,
    )
    print(report.summary())
    if remote_scheme(args.index) is None:
        write_document_files(args.index, documents, keep=[failure.id for failure in reading.failed])
    else:
        print(f"note: {DOCUMENT_FILES} and {READING_REPORT} are not written to object storage (the files' paths "
              "are this machine's): a served hit links no PDF, and the files that failed are listed above only")
    return report_reading(reading, args.index)


def with_build_dtype(strategy: Strategy, args: argparse.Namespace) -> Strategy:
    """The strategy with the dtype the build runs its model in: ``--dtype`` when given; with
    ``--from-advice``, the dtype advise scored the strategy in (eval's float32 unless the advice records
    another), so the build reuses advise's stored vectors and search reproduces its score; else index's
    default, ``auto``."""
    if strategy.lexical_only:
        return strategy
    given = getattr(args, "dtype", None)
    if given is not None:
        dtype = given
    elif args.from_advice is not None:
        dtype = strategy.encoder_options.get("dtype", DEFAULT_DTYPE)
        print(f"dtype {dtype}: the precision advise scored this strategy in (its vectors are reused and search "
              f"reproduces its score; --dtype {DTYPE_AUTO} picks bfloat16 where the CPU computes it, re-embedding)")
    else:
        dtype = strategy.encoder_options.get("dtype", DTYPE_AUTO)
    return replace(strategy, encoder_options={**strategy.encoder_options, "dtype": dtype})


def advice_cache(advice_file: Path, name: str, strategy: Strategy) -> Callable[..., CachedDocumentVectors] | None:
    """The lookup of the document vectors advise stored for strategy ``name`` (in the cache its eval command
    names: ``--cache-dir``, else the default; None with ``--no-cache``), for :func:`build_index`'s ``cached``."""
    try:
        records = json.loads(advice_file.read_text(encoding="utf-8")).get("strategies") or []
        command = next((r.get("commands") or {}).get("eval", "") for r in records if r.get("name") == name)
    except (OSError, ValueError, AttributeError, StopIteration):
        return None  # strategy_from_advice read the file: an older one without commands has no cache to name
    words = shlex.split(command)
    if "--no-cache" in words:
        return None
    cache_dir = words[words.index("--cache-dir") + 1] if "--cache-dir" in words[:-1] else None
    chunking = strategy.chunking if strategy.chunked else None
    return lambda encoder, prompt: CachedDocumentVectors(encoder, cache_dir, prompt, chunking, strategy.late)


def report_reading(reading: SourceReading, index: str | Path) -> int:
    """Print the files skipped and those that could not be read, write them to the index folder's
    :data:`READING_REPORT`; the exit code (:data:`EXIT_SOME_FILES_FAILED` when a file failed)."""
    if reading.skipped:
        counts = ", ".join(f"{n} {suffix}" for suffix, n in sorted(reading.skipped.items()))
        print(f"skipped {sum(reading.skipped.values())} file(s) that are not documents longembed reads ({counts}); "
              "--glob chooses the files to read")
    if reading.failed:
        print(f"could not read {len(reading.failed)} file(s) (not indexed; a rerun retries them):")
        for failure in reading.failed:
            print(f"  {failure.reason}")
    if remote_scheme(index) is None:
        report = {"failed": [{"id": f.id, "reason": f.reason} for f in reading.failed],
                  "skipped": dict(sorted(reading.skipped.items()))}
        (Path(index) / READING_REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
    return EXIT_SOME_FILES_FAILED if reading.failed else 0


def show_text(index: str, document_id: str) -> int:
    """Print the text the index holds for ``document_id``."""
    if not IndexStore.exists(index):
        raise MissingFileError(f"--index {index}: no index there")
    text = indexed_text(IndexStore(index).complete_table(), document_id)
    if text is None:
        raise UserError(f"--index {index} holds no document {document_id!r}")
    print(text)
    return 0


def chosen_strategy(args: argparse.Namespace) -> tuple[str, Strategy]:
    """(its name, the strategy) of --from-advice, --strategy NAME, or eval's flags."""
    if args.from_advice is not None:
        given = strategy_flags_given(args)
        if given:
            raise UserError(f"--from-advice gives the whole strategy, model included: drop {', '.join(given)} "
                             "(or leave out --from-advice and give the strategy's flags)")
        return strategy_from_advice(args.from_advice, args.strategy)
    model = args.model or "default"
    resolve_method(args)
    if model == BM25 or args.strategy == BM25:
        if args.fuse is not None or args.granularity == CHUNKS:
            flags = " and ".join(f for f, given in (("--fuse", args.fuse is not None),
                                                    ("--granularity chunks", args.granularity == CHUNKS)) if given)
            raise UserError(f"{flags} need an embedding model: --model bm25 is BM25 alone "
                             "(for a hybrid give --model MODEL --fuse bm25)")
        ignored = given_encoder_flags(args)
        if ignored:
            print(f"note: {', '.join(ignored)} ignored for BM25 (it has no encoder)")
        return BM25, Strategy(BM25)
    strategy = strategy_from_args(args, model=model, **default_granularity(args))
    if args.strategy is not None:
        strategy = Strategy.from_name(args.strategy, model, strategy)
        return args.strategy, strategy
    return strategy.name, strategy


def default_granularity(args: argparse.Namespace) -> dict[str, object]:
    """The granularity (and chunking kind) when ``--granularity`` is not given: naive chunks, so the whole
    of every document is read (late with ``--late``), unless a method is given (``--method pi``, or
    ``--method truncate`` said on the command line): it asks for one window per document, as eval reads
    the same flags."""
    if args.granularity is not None:
        return {}
    given = getattr(args, "given_flags", None) or {}
    if "method" in given or getattr(args, "method", None) not in (None, "truncate"):
        return {"granularity": DOCUMENT}
    return {"granularity": CHUNKS, "late": "late" in given and args.late}


def strategy_flags_given(args: argparse.Namespace) -> list[str]:
    """The encoder and Strategy flags on the command line (``args.given_flags``, which ``longembed.cli.main``
    records), even at their default value: each contradicts --from-advice's strategy.  Without that record
    (a Namespace built by hand), the flags whose value is not their default."""
    names = [f.name for f in dataclasses.fields(EncoderConfig) if f.metadata.get("flag", True)
             and f.name not in PRECISION_FLAGS] + [
        f.name for f in dataclasses.fields(Strategy) if f.metadata.get("flag", True)]
    given = getattr(args, "given_flags", None)
    if given is not None:
        return [given[name] for name in names if name in given]
    default = Strategy()
    return ([f for f in given_encoder_flags(args) if f not in ("--device", "--batch-size")]
            + (["--model"] if args.model not in (None, "default") else [])
            + ["--" + name.replace("_", "-") for name in names if hasattr(default, name) and name != "model"
               and getattr(args, name, getattr(default, name)) not in (None, getattr(default, name))])


def describe(strategy: Strategy) -> str:
    if strategy.lexical_only:
        return "BM25 (bm25s, Lucene's variant, eval's tokenizer, stemmer and stopwords)"
    parts = [f"{strategy.model} {strategy.method or 'truncate'}"
             + (f" at {strategy.max_length} tokens" if strategy.max_length else "")]
    if strategy.chunked:
        parts.append(f"{'late' if strategy.late else 'naive'} chunks {strategy.chunking}, a document scores its best")
    if strategy.fusion is not None:
        parts.append(f"fused with BM25 ({strategy.fusion.method})")
    return "; ".join(parts)


def print_estimate(plan: BuildPlan, encoder: LongContextEncoder | None, strategy: Strategy,
                   batch_size: int) -> None:
    """eval's estimate of the encoding ahead: tokens to encode and seconds from a timed warm-up."""
    if encoder is None or not plan.to_embed:
        return
    chunking = strategy.chunking if strategy.chunked else None
    counts = token_counts([d.text for d in plan.to_embed], encoder, whole=chunking is not None)
    late = strategy.chunked and strategy.late
    model = measure_cost_model(encoder, batch_size, longest_sequence(counts, encoder, chunking, late) or None)
    seconds = sum(text_seconds(n, encoder, model, chunking, late) for n in counts)
    tokens = sum(counts) if chunking is not None else sum(min(n, encoder.max_length) for n in counts)
    print(f"estimate: {len(counts)} documents, {tokens:,} tokens to encode, about {format_duration(seconds)} "
          "(from a timed warm-up on this machine; other work on it slows the build)")


def token_counts(texts: list[str], encoder: LongContextEncoder, whole: bool) -> list[int]:
    """Each text's tokens, special tokens included, one text at a time (memory of one text, not all);
    ``whole`` False: counted only up to the encoder's max_length + 1, all a truncating build encodes."""
    if whole:
        return [len(encoder.tokenizer(t, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])
                for t in texts]
    layout = encoder.runner.special_tokens
    return [min(x.n_tokens, encoder.max_length + 1)
            for x in tokenize_bounded(texts, encoder.tokenizer, "", layout, encoder.max_length)]
