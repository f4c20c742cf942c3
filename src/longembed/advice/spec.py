"""What one ``longembed advise`` is asked to do: :class:`AdviseSpec`, the options of
:func:`~longembed.advice.advisor.advise` and the flags of the command (each field's metadata is its flag,
as in :mod:`longembed.evaluation.spec`).

Only light imports here: ``longembed advise --help`` imports neither torch, transformers nor numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import UserError
from longembed.evaluation.spec import data_options, option
from longembed.tasks.query_sets import check_queries_per_length

DATA = "data (one of --task-dir, --haystack, --tasks)"
ADVICE = "advice"
#: Documents timed (uncached) per strategy for its encode cost, and queries timed for its latency.
SAMPLE_DOCUMENTS = 8
LATENCY_QUERIES = 20
#: The default non-inferiority margin in points (justified in :mod:`longembed.advice.recommend`; kept here,
#: where ``--help`` reads it without numpy).
MARGIN = 2.0
#: The fewest queries (per length, for passkey and needle) budget sampling keeps of a task.
MIN_SAMPLED_QUERIES = 10

_DATA = data_options("folder for advice.md, advice.png, advice.json and one run per strategy in runs/<strategy>/")


@dataclass
class AdviseSpec:
    """The options of one advice (``advise(model, spec)``; see its docstring)."""

    task_dirs: Sequence[str | Path] | None = option(
        None, "your retrieval task: a folder with corpus.jsonl, queries.jsonl and qrels/test.tsv (BEIR) or "
        "qrels.jsonl (as longembed eval --task-dir); repeatable", group=DATA,
        flags=("--task-dir",), repeat=True, type=Path, metavar="DIR",
    )
    task_names: Sequence[str] | None = option(
        None, "the name of each --task-dir's task, in the same order (default: the folder's name)", group=DATA,
        flags=("--task-name",), repeat=True, metavar="NAME",
    )
    haystack: str | Path | None = option(
        None, "your documents (.txt files, .jsonl lines with 'text'): passkey and needle are built from them "
        "(--tasks passkey or needle picks one)", group=DATA, type=Path, metavar="DIR",
    )
    tasks: Sequence[str] | None = option(
        None, "benchmark tasks, e.g. qmsum passkey (with --data-dir for those that read data)", group=DATA,
        list=True, metavar="LIST",
    )
    lengths: Sequence[int] | None = option(
        None, "passkey/needle lengths, e.g. 256,1k,4k (default: the LongEmbed lengths up to --max-length, or the "
        "model's window without it; with --haystack, those its documents fill)", group=DATA, list=True,
        metavar="LIST",
    )
    queries_per_length: int = option(
        50, "passkey/needle: queries per length before any budget sampling (default 50)", group=DATA, metavar="N",
    )
    data_dir: str | Path | None = option(
        None, "data folder of the benchmark tasks (default: $LONGEMBED_DATA_DIR; passkey needs none)", group=DATA,
        type=Path,
    )
    output_dir: str | Path | None = option(
        None, "folder for advice.md, advice.png, advice.json and one run per strategy in runs/<strategy>/",
        group=ADVICE, flags=("--output",), type=Path, metavar="OUTPUT", required=True,
    )
    methods: Sequence[str] | None = option(
        None, "extension methods to try at --max-length (default: the one that fits the model's positions: "
        "pi for absolute, ntk for rotary, native for ALiBi)", group=ADVICE, list=True, metavar="LIST",
    )
    contextual: str | Path | None = option(
        None, "a folder written by 'longembed train contextual' (the model fine-tuned for late chunks): its late "
        "chunks are measured beside the model's strategies (trained-late-chunks, and fused with BM25)",
        group=ADVICE, type=Path, metavar="DIR",
    )
    chunking: str = option("tokens:256", "how the chunk strategies cut documents: tokens:SIZE[:OVERLAP] or "
                           "sentences:N (default tokens:256)", group=ADVICE, metavar="SPEC")
    margin: float = option(
        MARGIN, "how many points (of the score: nDCG@10, accuracy@1) a cheaper strategy may lose against the best "
        "and still be recommended, shown by a lower confidence bound simultaneous over the strategies "
        f"(default {MARGIN:g}: one query in fifty lost outright)", group=ADVICE, type=float, metavar="POINTS",
    )
    budget_seconds: float | None = option(
        None, "estimated seconds the advice may take: above it, queries and documents are sampled (and the "
        "advice says so); default: no limit", group=ADVICE, type=float, metavar="S",
    )
    seed: int = option(0, "seed of the budget sampling and of the cost samples (default 0)", group=ADVICE)
    sample_documents: int = option(SAMPLE_DOCUMENTS, "documents encoded uncached to time each strategy "
                                   f"(default {SAMPLE_DOCUMENTS})", group=ADVICE, metavar="N")
    latency_queries: int = option(LATENCY_QUERIES, "queries timed for each strategy's query latency, after "
                                  "untimed warm-up searches, the median reported (default "
                                  f"{LATENCY_QUERIES})", group=ADVICE, metavar="N")
    dry_run: bool = option(False, "print the strategies, the estimate and any budget sampling, then stop (nothing "
                           "encoded but each encoder's timed warm-up; nothing written)", group=ADVICE)
    query_prompt: str | None = _DATA["query_prompt"]
    document_prompt: str | None = _DATA["document_prompt"]
    cache_dir: str | Path | None = _DATA["cache_dir"]
    use_cache: bool = _DATA["use_cache"]
    # set by the encoder's flags (--batch-size) or by the caller, not flags of their own
    batch_size: int = option(16, "most sequences per batch", flag=False)
    show_progress: bool = option(True, "progress bars", flag=False)
    log: Callable[[str], None] | None = option(print, "where progress lines go (None: silent)", flag=False)

    def __post_init__(self) -> None:
        if not (self.task_dirs or self.haystack is not None or self.tasks):
            raise UserError("advise needs your data: --task-dir DIR (a retrieval task), --haystack DIR (passkey and "
                             "needle built from your documents), or --data-dir D --tasks ... (benchmark tasks)")
        if self.task_names and not self.task_dirs:
            raise UserError("--task-name names a --task-dir's task, and no --task-dir is given")
        if self.output_dir is None:
            raise UserError("advise needs an output folder (--output DIR): its runs, advice.md and advice.json go there")
        if not self.margin > 0:
            raise UserError(f"--margin must be positive (points of the score), got {self.margin}")
        if self.budget_seconds is not None and not self.budget_seconds > 0:
            raise UserError(f"--budget-seconds must be positive, got {self.budget_seconds}")
        for name in ("sample_documents", "latency_queries", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be a whole number >= 1, got {value!r}")
        check_queries_per_length(self.queries_per_length)
        if self.methods is not None and not self.methods:
            raise UserError("methods is empty: give at least one extension method, or leave it out")
