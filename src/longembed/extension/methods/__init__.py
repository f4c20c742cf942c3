"""The catalogue of context-window extension methods: one class per method, registered by name.

``METHODS`` maps each name to its class (``Truncate``, ``PCW``, ``GP``, ``RP``, ``PI``, ``NTK``,
``YaRN``, ``SelfExtend``, ``Native``).  A class declares its name, summary, position schemes, the
``EncoderConfig`` keys it reads (and validates), and computes its positions or frequencies and its
export parameters (``base.ExtensionMethod`` lists the hooks).  ``build_method(config)`` turns a config
into the method object the position schemes (``extension.positions``) and the exporter ask.

Adding a method, say ``Foo``:

1. one class: a frozen dataclass subclassing ``ExtensionMethod``, decorated with ``@register``, in
   its own module here (or next to its family); fields for its parameters, ``config_keys`` mapping the
   ``EncoderConfig`` fields it reads to them, ``__post_init__`` validating them, and the hooks it
   changes (``position_ids`` for APE; ``rotary_positions``/``frequencies``/``add_rotary_tables`` for
   RoPE; ``rope_parameters`` or ``export_refusal`` for export);
2. if it is a new module, its import below (registration order is the order the command line lists);
3. its tests (tests/extension/test_methods.py shows the round trip and a toy method).

A method with an option no existing field holds also needs that ``EncoderConfig`` field (which is then
a flag everywhere, and a new key of every config's JSON, so of the embedding cache).
No torch is imported here, so that the config and the command line read the catalogue cheaply.
"""

from __future__ import annotations

from typing import Any

from longembed.extension.methods.base import (
    APPLY_MODES,
    METHODS,
    SCALE_MODES,
    ExtensionMethod,
    register,
)
from longembed.extension.methods.schemes import (
    ALIBI,
    APE,
    OFFSET_POSITION_MODEL_TYPES,
    POSITION_SCHEMES,
    ROPE,
    detect_position_scheme,
)

# isort: off
# Importing a module registers its methods; this order is the order the command line lists them.
from longembed.extension.methods.windows import PCW, Truncate
from longembed.extension.methods.position_maps import GP, PI, RP
from longembed.extension.methods.ntk import NTK, NTK_VARIANTS
from longembed.extension.methods.yarn import YaRN
from longembed.extension.methods.selfextend import SelfExtend
from longembed.extension.methods.native import Native
from longembed.errors import UserError
# isort: on


def check_method(method: str, scheme: str) -> type[ExtensionMethod]:
    """The method's class, or a ValueError that names the methods this model does support."""
    if method not in METHODS:
        raise UserError(f"unknown method {method!r}; choose from: {', '.join(METHODS)}")
    info = METHODS[method]
    if scheme not in info.schemes:
        fitting = [m.name for m in METHODS.values() if scheme in m.schemes]
        raise UserError(
            f"method {method!r} does not apply to {scheme.upper()} models ({info.summary}); "
            f"for this model use one of: {', '.join(fitting)}"
        )
    return info


def build_method(config: Any) -> ExtensionMethod:
    """The method object of an ``EncoderConfig`` (its method with the parameters the config gives)."""
    if config.method not in METHODS:
        raise UserError(f"unknown method {config.method!r}; choose from: {', '.join(METHODS)}")
    return METHODS[config.method].from_config(config)


def check_method_options(config: Any) -> None:
    """Validate every method's keys of an ``EncoderConfig`` (each method checks its own)."""
    for method in METHODS.values():
        method.check_config(config)


def method_names(**flags: bool) -> tuple[str, ...]:
    """Names of the methods whose class attributes equal ``flags`` (e.g. ``extends_table=True``)."""
    return tuple(name for name, m in METHODS.items() if all(getattr(m, k) == v for k, v in flags.items()))


__all__ = [
    "ALIBI", "APE", "APPLY_MODES", "GP", "METHODS", "NTK", "NTK_VARIANTS", "OFFSET_POSITION_MODEL_TYPES", "PCW",
    "PI", "POSITION_SCHEMES", "ROPE", "RP", "SCALE_MODES", "ExtensionMethod", "Native", "SelfExtend",
    "Truncate", "YaRN", "build_method", "check_method", "check_method_options", "detect_position_scheme",
    "method_names", "register",
]
