"""``ExtensionMethod``: what every context-window extension method declares and computes.

A method is a small frozen dataclass whose fields are its parameters (NTK's factor and variant,
SelfExtend's g and w).  Its class declares the rest: ``name`` and ``summary``, the position
``schemes`` it applies to, its ``config_keys`` (the ``EncoderConfig`` fields it reads, mapped to its
fields, so config -> method -> config round-trips), and whether and how a plain model can express it.
The position schemes (``extension.positions``) ask the method for what differs per batch:

- APE: ``position_ids`` (and, on a folder whose table was extended, ``table_rows`` and
  ``table_position_ids``);
- RoPE: ``rotary_positions``, per-document ``frequencies`` and ``add_rotary_tables`` (SelfExtend's
  grouped tables);
- export: ``rope_parameters`` for ``config.json`` or ``export_refusal``.

The defaults are "nothing changes" (the model's own positions and frequencies), so a method writes
only what it changes.  No torch here: the arithmetic uses methods of the tensors passed in, and the
rotary machinery (``extension.rope.RotarySpec``) is an argument, so the config and the command line
can read the catalogue without importing torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from longembed.errors import UserError

if TYPE_CHECKING:
    import torch

    from longembed.extension.rope import RotarySpec, RotaryTables

# The choices of the methods' common switches, here (no torch) so that the config and the command line
# can list them without importing the arithmetic.
#: s = ceil(Lt / Lo) for every document ("fixed") or ceil(n / Lo) per document ("per_document").
SCALE_MODES = ("fixed", "per_document")
#: Which inputs a method changes: only those longer than Lo ("long"), or every input ("all").
APPLY_MODES = ("long", "all")

#: Every method by name, in the order the command line lists them (filled by ``register``).
METHODS: dict[str, type[ExtensionMethod]] = {}

#: cos/sin tables of positions (B, n) with a batch's frequencies (given to ``add_rotary_tables``).
CosSin = Callable[["torch.Tensor"], tuple["torch.Tensor", "torch.Tensor"]]


def register(method: type[ExtensionMethod]) -> type[ExtensionMethod]:
    """Class decorator: add a method to ``METHODS`` under its ``name``."""
    if method.name in METHODS:
        raise UserError(f"a method named {method.name!r} is registered already ({METHODS[method.name].__name__})")
    METHODS[method.name] = method
    return method


@dataclass(frozen=True)
class ExtensionMethod:
    """Base of every method; its fields are the method's parameters (see the module docstring)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    schemes: ClassVar[frozenset[str]] = frozenset()
    #: EncoderConfig field -> this method's field.
    config_keys: ClassVar[dict[str, str]] = {}
    #: Config keys only this method may set: with another method they must keep their default.
    exclusive_keys: ClassVar[tuple[str, ...]] = ()
    #: False for the baseline: inputs stay within the model's own positions (Lo).
    extends_context: ClassVar[bool] = True
    #: True when APE position ids may be fractional (the position table then interpolates rows).
    fractional_positions: ClassVar[bool] = False
    #: True for a fixed position map that an APE table of Lt rows can hold (``table_rows``).
    extends_table: ClassVar[bool] = False
    #: The schemes on which a plain model (``longembed export``) can express the method.
    exportable_on: ClassVar[frozenset[str]] = frozenset()
    #: Why a plain model cannot express it (on the schemes outside ``exportable_on``).
    export_refusal: ClassVar[str] = ""

    # ------------------------------------------------------------------ config
    @classmethod
    def from_config(cls, config: Any) -> ExtensionMethod:
        """The method with its parameters read from an ``EncoderConfig`` (validated on construction)."""
        return cls(**{field: getattr(config, key) for key, field in cls.config_keys.items()})

    def config_values(self) -> dict[str, Any]:
        """This method's parameters as ``EncoderConfig`` fields (``from_config``'s inverse)."""
        return {key: getattr(self, field) for key, field in self.config_keys.items()}

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Validate this method's keys in ``config``, whatever its method (every value must be valid),
        and refuse an exclusive key set for another method."""
        values = cls.from_config(config).config_values()
        if config.method == cls.name:
            return
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for key in cls.exclusive_keys:
            if values[key] != defaults[cls.config_keys[key]]:
                raise UserError(f"{key}={values[key]!r} applies to method {cls.name!r} only, not {config.method!r}")

    def default_max_length(self, original_length: int, model_length: int | None) -> int | None:
        """Lt when none is given: None (the method needs a target length), Lo, or the model's own limit."""
        return None

    # ------------------------------------------------------------------ APE
    def position_ids(self, p: torch.Tensor, s: torch.Tensor, original_length: int) -> torch.Tensor | None:
        """Position ids for token positions p (B, n) at scale factors s (B, 1); None: the model's own."""
        return None

    def table_rows(
        self, original: torch.Tensor, p: torch.Tensor, big_s: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, kept): the extended table's rows p (T,) built from E_o with scale S, and the mask of
        rows that equal E_o's own.  Only for methods with ``extends_table``."""
        raise UserError(f"{self.name!r} is no fixed position map: it cannot extend a position table")

    def table_position_ids(
        self, p: torch.Tensor, s: torch.Tensor, big_s: int, table_length: int
    ) -> torch.Tensor:
        """Position ids on a table this method extended to T rows (scale S), for documents at scales s."""
        raise UserError(f"{self.name!r} is no fixed position map: it cannot extend a position table")

    # ------------------------------------------------------------------ RoPE
    def rotary_positions(self, p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """The positions (B, n) RoPE rotates by, for float positions p (B, n) at scales s (B, 1)."""
        return p

    def frequencies(
        self, spec: RotarySpec, s: int, n: int | None, original_length: int
    ) -> tuple[torch.Tensor, float] | None:
        """(inv_freq, cos/sin factor) of one document at scale s with n tokens; None: the model's own."""
        return None

    def add_rotary_tables(
        self, tables: RotaryTables, p: torch.Tensor, scales: torch.Tensor, original_length: int, cos_sin: CosSin
    ) -> None:
        """Add tables beyond the plain cos/sin (SelfExtend's grouped ones); ``cos_sin`` maps positions
        (B, n) to cos/sin with the batch's frequencies."""

    # ------------------------------------------------------------------ export
    @classmethod
    def export_reason(cls, scheme: str) -> str | None:
        """None when a plain model of ``scheme`` can express the method, else why not."""
        return None if scheme in cls.exportable_on else cls.export_refusal

    def rope_parameters(self, params: dict[str, Any], base: float, s: int, original_length: int) -> dict[str, Any]:
        """The rotary parameters of a plain model's config.json (``params`` with rope_theta ``base``)."""
        raise UserError(f"{self.name!r} cannot be exported as rotary parameters: {self.export_refusal}")

    @property
    def export_raises_max_positions(self) -> bool:
        """Whether the exported config's max_position_embeddings becomes Lt (dynamic NTK reads Lo there)."""
        return True


def check_positive_int(name: str, value: Any) -> None:
    """None or a positive int (not a bool), else a ValueError naming the option."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UserError(f"{name} must be a positive integer, got {value!r}")


def is_number(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
