"""Errors the user can fix: a bad argument, a missing or unreadable file, an optional extra not installed.

The command line prints a :class:`UserError` as one line, ``longembed CMD: error: <message>``, and
exits 2 (``longembed.cli.main``); every other exception is a bug and keeps its traceback (``--debug``
or ``LONGEMBED_DEBUG=1`` shows the traceback of a user error too).

``UserError`` is a ``ValueError``, so code that catches ``ValueError`` around longembed's calls keeps
working; each subclass is also the built-in error its raise site raised before (a missing file is a
``FileNotFoundError``, a missing extra an ``ImportError``, ...), for the same reason.
"""

from __future__ import annotations

__all__ = [
    "MissingExtraError", "MissingFileError", "OutputExistsError", "UserError", "UserFileError", "UserTypeError",
]


class UserError(ValueError):
    """An error in what the user asked for (an argument, an option, a file's content), which they can fix."""


class UserTypeError(UserError, TypeError):
    """An argument of the wrong type (e.g. ``texts`` that are not strings, an unknown keyword option)."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist."""


class OutputExistsError(UserError, FileExistsError):
    """An output the user named exists already and would be overwritten (pass ``--overwrite``, or another path)."""


class UserFileError(UserError, OSError):
    """A file or folder the user named cannot be read or written (permissions, not a directory, ...)."""


class MissingExtraError(UserError, ImportError):
    """An optional extra needed for what was asked is not installed (the message names the pip command)."""
