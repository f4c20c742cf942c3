"""What one benchmark run is asked to do: :class:`EvalSpec`, the options of ``evaluate_model`` and of
``longembed eval``.

Each field's metadata is its command-line flag (help, choices, metavar, the flag's name when it is
not ``--field-name``), as :class:`~longembed.config.EncoderConfig` and
:class:`~longembed.serving.settings.ServerSettings` do: ``longembed.cli.options.add_settings_arguments``
turns the fields into flags and ``settings_from_args`` turns the flags back into a spec, so an option
is declared once.  Only light imports here: ``longembed eval --help`` imports neither torch nor
transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.errors import UserError
from longembed.flag_fields import flag_field
from longembed.retrieval.strategy import Strategy
from longembed.tasks import DEFAULT_TASKS, Task
from longembed.tasks.needle import HAYSTACK_MODES, SHARED_HAYSTACKS, check_haystacks
from longembed.tasks.query_sets import (
    ALL_CANDIDATES,
    CANDIDATE_MODES,
    check_candidates,
    check_queries_per_length,
)

BENCHMARK = "benchmark"


def option(default: Any, help: str, group: str | None = BENCHMARK, **flag: Any) -> Any:
    """:func:`~longembed.flag_fields.flag_field` with the run specs' conventions: the flag sits in the
    ``group`` of ``--help`` (benchmark by default), and its help text says its default itself."""
    return flag_field(help, default, group=group, show_default=False, **flag)


def data_options(output_help: str) -> dict[str, Any]:
    """The fields every benchmark command shares: lengths, data, output, prompts, cache (eval, sweep)."""
    return {
        "lengths": option(None, "passkey/needle lengths, e.g. 256,512,1k,4k (default: all eight, 256..32k)",
                          list=True, metavar="LIST"),
        "data_dir": option(None, "data folder (default: $LONGEMBED_DATA_DIR; passkey needs none)", type=Path),
        "output_dir": option(None, output_help, flags=("--output",), type=Path, metavar="OUTPUT"),
        "query_prompt": option(None, "prefix of every query (default: the model's 'query' prompt, else none; "
                               "'' for none)"),
        "document_prompt": option(None, "prefix of every document (default: the model's 'document' or "
                                  "'passage' prompt)"),
        "cache_dir": option(None, "embedding cache (default: $LONGEMBED_CACHE_DIR or "
                            "~/.cache/longembed/embeddings)", type=Path),
        "use_cache": option(True, "neither read nor write the embedding cache", flags=("--no-cache",), negate=True),
    }


_DATA = data_options("run folder for results.json (default: runs/<model>-<method>-<max_length>)")


#: The error of a --sample-seed without --max-queries (there is no sample for it to seed).
SAMPLE_SEED_ALONE = ("--sample-seed seeds --max-queries' sample: give --max-queries N too (without it every query runs "
                     "and the seed would be ignored)")


@dataclass
class EvalSpec:
    """The options of one benchmark run (``evaluate_model(encoder, spec)``; see its docstring)."""

    tasks: Sequence[str | Task] | str | None = option(
        None, f"comma- or space-separated task names (default: the six offline tasks: {', '.join(DEFAULT_TASKS)})",
        list=True, metavar="LIST",
    )
    task_dirs: Sequence[str | Path] | None = option(
        None, "a retrieval task from your own folder: corpus.jsonl, queries.jsonl, qrels/test.tsv (BEIR) or "
        "qrels.jsonl; or a qrels file in one (DIR/qrels/dev.tsv). Repeatable; without --tasks only these run",
        flags=("--task-dir",), repeat=True, type=Path, metavar="DIR",
    )
    task_names: Sequence[str] | None = option(
        None, "the name of each --task-dir's task, in the same order (default: the folder's name)",
        flags=("--task-name",), repeat=True, metavar="NAME",
    )
    lengths: Sequence[int] | None = _DATA["lengths"]
    data_dir: str | Path | None = _DATA["data_dir"]
    output_dir: str | Path | None = _DATA["output_dir"]
    cache_dir: str | Path | None = _DATA["cache_dir"]
    use_cache: bool = _DATA["use_cache"]
    queries_per_length: int = option(
        50, "passkey/needle: queries per length, 2 documents per query (default 50, the paper's set; a larger "
        "set adds to it, a smaller one takes its first queries; more documents are more distractors, so scores "
        "fall as N grows: compare runs of the same N)", metavar="N",
    )
    candidates: str = option(
        ALL_CANDIDATES, "passkey/needle: which documents a query ranks. all: every document of its length's set "
        "(2N; default); blocks: the set cut into blocks of the paper's size, each 50 queries ranking only their "
        "own 100 documents, so N queries (a multiple of 50) give the paper's difficulty with N queries' precision",
        choices=CANDIDATE_MODES,
    )
    haystack: str | Path | None = option(
        None, "passkey/needle: build them from this folder's .txt/.jsonl documents instead of the filler "
        "sentences and the essays", type=Path, metavar="DIR",
    )
    needle_haystacks: str = option(
        SHARED_HAYSTACKS, "needle: shared: every document of a length is one haystack prefix with its own needle "
        "inserted, so the needle is the only difference between candidates (LongEmbed's; default); distinct: "
        "every document is cut from its own window of the haystack, so candidates differ in all their text",
        choices=HAYSTACK_MODES,
    )
    max_queries: int | None = option(
        None, "a seeded sample of at most N queries per task (and length), drawn in whole groups with the "
        "documents they rank: a meeting with its passages, a block, or documents with the queries they complete "
        "(a cheaper run of the same kind of problem; compare it with runs of the same N and --sample-seed; "
        "default: every query)", type=int, metavar="N",
    )
    sample_seed: int = option(0, "the seed of --max-queries' sample (default 0)", type=int, metavar="SEED")
    query_temperature: float | None = option(None, "TempScale tau for queries (default: --temperature)")
    document_temperature: float | None = option(None, "TempScale tau for documents (default: --temperature)")
    cache_includes_code: bool = option(
        True, "key the cache on longembed's version, not on the hash of its encoder code "
        "(reuse vectors across code edits you know do not change them)", flags=("--cache-ignore-code",), negate=True,
    )
    chunk_size: int = option(64, "texts encoded between two writes of the embedding cache (default 64; a killed "
                             "run loses at most that many)", flags=("--cache-write-every",), metavar="N")
    estimate: bool = option(True, "skip the warm-up that times the encoder (counts are still printed)",
                            flags=("--no-estimate",), negate=True)
    dry_run: bool = option(False, "print the plan and the cost estimate, then stop (nothing encoded or written)")
    strategy: Strategy = option(
        Strategy(), "what the run retrieves with: granularity, chunking, fusion, prompts (its fields are flags of "
        "their own; the encoder's flags give its model)", flag=False)
    # set by the encoder's flags (--batch-size) or by the caller, not flags of their own
    batch_size: int = option(16, "most sequences per batch", flag=False)
    show_progress: bool = option(True, "progress bars", flag=False)
    log: Callable[[str], None] | None = option(print, "where progress lines go (None: silent)", flag=False)

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.chunk_size < 1:
            raise UserError("batch_size and chunk_size must be positive")
        check_queries_per_length(self.queries_per_length)
        check_candidates(self.candidates, self.queries_per_length)
        check_haystacks(self.needle_haystacks)
        if self.sample_seed != 0 and self.max_queries is None:
            raise UserError(SAMPLE_SEED_ALONE)
        if not isinstance(self.strategy, Strategy):
            raise UserError(f"strategy must be a Strategy, got {type(self.strategy).__name__}")
