"""What happens to an input longer than a limit: one overflow policy, one name per meaning.

Two limits matter: Lo, the window the model was trained for, and Lt, the encoder's ``max_length``
(what its extension method reaches).  A policy is a limit and what to do past it:

=====================  =====  ==================================================================
name                   limit  an input longer than the limit is ...
=====================  =====  ==================================================================
``extend``             Lt     refused (inputs up to Lt run through the extension method)
``truncate_to_max``    Lt     cut to Lt tokens (the closing special tokens kept)
``truncate_to_window`` Lo     cut to Lo tokens: the model as trained (TEI's ``--auto-truncate``)
``error_over_window``  Lo     refused
=====================  =====  ==================================================================

The names users already know stay, as aliases whose meaning depends on where they are written
(that is why they are aliases, not names): the encoder's ``on_overflow="truncate"`` cuts at Lt and
``"error"`` refuses above Lt; the server's ``overflow="truncate"`` cuts at Lo and ``"error"`` refuses
above Lo.  :func:`resolve_overflow` is the one place a policy name is checked and resolved.

Apart from ``longembed.inputs`` (which re-exports it) so that the command line can list the names
(``--help``) without importing numpy or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from longembed.errors import UserError

Context = Literal["encoder", "server"]


@dataclass(frozen=True)
class OverflowPolicy:
    """A limit (``"window"``: Lo, ``"max"``: Lt) and what happens past it (``"truncate"`` or ``"error"``)."""

    name: str
    limit: Literal["window", "max"]
    action: Literal["truncate", "error"]

    @property
    def truncates(self) -> bool:
        return self.action == "truncate"

    def limit_for(self, window: int, max_length: int) -> int:
        """The number of tokens this policy allows, given Lo (``window``) and Lt (``max_length``)."""
        return window if self.limit == "window" else max_length


EXTEND = OverflowPolicy("extend", "max", "error")
TRUNCATE_TO_MAX = OverflowPolicy("truncate_to_max", "max", "truncate")
TRUNCATE_TO_WINDOW = OverflowPolicy("truncate_to_window", "window", "truncate")
ERROR_OVER_WINDOW = OverflowPolicy("error_over_window", "window", "error")

#: Every policy by its own name.
OVERFLOW_POLICIES: dict[str, OverflowPolicy] = {
    p.name: p for p in (EXTEND, TRUNCATE_TO_MAX, TRUNCATE_TO_WINDOW, ERROR_OVER_WINDOW)
}
#: The names users know, by where they are written: the encoder's ``on_overflow`` and the server's
#: ``overflow`` (its "extend" is also a policy's own name; listed so that the server's names come first).
OVERFLOW_ALIASES: dict[str, dict[str, str]] = {
    "encoder": {"truncate": TRUNCATE_TO_MAX.name, "error": EXTEND.name},
    "server": {"extend": EXTEND.name, "truncate": TRUNCATE_TO_WINDOW.name, "error": ERROR_OVER_WINDOW.name},
}


def overflow_names(context: Context) -> tuple[str, ...]:
    """The names accepted in ``context``: its aliases first (the names users know), then the policies'."""
    return tuple(dict.fromkeys([*OVERFLOW_ALIASES[context], *OVERFLOW_POLICIES]))


def resolve_overflow(value: str | OverflowPolicy, context: Context, field: str = "overflow") -> OverflowPolicy:
    """The policy ``value`` names in ``context`` (``"encoder"`` or ``"server"``), else a ValueError
    naming ``field`` and the accepted names."""
    if isinstance(value, OverflowPolicy):
        return value
    if isinstance(value, str):
        name = OVERFLOW_ALIASES[context].get(value, value)
        if name in OVERFLOW_POLICIES:
            return OVERFLOW_POLICIES[name]
    raise UserError(f"{field} must be one of {', '.join(overflow_names(context))}; got {value!r}")
