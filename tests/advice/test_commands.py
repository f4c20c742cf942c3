"""advice.md's title and each strategy's commands: the model and task by name, and ``serve --index`` (a
search server over the strategy's index) rather than the embedding server."""

from __future__ import annotations

import shlex
from pathlib import Path

from test_plot import nine_strategies

from longembed.advice.commands import DataFlags, serve_request, strategy_commands
from longembed.advice.markdown import advice_title, command_lines
from longembed.retrieval.strategy import Strategy


def test_every_strategys_serve_command_serves_its_index_for_search(tmp_path: Path) -> None:
    data = DataFlags(task_dirs=["my/task"])
    for strategy in (Strategy("default", method="pi", max_length=4096), Strategy("bm25"),
                     Strategy("default", granularity="chunks", fuse="bm25")):
        commands = strategy_commands(strategy.name, strategy.to_dict(), data, tmp_path / "advice")
        index = shlex.split(commands["index"])
        assert shlex.split(commands["serve"]) == ["longembed", "serve", "--index", index[index.index("--index") + 1]]
        assert index[index.index("--index") + 1] == str(tmp_path / "advice" / "index" / strategy.name)


def with_task_dir(advice, folder: str, name: str | None = None):
    flags = DataFlags(task_dirs=[folder], task_names=[name] if name else [])
    for s in advice.strategies:
        s.config = (Strategy("bm25") if s.name == "bm25" else Strategy.from_name(s.name, "default")).to_dict()
        s.commands = strategy_commands(s.name, s.config, flags, "out")
    advice.tasks = [name or Path(folder).name]
    return advice


def test_the_title_names_the_packaged_model_and_the_task_folder() -> None:
    advice = with_task_dir(nine_strategies("default"), "/data/manuals/task")
    assert advice_title(advice) == ("# Which strategy for all-MiniLM-L6-v2 (the packaged default) on task "
                                    "(the task folder /data/manuals/task)")
    named = with_task_dir(nine_strategies("/models/e5-base/"), "/data/manuals/task", "manuals")
    assert advice_title(named) == "# Which strategy for e5-base on manuals (the task folder /data/manuals/task)"


def test_a_benchmark_task_is_named_alone() -> None:
    assert advice_title(nine_strategies("/models/bge-small")) == "# Which strategy for bge-small on paul-graham-essays"


def test_advice_md_says_what_serve_does() -> None:
    advice = with_task_dir(nine_strategies("default"), "/data/task")
    markdown = "\n".join(command_lines(advice.strategy("late-chunks+bm25"), "To use it"))
    assert "longembed serve --index out/index/late-chunks+bm25" in markdown
    assert "a search server (POST /search" in markdown


def test_the_fusion_a_strategy_records_is_the_one_its_commands_describe() -> None:
    linear = Strategy("default", granularity="chunks", fuse="bm25", fuse_method="linear", fuse_weight=0.3)
    rrf = Strategy("default", granularity="chunks", fuse="bm25", fuse_k=20)
    assert "a linear mix of min-max normalised scores, bm25 weight 0.3" in serve_request(linear.to_dict())
    assert "reciprocal rank fusion, k = 20" in serve_request(rrf.to_dict())
    assert "fused" not in serve_request(Strategy("default", granularity="chunks").to_dict())
    assert serve_request(Strategy("bm25").to_dict()).startswith("no model")
