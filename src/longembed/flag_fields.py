"""Dataclass fields that are also command-line flags: :func:`flag_field`, the one way options are declared.

:class:`~longembed.config.EncoderConfig`, :class:`~longembed.serving.settings.ServerSettings` and the run
specs (:class:`~longembed.evaluation.spec.EvalSpec`, ...) declare each option once, as a field whose
metadata is its flag; ``longembed.cli.options`` turns the fields into argparse flags and the parsed flags
back into the dataclass.  Plain data, no import beyond the standard library: ``--help`` stays light.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def flag_field(
    help: str,
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    choices: tuple | None = None,
    **flag: Any,
) -> Any:
    """A dataclass field whose metadata is its command-line flag (``max_length`` -> ``--max-length``).

    Args:
        help: the flag's help text (``--help``); the field's default is appended unless ``show_default``
            is False.
        default: the field's default (or ``default_factory`` for a mutable one, as in ``dataclasses.field``).
        choices: the values the flag accepts (and the config checks).
        **flag: more of the flag, read by :func:`longembed.cli.options.add_settings_arguments`:
            ``flag=False`` (not a flag of its own: the encoder's flags or the caller set it), ``flags``
            (the option strings, when not ``--field-name``), ``metavar``, ``type``, ``required``,
            ``nargs``, ``negate`` (a True-by-default bool whose flag turns it off, e.g. ``--no-cache``),
            ``switches`` (``{"--late": (True, help), "--naive": (False, help)}``: mutually exclusive flags
            setting one value), ``list`` (comma- or space-separated values; ints may be written 4k),
            ``repeat`` (a flag given once per value), ``show_default`` and ``group`` (the argument group).

    Returns:
        A ``dataclasses.field`` carrying ``{"help": ..., "choices": ..., **flag}`` as its metadata.
    """
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={"help": help, "choices": choices, **flag}
    )
