"""A checkpoint's rename is durable (issue 40's note): its files and folders are fsynced before the
rename, the folder under its new name and its parent after it, and only then are older checkpoints
deleted (PostgreSQL's ``durable_rename`` order).  The file system calls are recorded, not timed:
``os.fsync`` is wrapped to note which path each descriptor names (``/proc/self/fd``)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from longembed.durable import durable_replace_folder
from longembed.training.runs import RESUME_FILES, STAGING_DIR, AtomicCheckpoints, incomplete_reason

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names descriptors through /proc")


@pytest.fixture
def events(monkeypatch) -> list[tuple[str, str]]:
    """("fsync", path), ("replace", target) and ("rmtree", path), in the order they happen."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace, real_rmtree = os.fsync, os.replace, shutil.rmtree

    def fsync(fd):
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(source, target):
        seen.append(("replace", str(Path(target).resolve())))
        return real_replace(source, target)

    def rmtree(path, *args, **kwargs):
        seen.append(("rmtree", str(Path(path).resolve())))
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    return seen


def write_checkpoint(folder: Path) -> None:
    """The files transformers' Trainer writes into a checkpoint (tiny), one of them in a subfolder."""
    folder.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    for name in RESUME_FILES:
        (folder / name).write_text(json.dumps({"global_step": 1}))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text("{}")


def test_durable_replace_flushes_the_contents_before_and_the_names_after(tmp_path, events) -> None:
    source, target = tmp_path / "staging" / "checkpoint-3", tmp_path / "checkpoint-3"
    write_checkpoint(source)
    files = {str(p.resolve()) for p in source.rglob("*") if p.is_file()}
    folders = {str(source.resolve()), str((source / "1_Pooling").resolve())}
    durable_replace_folder(source, target)
    at = next(i for i, e in enumerate(events) if e == ("replace", str(target.resolve())))
    before = {path for kind, path in events[:at] if kind == "fsync"}
    after = [path for kind, path in events[at + 1:] if kind == "fsync"]
    assert files | folders == before  # every file and folder of the checkpoint, before the rename
    assert after[:2] == [str(target.resolve()), str(tmp_path.resolve())]  # its new name, in its parent
    assert str((tmp_path / "staging").resolve()) in after  # and the old parent's entry removed
    assert incomplete_reason(target) is None


class FakeTrainer:
    """What AtomicCheckpoints needs of transformers' Trainer: its output folder and a save that
    writes a checkpoint file by file (as transformers does)."""

    def __init__(self, run_dir: Path, step: int, limit: int | None):
        self.run_dir = run_dir
        self.args = SimpleNamespace(should_save=True, save_total_limit=limit)
        self.state = SimpleNamespace(global_step=step)

    def _get_output_dir(self, trial) -> str:
        return str(self.run_dir)

    def _save_checkpoint(self, model, trial) -> None:
        write_checkpoint(Path(self._get_output_dir(trial)) / f"checkpoint-{self.state.global_step}")


class Trainer(AtomicCheckpoints, FakeTrainer):
    pass


def test_a_checkpoint_is_durable_before_older_ones_are_deleted(tmp_path, events) -> None:
    """save_total_limit 1 with checkpoint-1 on disk: checkpoint-2's files are fsynced before its
    rename, the checkpoints folder after it, and checkpoint-1 is deleted only after that (a power
    loss at any point leaves at least one complete checkpoint).  The old code renamed without any
    fsync."""
    write_checkpoint(tmp_path / "checkpoint-1")
    events.clear()
    Trainer(tmp_path, step=2, limit=1)._save_checkpoint(None, None)
    final, old = (tmp_path / "checkpoint-2").resolve(), (tmp_path / "checkpoint-1").resolve()
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-2"] and incomplete_reason(final) is None
    at = events.index(("replace", str(final)))
    staged = tmp_path.resolve() / STAGING_DIR / "checkpoint-2"
    synced_before = {path for kind, path in events[:at] if kind == "fsync"}
    assert {str(staged / "model.safetensors"), str(staged / "trainer_state.json"), str(staged)} <= synced_before
    parent_synced = events.index(("fsync", str(tmp_path.resolve())), at)
    assert events.index(("rmtree", str(old))) > parent_synced


def test_an_exported_folder_replaces_the_old_one_durably(tmp_path, events) -> None:
    """``staged_folder`` (``longembed export``): the new folder's files are fsynced
    before it takes the output's name, the name and its parent after; the old folder is removed only
    then.  The old code renamed without any fsync."""
    from longembed.export.folders import staged_folder

    output = tmp_path / "exported"
    write_checkpoint(output)  # an earlier export
    events.clear()
    with staged_folder(output) as staging:
        (staging / "model.safetensors").write_bytes(b"new weights")
        staged = str((staging / "model.safetensors").resolve())
    at = events.index(("replace", str(output.resolve())))
    assert ("fsync", staged) in events[:at]
    assert events.index(("fsync", str(output.resolve())), at) < events.index(("fsync", str(tmp_path.resolve())), at)
    removed = [i for i, (kind, path) in enumerate(events) if kind == "rmtree" and ".exported.previous-" in path]
    assert removed and removed[0] > events.index(("fsync", str(tmp_path.resolve())), at)
    assert (output / "model.safetensors").read_bytes() == b"new weights"
