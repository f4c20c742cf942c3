"""fast_tier.py fails an unmarked test that spawns, binds, uses a materialised model or loads a real
checkpoint, and lets a marked one through (a nested pytest run: every refused operation is refused
before it happens, so this test spawns and binds nothing itself)."""

from __future__ import annotations

from pathlib import Path

import fast_tier
import pytest

UNMARKED = '''
import socket, subprocess, sys
import fast_tier, pytest
from transformers import BertModel

FOLDER = {folder!r}

def test_spawns_a_process():
    subprocess.run(["true"])

def test_forks():
    import os
    if os.fork() == 0:  # never reached: the fork is refused before it happens
        os._exit(0)

def test_binds_a_socket():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))

def test_hides_the_refusal():
    try:
        subprocess.run(["true"])
    except BaseException:
        pass

def test_reads_a_materialised_model():
    open(FOLDER + "/reads/config.json").close()

def test_loads_a_real_checkpoint():
    BertModel.from_pretrained(FOLDER + "/loads")

def test_asks_for_a_real_model():
    fast_tier.requires_slow("uses the real model all-MiniLM-L6-v2")

@pytest.fixture
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield

def test_uses_a_fixture_that_starts_a_server(server):
    pass

def test_does_none_of_these():
    with socket.socket():  # a socket that is never bound: a client's
        pass
    open(FOLDER + "/loads/config.json").close()  # a checkpoint's tokenizer files may be read

@pytest.mark.slow
def test_marked_slow():
    fast_tier.requires_slow("uses the real model all-MiniLM-L6-v2")
    open(FOLDER + "/reads/config.json").close()
'''


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """A stand-in for the materialised models (reads watched) and for the packaged one (loads watched)."""
    for name in ("reads", "loads"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    fast_tier.watch_folder(tmp_path / "reads", reads=True)
    fast_tier.watch_folder(tmp_path / "loads", reads=False)
    return tmp_path


def test_an_unmarked_test_that_does_what_only_a_slow_test_may_fails_saying_what(pytester, folders: Path,
                                                                               monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the nested run needs no installed plugin
    pytester.makeini("[pytest]\nmarkers =\n    slow: the suite's slow tier\n")
    pytester.makepyfile(test_tiers=UNMARKED.format(folder=str(folders)))
    result = pytester.runpytest_inprocess("-p", "fast_tier", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2, failed=7, errors=1)  # the fixture's refusal is an error at setup
    passed = [report.nodeid.split("::")[1] for report in result.reprec.listoutcomes()[0]]
    assert sorted(passed) == ["test_does_none_of_these", "test_marked_slow"]
    result.stdout.fnmatch_lines_random([
        "*test_spawns_a_process spawns a process (true) but is not marked slow*",
        "*test_forks forks a process but is not marked slow*",
        "*test_binds_a_socket binds a socket (starts a server) but is not marked slow*",
        "*test_hides_the_refusal spawns a process (true) but is not marked slow*",
        f"*test_reads_a_materialised_model reads {folders}/reads/config.json, in a real model folder*",
        f"*test_loads_a_real_checkpoint loads the real checkpoint {folders}/loads but is not marked slow*",
        "*test_asks_for_a_real_model uses the real model all-MiniLM-L6-v2 but is not marked slow*",
        "*test_uses_a_fixture_that_starts_a_server binds a socket*",
    ])


def test_the_slow_marker_is_registered_and_strict(pytestconfig: pytest.Config) -> None:
    """``-m "not slow"`` with a misspelt marker would silently keep a slow test in the fast tier."""
    assert pytestconfig.option.strict_markers
    assert any(line.startswith("slow:") for line in pytestconfig.getini("markers"))
