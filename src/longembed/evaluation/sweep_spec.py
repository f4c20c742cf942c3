"""What one TempScale sweep is asked to do: :class:`SweepSpec`, the options of ``sweep_temperature`` and
of ``longembed sweep`` (each field's metadata is its flag, as in :mod:`longembed.evaluation.spec`).

Only light imports here: ``longembed sweep --help`` imports neither torch nor transformers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.evaluation.spec import data_options, option
from longembed.tasks import Task

#: TempScale taus tried by default (the paper sweeps 0.5..1.0).
DEFAULT_TEMPERATURES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
CANDIDATES = "candidates"
PROTOCOL = "protocol"

_DATA = data_options("sweep folder (default: runs/<model>-<method>-<max_length>-sweep)")


def build_candidates(
    temperatures: Sequence[float],
    query_temperatures: Sequence[float] | None = None,
    document_temperatures: Sequence[float] | None = None,
    decays: Sequence[float] | None = None,
    decay_reference: int = 512,
) -> list[dict[str, Any]]:
    """Candidate settings from the command-line lists (duplicates are dropped later by the sweep).

    One candidate per --temperatures value; the query x document grid when either per-side list is
    given; one length-aware candidate per (decay, temperature).
    """
    candidates: list[dict[str, Any]] = [{"temperature": t} for t in temperatures]
    if query_temperatures is not None or document_temperatures is not None:
        queries = query_temperatures or temperatures
        documents = document_temperatures or temperatures
        candidates += [
            {"query_temperature": q, "document_temperature": d} for q, d in itertools.product(queries, documents)
        ]
    for decay in decays or ():
        candidates += [
            {"temperature": t, "temperature_decay": decay, "temperature_reference": decay_reference}
            for t in temperatures
        ]
    return candidates


def _tau_list(default: Any, help: str, **flag: Any) -> Any:
    return option(default, help, group=CANDIDATES, nargs="+", type=float, metavar="TAU", **flag)


@dataclass
class SweepSpec:
    """The options of one sweep (``sweep_temperature(model, spec)``; see its docstring).

    ``candidates`` (settings dicts or TemperatureCandidate objects) when given, else the grid of
    ``temperatures`` x per-side taus x ``decays`` (:func:`build_candidates`), as the CLI builds it.
    """

    select_task: str | Task | None = option(None, "the one task tau is chosen on, e.g. qmsum", group=PROTOCOL,
                                            required=True)
    score_tasks: Sequence[str | Task] = option(
        (), "comma- or space-separated tasks the choice is measured on (not the selection task)", group=PROTOCOL,
        list=True, metavar="LIST", required=True,
    )
    candidates: Sequence[Mapping[str, Any] | Any] | None = option(None, "candidate settings", flag=False)
    temperatures: Sequence[float] = _tau_list(
        DEFAULT_TEMPERATURES, "taus for queries and documents alike (default: 1.0 0.9 0.8 0.7 0.6 0.5)",
        flags=("--temperatures", "--temperature"),
    )
    query_temperatures: Sequence[float] | None = _tau_list(
        None, "also sweep the grid of query taus x document taus (document taus: --document-temperatures, else "
        "--temperatures)",
    )
    document_temperatures: Sequence[float] | None = _tau_list(
        None, "document taus of the grid (query taus: --query-temperatures, else --temperatures)"
    )
    decays: Sequence[float] | None = option(
        None, "also sweep length-aware tau(n) = tau x (log ref / log n)^D for every --temperatures value",
        group=CANDIDATES, nargs="+", type=float, metavar="D",
    )
    decay_reference: int = option(512, "ref of the length-aware taus, in tokens (default 512)", group=CANDIDATES,
                                  metavar="N")
    tie_tolerance: float = option(0.0, "selection scores within this many points of the best are ties (default 0)",
                                  group=PROTOCOL)
    report_all: bool = option(False, "also score every candidate on the scoring tasks (reported, not used for "
                              "selection)", group=PROTOCOL)
    include_baseline: bool = option(True, "add the baseline (tau = 1, no decay) if absent", flag=False)
    lengths: Sequence[int] | None = _DATA["lengths"]
    data_dir: str | Path | None = _DATA["data_dir"]
    output_dir: str | Path | None = _DATA["output_dir"]
    query_prompt: str | None = _DATA["query_prompt"]
    document_prompt: str | None = _DATA["document_prompt"]
    cache_dir: str | Path | None = _DATA["cache_dir"]
    use_cache: bool = _DATA["use_cache"]
    estimate: bool = option(False, "time a warm-up before every run to estimate seconds (counts are always "
                            "printed)")
    batch_size: int = option(16, "most sequences per batch", flag=False)
    show_progress: bool = option(True, "progress bars", flag=False)
    log: Callable[[str], None] | None = option(print, "where progress lines go (None: silent)", flag=False)

    def candidate_settings(self) -> list[Any]:
        """The candidates given, else the grid the tau lists describe."""
        if self.candidates is not None:
            return list(self.candidates)
        return build_candidates(self.temperatures, self.query_temperatures, self.document_temperatures,
                                self.decays, self.decay_reference)
