"""A damaged index (files cut short, zeroed, missing) and a full disk are one-line errors (issue 51).

``search`` (of the table: the saved version's files need none of it) and ``index`` name the index and
``--rebuild`` instead of Lance's traceback, a refused build writes nothing, and ``--rebuild`` replaces
the damaged index.  Hypothesis damages random files at random.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from longembed.cli.main import main
from longembed.diskspace import DiskFullError
from longembed.errors import UserError
from longembed.retrieval.strategy import BM25, Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.sources import Document
from longembed.search.version_files import POINTER

BM25_ONLY = Strategy(BM25)
DOCS = [Document(f"d{i}.txt", f"d{i}.txt", f"document {i} about foxes and dogs number {i}") for i in range(5)]
MORE = [*DOCS, Document("new.txt", "new.txt", "a new document about cats")]


def build(index: Path, docs=DOCS, **options) -> None:
    build_index(index, docs, BM25_ONLY, show_progress=False, log=None, **options)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    index = tmp_path_factory.mktemp("pristine") / "index"
    build(index)
    return index


def snapshot(index: Path) -> dict[str, bytes]:
    return {str(p.relative_to(index)): p.read_bytes() for p in sorted(index.rglob("*"))
            if p.is_file() and p.name != "build.lock"}


def files(index: Path, folder: str) -> list[Path]:
    return sorted((index / "chunks.lance" / folder).glob("*"))


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:20])


def zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


DAMAGE = {
    "a data file cut short": lambda index: cut_short(files(index, "data")[0]),
    "a data file zeroed": lambda index: zero(files(index, "data")[0]),
    "no data file": lambda index: files(index, "data")[0].unlink(),
    "every manifest zeroed": lambda index: [zero(p) for p in files(index, "_versions") if p.suffix == ".manifest"],
    "no manifest": lambda index: [p.unlink() for p in files(index, "_versions") if p.suffix == ".manifest"],
    "the complete tag garbled": lambda index: (index / "chunks.lance/_refs/tags/complete.json").write_text("x"),
}


def one_line(error: BaseException, index: Path) -> str:
    message = str(error)
    assert "\n" not in message and str(index) in message, message
    return message


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_index_is_one_line_writes_nothing_and_rebuilds(pristine: Path, tmp_path: Path, damage: str,
                                                                capsys) -> None:
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    DAMAGE[damage](index)
    assert open_index(index).search("foxes").results  # the saved version's files answer: no table read
    (index / POINTER).unlink()  # as an index built before they were saved: a search reads the table
    before = snapshot(index)
    with pytest.raises(UserError) as searched:
        open_index(index).search("foxes")
    assert "--rebuild" in one_line(searched.value, index)
    with pytest.raises(UserError) as built:
        build(index, MORE)
    assert "--rebuild" in one_line(built.value, index)
    assert snapshot(index) == before  # a refused build wrote nothing
    assert main(["search", "--index", str(index), "foxes"]) == 2
    assert "--rebuild" in capsys.readouterr().err
    build(index, MORE, rebuild=True)
    assert open_index(index).search("cats", k=1).results[0].id == "new.txt"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_is_a_one_line_error_or_harmless(pristine: Path, tmp_path_factory, data) -> None:
    index = tmp_path_factory.mktemp("damaged") / "index"
    shutil.copytree(pristine, index)
    targets = sorted(p for p in index.rglob("*") if p.is_file() and p.name != "build.lock")
    target = data.draw(st.sampled_from(targets), label="file")
    raw = target.read_bytes()
    how = data.draw(st.sampled_from(["cut", "zero", "flip", "delete"]), label="damage")
    start = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
    if how == "cut":
        target.write_bytes(raw[:start])
    elif how == "zero":
        target.write_bytes(raw[:start] + bytes(len(raw) - start))
    elif how == "flip":
        target.write_bytes(raw[:start] + bytes([raw[start] ^ 0xFF]) + raw[start + 1 :] if raw else b"\xff")
    else:
        target.unlink()
    try:
        open_index(index).search("foxes")
    except UserError as exc:
        one_line(exc, index)
    before = snapshot(index)
    try:
        build(index, MORE)
    except UserError as exc:
        one_line(exc, index)
        assert snapshot(index) == before  # refused: nothing half-written
    else:
        try:  # a damaged old version the build never read can still stop a search (list_versions reads all)
            assert open_index(index).search("cats", k=1).results[0].id == "new.txt"
        except UserError as exc:
            assert "--rebuild" in one_line(exc, index)
    build(index, MORE, rebuild=True)
    assert open_index(index).search("cats", k=1).results[0].id == "new.txt"


def test_a_build_refuses_before_encoding_when_the_disk_is_too_full(pristine: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    index = tmp_path / "index"
    shutil.copytree(pristine, index)
    before = snapshot(index)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=10 * 2**20))  # under the margin
    with pytest.raises(DiskFullError, match=r"the 1 documents to index need .* MiB are free .*free space"):
        build(index, MORE)
    with pytest.raises(DiskFullError):
        build(index, MORE, rebuild=True)  # the old index is kept
    assert snapshot(index) == before
    assert open_index(index).search("foxes", k=1).results


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MB tmpfs (root and mount needed, else the test is skipped)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.slow
def test_a_disk_filled_midway_is_one_line_and_the_last_build_still_answers(small_disk: Path, monkeypatch) -> None:
    index = small_disk / "index"
    usage = shutil.disk_usage(small_disk)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=2**40))  # the check is passed
    build(index)
    big = [Document(f"big{i}.txt", f"big{i}.txt", random.Random(i).randbytes(300_000).hex()) for i in range(6)]
    with pytest.raises(DiskFullError) as full:
        build(index, [*DOCS, *big])
    assert "free space" in one_line(full.value, index) and "resumes" in str(full.value)
    assert sorted(r.id for r in open_index(index).search("foxes", k=10).results) == sorted(d.id for d in DOCS)
