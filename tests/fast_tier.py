"""The fast tier's rule, enforced: a test not marked ``slow`` that spawns a process, binds a socket (a
server, Ray, a browser), uses a materialised model or loads a real checkpoint fails, saying what it did
(CONTRIBUTING.md). An audit hook refuses the operation before it happens."""

from __future__ import annotations

import functools
import os
import platform
import sys
import threading
from dataclasses import dataclass, field

import pytest

# Python's own audit events (sys.addaudithook), and one this plugin raises from
# PreTrainedModel.from_pretrained, are checked while a test not marked slow sets up and runs; the refused
# test fails even if it catches the refusal.  conftest.py loads the plugin and names the real model
# folders (watch_folder); real_model_folder() calls requires_slow, so such a test fails before it skips.

#: audit event -> what a test that raises it does
SPAWNS = {
    "subprocess.Popen": "spawns a process",
    "os.fork": "forks a process",
    "os.forkpty": "forks a process",
    "os.posix_spawn": "spawns a process",
    "os.spawn": "spawns a process",
    "os.system": "runs a shell command",
    "os.exec": "replaces the process",
    "socket.bind": "binds a socket (starts a server)",
}
READS = ("open", "os.listdir", "os.scandir")
#: raised by the wrapped ``PreTrainedModel.from_pretrained`` with the folder it loads
LOADS = "fast_tier.from_pretrained"

#: folders (absolute, with and without symlinks resolved, ending in a separator): any file read under
#: the first, a model loaded from the second makes a test slow
_READ_FOLDERS: list[str] = []
_CHECKPOINT_FOLDERS: list[str] = []


class SlowInFastTier(pytest.fail.Exception):
    """Raised where a test not marked slow does what only a slow test may (a ``BaseException``, as
    ``pytest.fail``'s, so an ``except Exception`` in the test cannot hide it)."""


@dataclass
class _Test:
    nodeid: str
    slow: bool
    checking: bool = False
    did: list[str] = field(default_factory=list)


#: the running tests, innermost last (a pytester run nests a test inside a test)
_running: list[_Test] = []
_lock = threading.Lock()


def watch_folder(path: str | os.PathLike[str], *, reads: bool) -> None:
    """A model loaded from ``path`` (a real model folder, or a folder of them) makes a test slow; with
    ``reads``, so does reading any file under it (a materialised model, absent on a fresh machine)."""
    for form in {os.path.abspath(path), os.path.realpath(path)}:
        form = form.rstrip(os.sep) + os.sep
        for folders in (_CHECKPOINT_FOLDERS, _READ_FOLDERS) if reads else (_CHECKPOINT_FOLDERS,):
            if form not in folders:
                folders.append(form)


def requires_slow(what: str) -> None:
    """Fail the running test unless it is marked slow (a helper's explicit check, e.g. before a skip)."""
    test = _checked_test()
    if test is not None:
        _refuse(test, what)


def _checked_test() -> _Test | None:
    """The test being set up or run, when it is not marked slow."""
    test = _running[-1] if _running else None
    return test if test is not None and test.checking and not test.slow else None


def _refuse(test: _Test, what: str) -> None:
    with _lock:
        test.did.append(what)
    raise SlowInFastTier(_message(test, what), pytrace=True)


def _message(test: _Test, what: str) -> str:
    return (f"{test.nodeid} {what} but is not marked slow: add @pytest.mark.slow (or a module's "
            "pytestmark = pytest.mark.slow); `pytest -m \"not slow\"` must stay fast (CONTRIBUTING.md)")


def _under(path: object, folders: list[str]) -> str | None:
    if isinstance(path, int) or not folders:
        return None
    try:
        text = os.path.abspath(os.fsdecode(os.fspath(path)))
    except TypeError:
        return None
    return text if any((text + os.sep).startswith(folder) for folder in folders) else None


def _program(args: tuple) -> str:
    """The program a ``subprocess.Popen`` event runs (its executable, else its first argument)."""
    program = args[0] or args[1]
    if isinstance(program, (list, tuple)):
        program = program[0] if program else ""
    words = os.fsdecode(program).split() if program else []
    return os.path.basename(words[0]) if words else "?"


def _audit(event: str, args: tuple) -> None:
    if event not in SPAWNS and event not in READS and event != LOADS:
        return
    test = _checked_test()
    if test is None:
        return
    if event in SPAWNS:
        what = SPAWNS[event] + (f" ({_program(args)})" if event == "subprocess.Popen" else "")
    elif event == LOADS:
        path = _under(args[0], _CHECKPOINT_FOLDERS)
        if path is None:
            return
        what = f"loads the real checkpoint {path}"
    else:
        path = _under(args[0], _READ_FOLDERS) if args else None
        if path is None:
            return
        what = f"reads {path}, in a real model folder"
    _refuse(test, what)


def _audit_checkpoint_loads() -> None:
    """Make ``PreTrainedModel.from_pretrained`` (every model load: longembed's, AutoModel's,
    sentence-transformers') raise the audit event ``LOADS`` with the folder it loads."""
    from transformers import PreTrainedModel

    original = PreTrainedModel.__dict__["from_pretrained"].__func__
    if getattr(original, "_fast_tier", False):
        return

    @functools.wraps(original)
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        sys.audit(LOADS, pretrained_model_name_or_path)
        return original(cls, pretrained_model_name_or_path, *args, **kwargs)

    from_pretrained._fast_tier = True
    PreTrainedModel.from_pretrained = classmethod(from_pretrained)


# One hook for the process (an audit hook cannot be removed); it does nothing outside a checked test.
if not getattr(sys, "_longembed_fast_tier_hook", False):
    sys.addaudithook(_audit)
    sys._longembed_fast_tier_hook = True


def pytest_configure(config: pytest.Config) -> None:
    _audit_checkpoint_loads()
    # The standard library runs `uname -p` the first time anything asks for the processor (a results
    # file records it); ask here, once, so that no test is charged with that process.
    platform.processor()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _running.append(_Test(item.nodeid, slow=item.get_closest_marker("slow") is not None))
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _checked())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _checked())


def _checked():
    """Check while a test sets up and runs; not in teardown, where a module's or the session's fixtures
    (a slow test's server, the Ray runtime) finish after whichever test ran last."""
    test = _running[-1] if _running else None
    if test is None or test.slow:
        return (yield)
    test.checking = True
    try:
        result = yield
    except SlowInFastTier:
        raise
    except (Exception, pytest.fail.Exception, pytest.skip.Exception):
        if not test.did:
            raise
        result = None  # the refusal made it fail another way (a server thread that died, ...): say why
    finally:
        test.checking = False
    if test.did:  # refused, and the test caught it or failed of it elsewhere: fail it with the reason
        pytest.fail(_message(test, "; ".join(dict.fromkeys(test.did))), pytrace=False)
    return result
