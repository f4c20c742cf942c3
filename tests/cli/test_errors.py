"""User errors versus bugs on the command line (issue 44): a :class:`UserError` is one line and exit 2;
any other exception keeps its traceback (exit 1); ``--debug`` / ``LONGEMBED_DEBUG=1`` shows a user
error's traceback too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import longembed
from longembed.cli import compare as compare_command
from longembed.cli.main import is_user_error, main
from longembed.errors import (
    MissingExtraError,
    MissingFileError,
    OutputExistsError,
    UserError,
    UserFileError,
    UserTypeError,
)

#: A command that fails in compare's handler with the exception named by argv[1] (a stand-in for a bug
#: or a user error deep inside a command), run as the console script runs main().
SCRIPT = """
import sys
from longembed.cli import compare
from longembed.cli.main import main
from longembed.errors import UserError

def fail(args):
    raise {error}("{message}")

compare.run = fail
sys.exit(main(sys.argv[1:]))
"""


def run_cli(error: str, message: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    code = SCRIPT.format(error=error, message=message)
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.mark.slow
def test_a_programming_error_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(args):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    monkeypatch.setattr(compare_command, "run", broken)
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    done = run_cli("TypeError", "unsupported operand", "compare", "a", "b")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr and "TypeError: unsupported operand" in done.stderr


@pytest.mark.slow
def test_a_user_error_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = run_cli("UserError", "--runs: no such run folder", "compare", "a", "b")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["longembed compare: error: --runs: no such run folder"]
    # a real one, raised by longembed itself: a results file that does not exist
    assert main(["compare", str(tmp_path / "missing-a"), str(tmp_path / "missing-b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("longembed compare: error: ") and "missing-a" in err[0]


@pytest.mark.slow
def test_debug_shows_the_traceback_of_a_user_error_in_the_process() -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "LONGEMBED_DEBUG"}, "LONGEMBED_DEBUG": "1"}
    done = run_cli("UserError", "bad input", "compare", "a", "b", env=env)
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "longembed compare: error: bad input"


@pytest.mark.parametrize("how", ["flag-before", "flag-after", "environment"])
def test_debug_shows_the_traceback_of_a_user_error(how: str, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Each way of asking, in this process (the process's exit and stderr: the test above)."""
    def fail(args):
        raise UserError("bad input")

    monkeypatch.setattr(compare_command, "run", fail)
    monkeypatch.delenv("LONGEMBED_DEBUG", raising=False)
    argv = ["compare", "a", "b"]
    if how == "flag-before":
        argv = ["--debug", *argv]
    elif how == "flag-after":
        argv = [*argv, "--debug"]
    else:
        monkeypatch.setenv("LONGEMBED_DEBUG", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "UserError: bad input" in err
    assert err.strip().splitlines()[-1] == "longembed compare: error: bad input"
    monkeypatch.delenv("LONGEMBED_DEBUG", raising=False)
    assert main(["compare", "a", "b"]) == 2  # without asking: the one line alone
    assert capsys.readouterr().err.strip().splitlines() == ["longembed compare: error: bad input"]


def test_user_errors_are_the_builtin_errors_they_replace() -> None:
    # existing `except ValueError` / `except FileNotFoundError` / ... around longembed's calls keep working
    assert issubclass(UserError, ValueError)
    assert issubclass(UserTypeError, TypeError) and issubclass(MissingFileError, FileNotFoundError)
    assert issubclass(UserFileError, OSError) and issubclass(MissingExtraError, ImportError)
    assert issubclass(OutputExistsError, FileExistsError)
    assert longembed.UserError is UserError


def test_which_errors_are_the_users() -> None:
    assert is_user_error(UserError("x")) and is_user_error(MissingFileError("x"))
    assert is_user_error(FileNotFoundError(2, "No such file or directory", "/no/such/file"))  # the OS, on a path
    assert not is_user_error(ValueError("x")) and not is_user_error(TypeError("x"))
    assert not is_user_error(OSError("no file named")) and not is_user_error(ImportError("x"))
    assert not is_user_error(KeyError("x"))
