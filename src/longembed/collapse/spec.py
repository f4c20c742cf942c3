"""What one collapse measurement is asked to do: :class:`CollapseSpec`, the options of ``run_collapse``
and of ``longembed collapse`` (each field's metadata is its flag, as in :mod:`longembed.evaluation.spec`).

Only light imports here: ``longembed collapse --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.collapse.corpus import SOURCES
from longembed.collapse.defaults import (
    DEFAULT_LENGTHS,
    DEFAULT_SHORT_EDGES,
    DEFAULT_SIGMA_A_TEXTS,
    DEFAULT_TEXTS_PER_BUCKET,
)
from longembed.evaluation.spec import option

COLLAPSE = "collapse"


def _flag(default: Any, help: str, **flag: Any) -> Any:
    return option(default, help, group=COLLAPSE, **flag)


@dataclass
class CollapseSpec:
    """The options of one collapse measurement (``run_collapse(model, spec)``; see its docstring)."""

    temperatures: Sequence[float] = _flag(
        (1.0,), "TempScale temperatures in (0, 1], one line per temperature (default 1.0)",
        flags=("--temperature", "--temperatures"), type=float, nargs="+", metavar="T",
    )
    data_dir: str | Path | None = _flag(None, "folder in the shared data layout", type=Path, required=True)
    output_dir: str | Path | None = _flag(None, "output folder", flags=("--output",), type=Path, required=True)
    lengths: Sequence[int] = _flag(
        DEFAULT_LENGTHS, "bucket lengths in tokens seen by the model, special tokens included; lengths above "
        "--max-length are skipped (default %(default)s)", type=int, nargs="+", metavar="N",
    )
    short_edges: Sequence[int] | None = _flag(
        DEFAULT_SHORT_EDGES, "edges of the short intervals in content tokens; give none to disable "
        "(default %(default)s)", type=int, nargs="*", metavar="N",
    )
    texts_per_bucket: int = _flag(DEFAULT_TEXTS_PER_BUCKET, "texts per bucket (default %(default)s; the paper's "
                                  "figures use more)")
    seed: int = _flag(0, "document selection, start positions and spans")
    sources: Sequence[str] = _flag(SOURCES, "which document sources to use", nargs="+", choices=SOURCES)
    with_sigma_a: bool = _flag(True, "skip sigma_a (the slow part at long lengths)", flags=("--no-sigma-a",),
                               negate=True)
    sigma_a_texts: int | None = _flag(
        DEFAULT_SIGMA_A_TEXTS, "measure sigma_a on the first N texts of each bucket (default %(default)s; 0: all)",
        metavar="N",
    )
    cache_dir: str | Path | None = _flag(
        None, "embedding cache (default: $LONGEMBED_CACHE_DIR or ~/.cache/longembed/embeddings)", type=Path
    )
    use_cache: bool = _flag(True, "neither read nor write the embedding cache", flags=("--no-cache",), negate=True)
    show_progress_bar: bool = _flag(True, "no progress bars", flags=("--quiet",), negate=True)
    # set by the encoder's flags (--batch-size) or by the caller, not flags of their own
    batch_size: int = option(8, "most sequences per batch", flag=False)
    say: Callable[[str], None] | None = option(print, "where the estimate and progress lines go (None: silent)",
                                               flag=False)
