"""Position schemes: what a family of models needs, per batch, for an extension method to act.

One object per family, chosen when the encoder loads (:func:`position_scheme_for`):

- :class:`AbsolutePositions` (BERT, XLM-R): GP/RP/PI as ``position_ids``, the model's own
  extension point; PI's fractional ids through the wrapped position table.
- :class:`RotaryPositions` (nomic-bert, ModernBERT, Llama-style): the model runs with
  ``position_ids = 0`` (its own rotation is then the identity) and the attention function rotates
  q and k with per-document tables (GP, PI, NTK, YaRN, SelfExtend; ``rope.rotary_tables``).
- :class:`AlibiPositions` (JinaBERT): nothing per batch; the attention function adds the bias.

Each knows the model's trained context Lo and the longest input it can take, checks the method, and
turns a batch (token counts, padded length, per-document scale s) into :class:`BatchPositions`:
model inputs and the attention plan's rotary tables.  What differs by method it asks the method
object (``extension.methods``); no scheme names a method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from longembed.errors import UserError
from longembed.extension.ape import (
    ExtendedTable,
    InterpolatedPositionEmbedding,
    ape_position_ids,
    extended_table_position_ids,
)
from longembed.extension.methods import (
    ALIBI,
    APE,
    METHODS,
    OFFSET_POSITION_MODEL_TYPES,
    ROPE,
    ExtensionMethod,
    check_method,
    detect_position_scheme,
)
from longembed.extension.rope import RotarySpec, RotaryTables, rotary_tables

#: JinaBERT's pre-training length (Jina v2, section 3), its Lo when the config does not say.
DEFAULT_ALIBI_TRAINING_LENGTH = 512


@dataclass
class BatchPositions:
    """What a batch needs besides token ids: model inputs (``position_ids``) and rotary tables."""

    model_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    rotary: RotaryTables | dict[str, RotaryTables] | None = None


class PositionScheme:
    """Base of the three families; ``name`` is "ape", "rope" or "alibi".

    ``method`` is a method object (``extension.methods.build_method(config)``) or a name, which takes
    the method's default parameters; ``self.method`` is its name, ``self.extension`` the object.
    """

    name = ""

    def __init__(
        self,
        method: ExtensionMethod | str,
        model_config: Any,
        original_length: int | None = None,
        extended: ExtendedTable | None = None,
    ):
        if extended is not None:
            raise UserError(f"an extended position table record belongs to an APE model, not a {self.name.upper()} one")
        name = method if isinstance(method, str) else method.name
        cls = check_method(name, self.name)
        self.extension: ExtensionMethod = cls() if isinstance(method, str) else method
        self.method = name
        self.model_config = model_config
        self.original_length = original_length or self.trained_length()

    def trained_length(self) -> int:
        """Lo read from the model config."""
        raise NotImplementedError

    def longest_input(self) -> int | None:
        """The most tokens the model itself can take (a position table's size), or None if unbounded."""
        return None

    def model_length(self) -> int | None:
        """The longest input the model itself was built for, when a method defaults Lt to it."""
        return None

    def default_max_length(self) -> int | None:
        """Lt when none is given (None: the method needs one)."""
        return self.extension.default_max_length(self.original_length, self.model_length())

    def extending_methods(self) -> list[str]:
        """The methods that take this family of models beyond Lo."""
        return [m.name for m in METHODS.values() if self.name in m.schemes and m.extends_context]

    def target_length(self, requested: int | None) -> int:
        """Lt: the longest input accepted, ``requested`` (checked against what the model can take) or,
        when None, the method's natural default (an error when the method needs one).  Whether Lt / Lo
        is beyond what the papers tested is the caller's warning (``config.check_scale_factor``)."""
        lo = self.original_length
        if requested is None:
            default = self.default_max_length()
            if default is None:
                raise UserError(
                    f"method {self.method!r} extends the context window to max_length tokens: "
                    f"pass max_length (the target length Lt, e.g. {lo * 8}); this model's Lo is {lo}"
                )
            return default
        limit = self.longest_input()
        if limit is not None and requested > limit:
            raise UserError(
                f"this model has {limit} position embeddings, so {self.method} keeps at most {limit} tokens; "
                f"to go to {requested} use an extension method ({', '.join(self.extending_methods())})"
            )
        return requested

    def prepare_model(self, model: torch.nn.Module) -> None:
        """Adapt the loaded model once (in place, this instance only)."""

    def batch(self, lengths: torch.Tensor, seq_len: int, scales: torch.Tensor) -> BatchPositions:
        """Positions of a right-padded batch: token counts (B,), padded length, scale factors (B,)."""
        raise NotImplementedError


class AbsolutePositions(PositionScheme):
    """Learned position table (APE): GP, RP and PI act through ``position_ids``.

    A folder whose table was already extended (``longembed tune`` / ``longembed export``; its
    ``ExtendedTable`` record) has Lo from the record, takes its own method (or truncate), and reads
    the original rows for short inputs (``extended_table_position_ids``).
    """

    name = APE

    def __init__(
        self,
        method: ExtensionMethod | str,
        model_config: Any,
        original_length: int | None = None,
        extended: ExtendedTable | None = None,
    ):
        name = method if isinstance(method, str) else method.name
        model_type = getattr(model_config, "model_type", "")
        # fairseq models (RoBERTa, XLM-R) start their table at padding_idx + 1
        self.offset = model_config.pad_token_id + 1 if model_type in OFFSET_POSITION_MODEL_TYPES else 0
        self.extended = extended
        if extended is not None:
            if name not in (extended.method, "truncate"):
                raise UserError(
                    f"this model's position table was extended with {extended.method!r} to "
                    f"{extended.table_length} positions{' and tuned' if extended.tuned else ''}; open it with "
                    f"method={extended.method!r} (or 'truncate'), or use the original model for {name!r}"
                )
            if original_length not in (None, extended.original_length):
                raise UserError(
                    f"original_length={original_length} contradicts the extended table's Lo={extended.original_length}"
                )
            original_length = extended.original_length
        super().__init__(method, model_config, original_length)
        table = model_config.max_position_embeddings - self.offset
        if extended is not None and extended.table_length > table:
            raise UserError(
                f"the extended-table record says {extended.table_length} positions but the model has {table}"
            )
        if self.original_length > table:
            raise UserError(
                f"original_length={self.original_length} is larger than this model's position table "
                f"({table} positions)"
            )

    def trained_length(self) -> int:
        return self.model_config.max_position_embeddings - self.offset

    def longest_input(self) -> int | None:
        # only the extension methods reuse positions; the model alone has one row per position
        return None if self.extension.extends_context else self.original_length

    def default_max_length(self) -> int | None:
        default = super().default_max_length()
        if default is None and self.extended is not None:
            return self.extended.table_length
        return default

    def prepare_model(self, model: torch.nn.Module) -> None:
        if self.extension.fractional_positions:  # the table must interpolate between rows
            embeddings = model.embeddings
            if not isinstance(embeddings.position_embeddings, InterpolatedPositionEmbedding):
                embeddings.position_embeddings = InterpolatedPositionEmbedding(embeddings.position_embeddings)

    def batch(self, lengths: torch.Tensor, seq_len: int, scales: torch.Tensor) -> BatchPositions:
        if self.extended is not None:
            ids = extended_table_position_ids(self.extended, self.method, lengths, seq_len, scales, self.offset)
            return BatchPositions({"position_ids": ids})
        ids = ape_position_ids(self.extension, lengths, seq_len, scales, self.original_length, self.offset)
        return BatchPositions() if ids is None else BatchPositions({"position_ids": ids})  # None: 0..n-1


class RotaryPositions(PositionScheme):
    """RoPE: per-document cos/sin tables, applied by the attention function."""

    name = ROPE

    def __init__(
        self,
        method: ExtensionMethod | str,
        model_config: Any,
        original_length: int | None = None,
        extended: ExtendedTable | None = None,
    ):
        super().__init__(method, model_config, original_length, extended)
        params = getattr(model_config, "rope_parameters", None) or {}
        layer_types = set(getattr(model_config, "layer_types", None) or ())
        # one spec, or one per layer type when layers differ (ModernBERT's local and global layers)
        if layer_types and all(isinstance(params.get(t), dict) for t in layer_types):
            self.rotary: RotarySpec | dict[str, RotarySpec] = {
                t: RotarySpec.from_config(model_config, t) for t in sorted(layer_types)
            }
        else:
            self.rotary = RotarySpec.from_config(model_config)

    def trained_length(self) -> int:
        params = getattr(self.model_config, "rope_parameters", None) or {}
        return int(params.get("original_max_position_embeddings") or self.model_config.max_position_embeddings)

    def batch(self, lengths: torch.Tensor, seq_len: int, scales: torch.Tensor) -> BatchPositions:
        def tables(spec: RotarySpec) -> RotaryTables:
            return rotary_tables(self.extension, spec, seq_len, scales, self.original_length, lengths=lengths)

        specs = self.rotary
        rotary = {t: tables(spec) for t, spec in specs.items()} if isinstance(specs, dict) else tables(specs)
        # position 0 makes the model's own rotation the identity; the attention function rotates
        position_ids = torch.zeros(len(lengths), seq_len, dtype=torch.long)
        return BatchPositions({"position_ids": position_ids}, rotary)


class AlibiPositions(PositionScheme):
    """ALiBi: no positions at all; the bias -m_h |i - j| is the same formula at every length."""

    name = ALIBI

    def trained_length(self) -> int:
        return int(getattr(self.model_config, "training_length", DEFAULT_ALIBI_TRAINING_LENGTH))

    def model_length(self) -> int | None:
        return int(self.model_config.max_position_embeddings)

    def batch(self, lengths: torch.Tensor, seq_len: int, scales: torch.Tensor) -> BatchPositions:
        return BatchPositions()


SCHEMES: dict[str, type[PositionScheme]] = {APE: AbsolutePositions, ROPE: RotaryPositions, ALIBI: AlibiPositions}


def position_scheme_for(
    model_config: Any,
    method: ExtensionMethod | str,
    scheme: str | None = None,
    original_length: int | None = None,
    extended: ExtendedTable | None = None,
) -> PositionScheme:
    """The position scheme of a model (detected from its config unless ``scheme`` is given) with
    ``method`` (an object, or a name with default parameters); ``extended`` is the record of an APE
    folder whose position table was extended."""
    name = scheme or detect_position_scheme(model_config)
    return SCHEMES[name](method, model_config, original_length, extended)
