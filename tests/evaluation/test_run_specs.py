"""Run specs (EvalSpec, SweepSpec, CollapseSpec): every field a flag, spec -> flags -> the same spec, and
the flags' names and defaults as they were before the specs."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from longembed.cli.main import build_parser
from longembed.cli.options import settings_from_args, strategy_from_args
from longembed.collapse.spec import CollapseSpec
from longembed.evaluation.spec import EvalSpec
from longembed.evaluation.sweep_spec import SweepSpec
from longembed.retrieval.strategy import Strategy


def to_flags(spec: Any, command: str) -> list[str]:
    """The command line that asks for ``spec`` (every field with a flag, default or not)."""
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags: list[str] = []
    for field in dataclasses.fields(spec):
        if not field.metadata.get("flag", True):
            continue
        value = getattr(spec, field.name)
        actions = [a for a in sub._actions if a.dest == field.name]
        if field.metadata.get("switches"):
            flags.append(next(a.option_strings[0] for a in actions if a.const == value))
        elif isinstance(actions[0], argparse._StoreTrueAction | argparse._StoreFalseAction):
            if value != field.default:
                flags.append(actions[0].option_strings[0])
        elif value is not None:
            items = list(value) if isinstance(value, list | tuple) else [value]
            flags += [actions[0].option_strings[0], *(str(v) for v in items)]
    return flags


def parse(command: str, flags: list[str]) -> argparse.Namespace:
    return build_parser([command]).parse_args([command, "--model", "m", *flags])


EVAL = EvalSpec(tasks=["passkey", "qmsum"], lengths=[256, 4096], data_dir=Path("/d"), output_dir=Path("/o"),
                cache_dir=Path("/c"), use_cache=False, query_temperature=0.8,
                document_temperature=0.9, cache_includes_code=False, chunk_size=8, estimate=False, dry_run=True,
                strategy=Strategy("m", query_prompt="q: ", document_prompt="", granularity="chunks",
                                  chunking="sentences:4", late=False, fuse="bm25", fuse_method="linear",
                                  fuse_weight=0.25),
                batch_size=4)
SWEEP = SweepSpec(select_task="qmsum", score_tasks=["passkey", "needle"], temperatures=[1.0, 0.7],
                  query_temperatures=[0.9], document_temperatures=[0.8, 0.6], decays=[0.5], decay_reference=256,
                  tie_tolerance=0.5, report_all=True, lengths=[512], data_dir=Path("/d"), output_dir=Path("/o"),
                  query_prompt="q: ", document_prompt="d: ", cache_dir=Path("/c"), use_cache=False, estimate=True,
                  batch_size=4)
COLLAPSE = CollapseSpec(temperatures=[1.0, 0.5], data_dir=Path("/d"), output_dir=Path("/o"), lengths=[64, 128],
                        short_edges=[0, 10, 20], texts_per_bucket=4, seed=3, sources=["essays", "qmsum"],
                        with_sigma_a=False, sigma_a_texts=2, cache_dir=Path("/c"), use_cache=False,
                        show_progress_bar=False, batch_size=4)


@pytest.mark.parametrize(("command", "spec"), [("eval", EVAL), ("sweep", SWEEP), ("collapse", COLLAPSE)])
def test_spec_to_flags_to_spec(command: str, spec: Any) -> None:
    flags = to_flags(spec, command)
    if command == "eval":  # the strategy's fields are flags of their own
        flags += to_flags(spec.strategy, command)
        args = parse(command, [*flags, "--batch-size", "4"])
        again = settings_from_args(EvalSpec, args, strategy=strategy_from_args(args, method=None))
    else:
        again = settings_from_args(type(spec), parse(command, [*flags, "--batch-size", "4"]))
    assert again == spec
    # and a command line without the optional flags gives the spec's defaults (the encoder's batch size: 16)
    required = {
        "eval": ([], {}),
        "sweep": (["--select-task", "qmsum", "--score-tasks", "passkey"],
                  {"select_task": "qmsum", "score_tasks": ["passkey"]}),
        "collapse": (["--data-dir", "/d", "--output", "/o"], {"data_dir": Path("/d"), "output_dir": Path("/o")}),
    }[command]
    defaults = settings_from_args(type(spec), parse(command, required[0]))
    assert defaults == type(spec)(**required[1], batch_size=16)


def test_eval_flags_keep_their_names_and_defaults() -> None:
    args = parse("eval", ["--tasks", "passkey,needle", "qmsum", "--lengths", "256,1k", "4k", "--naive"])
    spec = settings_from_args(EvalSpec, args)
    assert spec.tasks == ["passkey", "needle", "qmsum"] and spec.lengths == [256, 1024, 4096]
    strategy = strategy_from_args(args)
    assert strategy.late is False and spec.use_cache and spec.estimate and spec.cache_includes_code
    assert (strategy.granularity, strategy.chunking, spec.chunk_size, spec.batch_size) == ("document", "tokens:256", 64, 16)
    assert spec.output_dir is None and spec.data_dir is None and spec.tasks is not None
    with pytest.raises(SystemExit):
        parse("eval", ["--granularity", "pages"])


def test_sweep_and_collapse_flag_aliases() -> None:
    sweep = settings_from_args(SweepSpec, parse("sweep", ["--temperature", "0.9", "--select-task", "qmsum",
                                                          "--score-tasks", "passkey,needle", "squality"]))
    assert sweep.temperatures == [0.9] and sweep.score_tasks == ["passkey", "needle", "squality"]
    assert sweep.candidate_settings() == [{"temperature": 0.9}]
    collapse = settings_from_args(CollapseSpec, parse("collapse", ["--temperatures", "0.8", "--short-edges",
                                                                   "--data-dir", "/d", "--output", "/o"]))
    assert collapse.temperatures == [0.8] and collapse.short_edges == [] and collapse.batch_size == 16
    with pytest.raises(SystemExit):
        parse("sweep", ["--score-tasks", "passkey"])  # --select-task is required


def test_cache_write_every_is_the_flag_and_chunk_size_is_not_one() -> None:
    """``--chunk-size`` (texts per cache write) read like ``--chunking`` (how documents are cut): the flag is
    ``--cache-write-every``, and the old name is an unknown flag (it was never released)."""
    assert settings_from_args(EvalSpec, parse("eval", ["--cache-write-every", "8"])).chunk_size == 8
    assert settings_from_args(EvalSpec, parse("eval", [])).chunk_size == 64
    with pytest.raises(SystemExit) as exited:
        parse("eval", ["--chunk-size", "8"])
    assert exited.value.code == 2
    sub = next(a for a in build_parser(["eval"])._actions if isinstance(a, argparse._SubParsersAction)).choices["eval"]
    assert "--cache-write-every N" in sub.format_help() and "--chunk-size" not in sub.format_help()
