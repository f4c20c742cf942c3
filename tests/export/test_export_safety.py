"""``longembed export`` never destroys what it reads or what it replaces (issue 23's data-loss probes).

Every refused or failed export leaves the disk as it was; ``--overwrite`` replaces only a previous
export, by a rename once the new folder is complete; files are created under the umask.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import LO

from longembed.cli.main import main
from longembed.export import export_model
from longembed.training.jina import RECORD_FILE, train_jina
from longembed.training.tune import tune_positions

LT = 4 * LO


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (what "left as it was" means)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def parent_with_model(tiny_models, tmp_path) -> Path:
    """parent/minilm (a model folder) beside parent/notes.txt (an unrelated file)."""
    parent = tmp_path / "parent"
    shutil.copytree(tiny_models["bert"], parent / "minilm")
    (parent / "notes.txt").write_text("the user's own notes")
    return parent


@pytest.mark.parametrize("output", ["parent", "parent/minilm", "parent/minilm/sub"])
def test_output_holding_or_inside_the_model_is_refused_and_nothing_is_touched(parent_with_model, capsys, output):
    """The issue's probe: --output parent --overwrite deleted the model and the notes, then failed."""
    before = snapshot(parent_with_model)
    root = parent_with_model.parent
    code = main(["export", "--model", str(parent_with_model / "minilm"), "--method", "pi", "--max-length",
                 str(LT), "--output", str(root / output), "--overwrite"])
    assert code == 2
    err = capsys.readouterr().err
    assert "source model" in err and err.count("\n") == 1  # one line, naming the model
    assert snapshot(parent_with_model) == before


@pytest.mark.parametrize(
    ("method", "max_length", "message"),
    [("selfextend", LT, "no plain-model equivalent"), ("pi", LO, "not beyond this model's Lo"),
     ("pi", LT, None)],
)
def test_a_refused_or_failed_export_keeps_the_previous_one(tiny_models, tmp_path, monkeypatch, method, max_length,
                                                          message):
    """A method that cannot be exported, a max_length <= Lo, or a failure while writing: the previous
    export is still there, byte for byte, and no staging folder is left behind."""
    previous = export_model(tiny_models["bert"], "pi", LT, tmp_path / "out")
    before = snapshot(previous)
    if message is None:  # a failure half-way through writing the new folder
        def broken(*args, **kwargs):
            raise OSError("disk full")

        monkeypatch.setattr("longembed.export.plain_model._set_max_seq_length", broken)
        message = "disk full"
    with pytest.raises((ValueError, OSError), match=message):
        export_model(tiny_models["bert"], method, max_length, previous, overwrite=True)
    assert snapshot(previous) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_replaces_a_previous_export_only(tiny_models, tmp_path):
    first = export_model(tiny_models["bert"], "pi", LT, tmp_path / "out")
    (first / "stale.txt").write_text("from the first export")
    export_model(tiny_models["bert"], "gp", LT, first, overwrite=True)
    assert not (first / "stale.txt").exists() and (first / "modules.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    with pytest.raises(ValueError, match="not a model folder"):
        export_model(tiny_models["bert"], "pi", LT, folder, overwrite=True)
    assert (folder / "thesis.tex").read_text() == "years of work"
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_model(tiny_models["bert"], "pi", LT, first)


def test_exported_files_follow_the_umask(tiny_models, tmp_path):
    old = os.umask(0o022)
    try:
        folder = export_model(tiny_models["bert"], "pi", LT, tmp_path / "out")
    finally:
        os.umask(old)
    assert folder.stat().st_mode & 0o777 == 0o755
    assert (folder / "modules.json").stat().st_mode & 0o777 == 0o644


def test_training_commands_never_replace_the_model_they_start_from(tiny_models, tmp_path):
    """train jina --init X --output X --overwrite (and tune into its source) would delete the model it
    reads before training from it: refused, the folder untouched."""
    folder = tmp_path / "stage"
    shutil.copytree(tiny_models["bert"], folder)
    (folder / RECORD_FILE).write_text("{}")  # a finished stage, which --overwrite would replace
    before = snapshot(folder)
    with pytest.raises(ValueError, match="holds the source model"):
        train_jina("pairs", output=folder, init=folder, overwrite=True)
    with pytest.raises(ValueError, match="inside the source model"):
        tune_positions(folder, "pi", LT, folder / "tuned", overwrite=True)
    assert snapshot(folder) == before
