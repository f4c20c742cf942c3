"""The ``longembed`` command: one subcommand per job (embed, eval, report, compare, sweep, collapse, tune, export,
train, retrofit, serve, advise, task-dir, index, search, judge).

Each subcommand has two modules: its flags in ``longembed.cli.parsers.<name>`` (light imports only)
and the command in ``longembed.cli.<name>``, imported only when it runs (``CommandHandler``).  So
``longembed --help`` and ``longembed <command> --help`` import neither torch nor transformers, and
``longembed eval`` does not pay for the training stack (sentence-transformers, datasets) or the
server's (FastAPI, uvicorn): a fully cached rerun is mostly importing torch and transformers.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback

from longembed import __version__
from longembed.errors import UserError
from longembed.noise import show_longembed_warnings_plainly, silence_known_library_noise

#: subcommand -> its modules: ``longembed.cli.parsers.<module>`` (``register_cli``) and ``longembed.cli.<module>``.
SUBCOMMANDS = {
    "embed": "embed",
    "eval": "evaluate",
    "report": "report",
    "compare": "compare",
    "sweep": "sweep",
    "collapse": "collapse",
    "tune": "tune",
    "export": "export",
    "train": "train",
    "retrofit": "retrofit",
    "serve": "serve",
    "advise": "advise",
    "task-dir": "task_dir",
    "index": "index",
    "search": "search",
    "judge": "judge",
}


def chosen_subcommand(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` (its first argument that is not an option), if it is known."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return first if first in SUBCOMMANDS else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with only the chosen subcommand's module imported (all of them without one)."""
    parser = argparse.ArgumentParser(
        prog="longembed",
        description="Embed and search documents longer than an embedding model's context window.",
    )
    parser.add_argument("--version", action="version", version=f"longembed {__version__}")
    parser.add_argument(
        "--debug", action="store_true",
        help="show the traceback of a user error too (anywhere on the line; or set LONGEMBED_DEBUG=1)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    chosen = chosen_subcommand(sys.argv[1:] if argv is None else argv)
    for name, module in SUBCOMMANDS.items():
        if chosen in (None, name):
            importlib.import_module(f"longembed.cli.parsers.{module}").register_cli(subparsers)
    return parser


#: Exit status of a command whose reader closed its output (``longembed compare A B | head``): 128 + SIGPIPE,
#: what the shell reports for a tool the signal ended.
BROKEN_PIPE_STATUS = 128 + 13


#: The flag, accepted anywhere on the command line, that shows user errors' tracebacks.
DEBUG_FLAG = "--debug"


def debug_requested(argv: list[str]) -> bool:
    """Whether ``--debug`` is on the command line or ``LONGEMBED_DEBUG`` is set (to anything but "" or "0")."""
    return DEBUG_FLAG in argv or os.environ.get("LONGEMBED_DEBUG", "") not in ("", "0")


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is something the user can fix: a :class:`~longembed.errors.UserError`, or the
    operating system's refusal of a path the user gave (a missing file, permission denied: an
    ``OSError`` that names its file).  Anything else is a bug and keeps its traceback."""
    return isinstance(exc, UserError) or (isinstance(exc, OSError) and exc.filename is not None)


def given_flags(argv: list[str]) -> dict[str, str]:
    """dest -> the flag, of every option given on the command line (abbreviated or at its default value
    alike): the parse of ``argv`` with every default suppressed, so that a command can refuse flags it
    would ignore (``index --from-advice``)."""
    parser = build_parser(argv)
    flags = _suppress_defaults(parser)
    given = vars(parser.parse_args(argv))
    return {dest: _flag_of(flags[dest], value) for dest, value in given.items() if dest in flags}


def _flag_of(flags: dict[object, str], value: object) -> str:
    by_const = [flag for const, flag in flags.items() if const is not None and const == value]
    return by_const[0] if by_const else flags[None]


def _suppress_defaults(parser: argparse.ArgumentParser) -> dict[str, dict[object, str]]:
    """Set every option's default (``parser``'s and its subcommands') to SUPPRESS; return dest -> {const ->
    flag} (key None: the flag; the const tells ``--late`` from ``--naive``, two flags of one dest)."""
    flags: dict[str, dict[object, str]] = {}
    parser._defaults.clear()  # set_defaults(func=...)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags.update(_suppress_defaults(sub))
        elif action.option_strings and action.dest != argparse.SUPPRESS:
            action.default = argparse.SUPPRESS
            flag = max(action.option_strings, key=len)
            flags.setdefault(action.dest, {None: flag})
            if action.const is not None:
                flags[action.dest][action.const] = flag
    return flags


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand.

    A user error (:func:`is_user_error`) prints one line ``longembed CMD: error: ...`` and exits 2
    (``--debug`` / ``LONGEMBED_DEBUG=1``: after its traceback); any other exception propagates with
    its traceback (exit 1).  A reader that closed stdout early (``| head``) ends the command quietly
    with :data:`BROKEN_PIPE_STATUS`.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = debug_requested(argv)
    argv = [arg for arg in argv if arg != DEBUG_FLAG]  # global, wherever it was given
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    silence_known_library_noise()
    show_longembed_warnings_plainly()
    args = build_parser(argv).parse_args(argv)
    args.given_flags = given_flags(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe surfaces here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        silence_stdout()
        return BROKEN_PIPE_STATUS
    except Exception as exc:
        if not is_user_error(exc):
            raise
        if debug:
            traceback.print_exc()
        print(f"longembed {args.command}: error: {exc}", file=sys.stderr)
        return 2


def silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so the interpreter's final flush of what is still
    buffered does not fail again on the closed pipe (the recipe of Python's ``signal`` documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's stand-in): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
