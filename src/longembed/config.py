"""EncoderConfig: everything that decides what vector a text gets, in one round-trippable object.

It is the single source of truth for an encoder (and the key of the benchmark's embedding cache):
``save``/``load`` write and read it as JSON, like a sentence-transformers module config.  Each field
carries its help text and choices as dataclass metadata, from which the command line builds its
encoder flags (``longembed.cli.options``): a new field is a new flag everywhere.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.errors import UserError, UserTypeError
from longembed.extension.methods import (
    APPLY_MODES,
    METHODS,
    NTK_VARIANTS,
    POSITION_SCHEMES,
    SCALE_MODES,
    check_method_options,
)
from longembed.extension.methods.base import check_positive_int, is_number
from longembed.extension.methods.yarn import YARN_OPTION_NAMES
from longembed.extension.presets import PRESETS, preset_options
from longembed.flag_fields import flag_field
from longembed.overflow import overflow_names, resolve_overflow

#: on_overflow's names (``longembed.overflow``): "truncate" cuts at max_length, "error" refuses above it.
OVERFLOW_MODES = overflow_names("encoder")
#: How token states become one vector (read from the model folder unless overridden).
POOLING_MODES = ("mean", "cls", "last")
#: Precisions a model can run in, as torch spells them (``loading.DTYPES`` maps them to torch dtypes).
DTYPE_NAMES = ("float32", "bfloat16", "float16")
#: The --dtype that picks one of DTYPE_NAMES for the device (``longembed.precision.resolve_dtype``): the default
#: of index, embed and serve.  Never a config's dtype: it is resolved before the config is built.
DTYPE_AUTO = "auto"
#: The dtype of eval, advise and every command but index, embed and serve (published scores stay comparable).
DEFAULT_DTYPE = "float32"
#: Quantization schemes (``longembed.quantization``).
QUANTIZATION_SCHEMES = ("int8",)
#: The longest max_length accepted (2^20 tokens: 32 times the longest LongEmbed length).
MAX_SUPPORTED_LENGTH = 1 << 20
#: Above this many times Lo, a scale factor is beyond anything the papers tried: warn.
LARGEST_TESTED_SCALE = 64


@dataclass
class EncoderConfig:
    """How to encode: the model, the extension method and its switches (help: each field's metadata)."""

    model: str = flag_field(
        "model folder, sentence-transformers folder or hub id ('default': packaged all-MiniLM-L6-v2)",
        default="default")
    method: str = flag_field(
        "context-window extension method", default="truncate", choices=tuple(METHODS))
    max_length: int | None = flag_field(
        "Lt: the most tokens an input may have, prompt and special tokens included (default: the model's Lo)",
        default=None)
    original_length: int | None = flag_field(
        "Lo override: the model's trained context (default: read from the model config)", default=None)
    position_scheme: str | None = flag_field(
        "override the detected position scheme", default=None, choices=POSITION_SCHEMES)
    scale: str = flag_field(
        "s = ceil(Lt/Lo) ('fixed', the paper's tables) or ceil(n/Lo) ('per_document')",
        default="fixed", choices=SCALE_MODES)
    apply_to: str = flag_field(
        "extend only inputs longer than Lo ('long'), or every input ('all', the paper's static runs)",
        default="long", choices=APPLY_MODES)
    attention_scale: str | None = flag_field(
        "'logn': multiply attention logits by max(1, log n / log Lo) (LongEmbed Appendix B)",
        default=None, choices=("logn",))
    temperature: float = flag_field(
        "TempScale tau in (0, 1]: attention logits / tau in every layer", default=1.0)
    temperature_decay: float = flag_field(
        "length-aware TempScale: tau(n) = tau x (log ref / log n) ** decay above ref tokens (0: off)",
        default=0.0)
    temperature_reference: int = flag_field(
        "ref of the length-aware TempScale, in tokens (>= 2)", default=512)
    ntk_factor: float | None = flag_field(
        "NTK: static lambda (base x lambda; default Table 6 by s), or dynamic F (default 2)", default=None)
    ntk_variant: str = flag_field(
        "NTK 'static' (one base for a target length) or 'dynamic' (base grows with n, as HF's dynamic "
        "rope type and nomic's rotary_scaling_factor)", default="static", choices=NTK_VARIANTS)
    group_size: int | None = flag_field("SelfExtend g (default: Table 6 by s)", default=None)
    window: int | None = flag_field("SelfExtend w (default: Table 6 by s)", default=None)
    yarn_options: dict[str, float] = flag_field(
        f"extra YaRN rotary parameters, KEY=VALUE ({', '.join(YARN_OPTION_NAMES)})", default_factory=dict)
    pooling: str | None = flag_field(
        "override the model folder's pooling", default=None, choices=POOLING_MODES)
    prompts: dict[str, str] = flag_field(
        "named prompts NAME=TEXT, merged over the model folder's (e.g. query='query: ')",
        default_factory=dict)
    on_overflow: str = flag_field(
        "inputs longer than max_length: cut them with a warning ('truncate'), or refuse them ('error'); "
        "or any overflow policy (truncate_to_window, error_over_window cut or refuse above Lo)",
        default="truncate", choices=OVERFLOW_MODES)
    dtype: str = flag_field(
        "precision of the weights and activations (vectors are returned as float32); 'auto': bfloat16 where "
        "the device computes it natively (AMX, AVX-512 BF16, a bfloat16 GPU), else float32. Default: auto for "
        "index, embed and serve; float32 for eval, advise, tune and the rest (published scores stay comparable)",
        default=DEFAULT_DTYPE, choices=DTYPE_NAMES)
    quantization: str | None = flag_field(
        "'int8': dynamic int8 quantization of the linear layers (needs torchao and dtype float32; "
        "a CPU speed-up, see benchmarks/RESULTS.md); off by default",
        default=None, choices=QUANTIZATION_SCHEMES)
    preset: str | None = flag_field(
        "a paper's exact settings, e.g. 'longembed-paper' (explicit options win)",
        default=None, choices=tuple(PRESETS))

    def __post_init__(self) -> None:
        self.model = str(self.model)
        if self.method not in METHODS:
            raise UserError(f"unknown method {self.method!r}; choose from: {', '.join(METHODS)}")
        resolve_overflow(self.on_overflow, "encoder", "on_overflow")
        for name in ("scale", "apply_to", "attention_scale", "dtype"):
            _check_choice(name, getattr(self, name), _choices(name))
        for name in ("position_scheme", "pooling", "preset", "quantization"):
            if getattr(self, name) is not None:
                _check_choice(name, getattr(self, name), _choices(name))
        if self.quantization is not None and self.dtype != "float32":
            raise UserError(
                f"quantization={self.quantization!r} starts from float32 weights; got dtype={self.dtype!r}"
            )
        self.temperature = check_temperature(self.temperature)
        if not is_number(self.temperature_decay) or not 0 <= self.temperature_decay <= 4:
            raise UserError(f"temperature_decay must be a number in [0, 4], got {self.temperature_decay!r}")
        for name in ("max_length", "original_length", "temperature_reference"):
            check_positive_int(name, getattr(self, name))
        if self.temperature_reference < 2:
            raise UserError(f"temperature_reference must be at least 2 tokens, got {self.temperature_reference}")
        if self.max_length is not None and self.max_length > MAX_SUPPORTED_LENGTH:
            raise UserError(
                f"max_length={self.max_length:,} is above the {MAX_SUPPORTED_LENGTH:,} tokens longembed supports"
            )
        check_method_options(self)  # each method validates its own keys (ntk_*, group_size, window, yarn_options)
        _check_mapping("prompts", self.prompts, lambda v: isinstance(v, str))

    @classmethod
    def from_options(cls, model: str, method: str, max_length: int | None, **options: Any) -> EncoderConfig:
        """Build from ``load_encoder``'s keyword options: a preset fills what is not given; unknown
        options are a clear error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise UserTypeError(
                f"unknown option(s) {unknown}; valid options: {sorted(known - {'model', 'method', 'max_length'})}"
            )
        if options.get("preset") is not None:
            options = {**preset_options(options["preset"], method), **options}
        return cls(model=str(model), method=method, max_length=max_length, **options)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> EncoderConfig:
        return cls(**json.loads(Path(path).read_text()))


def check_temperature(value: Any, name: str = "temperature") -> float:
    """A TempScale tau: a finite number in (0, 1]; returned as float, else a ValueError naming it."""
    if not is_number(value) or not 0 < value <= 1:
        raise UserError(f"{name} must be in (0, 1] (TempScale), got {value!r}")
    return float(value)


def check_scale_factor(max_length: int, original_length: int) -> None:
    """Warn when Lt / Lo is beyond any scale factor the papers tested (it is allowed, not advised)."""
    if max_length > LARGEST_TESTED_SCALE * original_length:
        warnings.warn(
            f"max_length={max_length:,} is {max_length / original_length:.0f} times this model's Lo="
            f"{original_length}; the papers test scale factors up to {LARGEST_TESTED_SCALE}",
            stacklevel=3,
        )


def _choices(name: str) -> tuple:
    choices = EncoderConfig.__dataclass_fields__[name].metadata["choices"]
    return (None, *choices) if name == "attention_scale" else choices


def _check_choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise UserError(f"{name} must be one of {choices}, got {value!r}")


def _check_mapping(name: str, value: Any, valid: Any) -> None:
    if not isinstance(value, dict) or not all(isinstance(k, str) and valid(v) for k, v in value.items()):
        raise UserError(f"{name} must map names to values, got {value!r}")
