"""Command-line flags shared by the subcommands, the encoder's derived from ``EncoderConfig``.

Every field of :class:`~longembed.config.EncoderConfig` is a flag (``max_length`` -> ``--max-length``)
with the field's help text and choices, so a new encoder option is a new flag in every command.
Flags the user did not give are left out of the options (``argparse.SUPPRESS``): the config's
defaults, or a ``--preset``, decide them.  Nothing here imports torch or transformers: the parsers
(``longembed.cli.parsers``) are built from it for ``--help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longembed.config import DTYPE_AUTO, EncoderConfig
from longembed.errors import MissingFileError, UserError
from longembed.extension.methods import METHODS
from longembed.retrieval.strategy import BM25, Strategy

MODEL_HELP = EncoderConfig.__dataclass_fields__["model"].metadata["help"]
#: Fields given to load_encoder by position, not as options.
POSITIONAL_FIELDS = ("model", "method", "max_length")


def _key_value(parse_value: Any) -> Any:
    """An argparse type for ``KEY=VALUE``; the value parsed by ``parse_value``."""

    def parse(text: str) -> tuple[str, Any]:
        if "=" not in text:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
        key, value = text.split("=", 1)
        return key.strip(), parse_value(value)

    return parse


def _json_or_text(value: str) -> Any:
    """A number, true/false or null when the text is one, else the text itself."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _base_type(annotation: Any) -> Any:
    """int for ``int | None``, float for ``float``, dict[str, str] as it is (a union's non-None member)."""
    if not isinstance(annotation, types.UnionType) and typing.get_origin(annotation) is not typing.Union:
        return annotation
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    return members[0]


def add_encoder_arguments(
    parser: argparse.ArgumentParser,
    model_required: bool = False,
    model_help: str = MODEL_HELP,
    exclude: Sequence[str] = (),
) -> None:
    """One flag per EncoderConfig field (minus ``exclude``), plus --device and --batch-size."""
    group = parser.add_argument_group("encoder")
    hints = typing.get_type_hints(EncoderConfig)
    for field in dataclasses.fields(EncoderConfig):
        if field.name in exclude or not field.metadata.get("flag", True):
            continue
        flag = "--" + field.name.replace("_", "-")
        meta = field.metadata
        kwargs: dict[str, Any] = {"dest": field.name, "help": meta["help"], "default": argparse.SUPPRESS}
        base = _base_type(hints[field.name])
        if field.name == "model":
            kwargs.update(default=None if model_required else "default", required=model_required, help=model_help)
        elif field.name == "method":
            kwargs.update(default=None, help=meta["help"] + " (default: the method a tuned or exported folder "
                          "records, else truncate)")
        elif field.name == "max_length":
            kwargs["default"] = field.default
        elif field.name == "dtype":  # auto is resolved before the config is built (longembed.precision)
            kwargs["choices"] = [DTYPE_AUTO, *meta["choices"]]
        if typing.get_origin(base) is dict:
            value_type = typing.get_args(base)[1]
            kwargs.update(action="append", metavar="KEY=VALUE",
                          type=_key_value(str if value_type is str else _json_or_text))
        elif meta.get("choices") and "choices" not in kwargs:
            kwargs["choices"] = list(meta["choices"])
        elif base in (int, float):
            kwargs["type"] = base
        group.add_argument(flag, **kwargs)
    group.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    group.add_argument("--batch-size", type=int, default=16, help="most sequences per batch")


#: The jargon of the encoder flags, one line each (the papers' symbols; the documentation's glossary
#: says more).
GLOSSARY = {
    "Lo": "the model's trained context, in tokens (its original_length; 512 for MiniLM and e5)",
    "Lt": "the target context: --max-length, the most tokens an input may have",
    "s": "the scale factor ceil(Lt / Lo) (--scale fixed), or ceil(n / Lo) per document (per_document)",
    "tau": "TempScale's temperature: attention logits divided by tau in (0, 1] (--temperature)",
    "sigma_a": "how much a layer's attention rows differ (length-collapse paper): `longembed collapse`",
    "g, w": "SelfExtend's group size and neighbour window (--group-size, --window)",
    "lambda": "NTK's RoPE base multiplier (--ntk-factor)",
}


#: The position schemes as the papers write them, in the order the methods' lines name them.
SCHEME_NAMES = {"ape": "APE", "rope": "RoPE", "alibi": "ALiBi"}


def method_lines() -> list[str]:
    """One line per ``--method`` choice: its name, the position schemes it applies to ("any": all), its summary."""
    width = max(len(name) for name in METHODS)

    def schemes(applies: frozenset[str] | tuple[str, ...]) -> str:
        return "any" if set(applies) >= set(SCHEME_NAMES) else ", ".join(
            SCHEME_NAMES[s] for s in SCHEME_NAMES if s in applies)

    return [f"  {name:<{width}}  {schemes(m.schemes):<10} {m.summary}" for name, m in METHODS.items()]


def help_epilog(examples: Sequence[str], methods: bool = True) -> str:
    """A command's ``--help`` epilog: the methods one line each, the glossary, and examples."""
    parts: list[str] = []
    if methods:
        parts += ["methods (--method; the model's position scheme decides which apply):", *method_lines(), ""]
        width = max(len(term) for term in GLOSSARY)
        parts += ["terms:", *(f"  {term:<{width}}  {meaning}" for term, meaning in GLOSSARY.items()), ""]
    parts += ["examples:", *(f"  {line}" for line in examples)]
    return "\n".join(parts)


def comma_list(item_type: type) -> Callable[[str], tuple]:
    """An argparse type for ``a,b,c`` -> a tuple of ``item_type`` (positive when numbers)."""

    def parse(text: str) -> tuple:
        try:
            items = tuple(item_type(x.strip()) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {item_type.__name__}; got {text!r}") from None
        if not items or (item_type in (int, float) and min(items) <= 0):
            raise argparse.ArgumentTypeError(f"expected positive values like 768,512; got {text!r}")
        return items

    return parse


def add_settings_arguments(
    target: Any, settings: type, groups: dict[str, Any] | None = None, exclude: Sequence[str] = (),
    only: Sequence[str] | None = None,
) -> None:
    """One flag per field of the dataclass ``settings`` (``max_batch_tokens`` -> ``--max-batch-tokens``),
    with the field's default and its metadata's help, choices and metavar; a bool is a switch, a tuple
    a comma-separated list.  :func:`settings_from_args` builds the dataclass back from the flags.

    The fields are declared with :func:`~longembed.flag_fields.flag_field`, whose docstring lists the
    metadata read here (``flags``, ``flag=False``, ``negate``, ``switches``, ``list``, ``repeat``, ``type``,
    ``required``, ``show_default``, ``group``: the argument group, made once in ``groups`` or taken from
    it).  ``exclude`` / ``only``: fields left out / the only fields added (a command that adds some flags itself, e.g. in a mutually exclusive group)."""
    hints = typing.get_type_hints(settings)
    groups = {} if groups is None else groups
    for field in dataclasses.fields(settings):
        meta = field.metadata
        if not meta.get("flag", True) or field.name in exclude or (only is not None and field.name not in only):
            continue
        name = meta.get("group")
        if name is not None and name not in groups:
            groups[name] = target.add_argument_group(name)
        group = target if name is None else groups[name]
        if meta.get("switches"):
            _add_switches(group, field)
            continue
        flags = meta.get("flags") or ("--" + field.name.replace("_", "-"),)
        options = _flag_options(field, _base_type(hints[field.name]))
        group.add_argument(*flags, **options)


def _flag_options(field: dataclasses.Field, base: Any) -> dict[str, Any]:
    """argparse keyword arguments of one settings field (see :func:`add_settings_arguments`)."""
    meta = field.metadata
    default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    kwargs: dict[str, Any] = {"dest": field.name, "default": default}
    if meta.get("negate"):
        kwargs["action"] = "store_false"
    elif base is bool:
        kwargs["action"] = "store_true"
    elif meta.get("list"):
        kwargs.update(nargs=meta.get("nargs", "+"), type=meta.get("type", str))
    elif meta.get("repeat"):  # one value per occurrence of the flag, kept in order
        kwargs.update(action="append", type=meta.get("type", str))
    elif typing.get_origin(base) is tuple and "nargs" not in meta:
        kwargs["type"] = comma_list(typing.get_args(base)[0])
    elif "nargs" in meta:  # a list given as space-separated values
        kwargs["type"] = meta.get("type", str)
    else:
        kwargs["type"] = meta.get("type", base)
    for key in ("choices", "metavar", "required", "nargs"):
        if meta.get(key) is not None:
            kwargs[key] = list(meta[key]) if key == "choices" else meta[key]
    shown = "" if field.default in (None, (), False) or not meta.get("show_default", True) else (
        f" (default: {field.default})"
    )
    kwargs["help"] = meta["help"] + shown
    if kwargs.get("required"):
        kwargs.pop("default")
    return kwargs


def _add_switches(group: Any, field: dataclasses.Field) -> None:
    """Mutually exclusive flags that each set the field to one value (``--late`` / ``--naive``)."""
    exclusive = group.add_mutually_exclusive_group()
    for flag, (value, help) in field.metadata["switches"].items():
        exclusive.add_argument(flag, dest=field.name, action="store_const", const=value, default=field.default,
                               help=help)


def settings_from_args(settings: type, args: argparse.Namespace, **overrides: Any) -> Any:
    """The dataclass ``settings`` from the flags :func:`add_settings_arguments` added (``overrides`` win;
    fields without a flag keep their default unless ``args`` has them, as ``--batch-size``)."""
    hints = typing.get_type_hints(settings)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(settings):
        if field.name in overrides or not hasattr(args, field.name):
            continue
        value = getattr(args, field.name)
        if field.metadata.get("list") and value is not None:
            value = _list_value(value, hints[field.name])
        values[field.name] = value
    return settings(**{**values, **overrides})


def _list_value(values: list[Any], annotation: Any) -> list[Any]:
    """``["a,b", "c"]`` -> ["a", "b", "c"]; items of an int list parsed as lengths (4k = 4096)."""
    items = [v for value in values for v in (value.split(",") if isinstance(value, str) else [value])]
    items = [v.strip() if isinstance(v, str) else v for v in items]
    items = [v for v in items if v != ""]
    base = _base_type(annotation)
    item_type = (typing.get_args(base) or (str,))[0]
    if item_type is int:
        return [parse_length(v) if isinstance(v, str) else int(v) for v in items]
    return items


@dataclass(frozen=True)
class CommandHandler:
    """A subcommand's handler, named by module and function and imported only when the command runs,
    so that building the parser (``--help``, a typo) never imports torch or transformers."""

    module: str
    function: str = "run"

    def resolve(self) -> Callable[[argparse.Namespace], int | None]:
        return getattr(importlib.import_module(self.module), self.function)

    def __call__(self, args: argparse.Namespace) -> int | None:
        return self.resolve()(args)


def encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """The EncoderConfig fields given on the command line (model, method and max_length excluded)."""
    options: dict[str, Any] = {}
    for field in dataclasses.fields(EncoderConfig):
        if field.name in POSITIONAL_FIELDS or not hasattr(args, field.name):
            continue
        value = getattr(args, field.name)
        options[field.name] = dict(value) if isinstance(value, list) else value
    return options


def strategy_from_args(args: argparse.Namespace, **overrides: Any) -> Strategy:
    """The :class:`~longembed.retrieval.strategy.Strategy` of the flags: the encoder's (``--model``,
    ``--method``, ``--max-length``, its options; none for ``--model bm25``) and the strategy's own."""
    if getattr(args, "model", None) == BM25:
        overrides = {"method": None, "max_length": None, "encoder_options": {}, **overrides}
    return settings_from_args(Strategy, args, **{"encoder_options": encoder_options(args), **overrides})


def given_encoder_flags(args: argparse.Namespace) -> list[str]:
    """The encoder flags the user set (for commands that ignore them, e.g. ``--model bm25``)."""
    flags = ["--" + name.replace("_", "-") for name in encoder_options(args)]
    if getattr(args, "method", None) not in (None, "truncate"):
        flags.insert(0, "--method")
    if getattr(args, "max_length", None) is not None:
        flags.insert(1 if flags and flags[0] == "--method" else 0, "--max-length")
    if getattr(args, "device", None) is not None:
        flags.append("--device")
    return flags


def add_benchmark_arguments(group: argparse._ArgumentGroup, output_help: str) -> None:
    """Flags shared by every benchmark command (eval, sweep): data, lengths, output, prompts, cache."""
    group.add_argument(
        "--lengths",
        nargs="+",
        default=None,
        metavar="LIST",
        help="passkey/needle lengths, e.g. 256,512,1k,4k (default: all eight, 256..32k)",
    )
    add_data_dir_argument(group, "data folder (default: $LONGEMBED_DATA_DIR; passkey needs none)")
    group.add_argument("--output", type=Path, default=None, help=output_help)
    group.add_argument(
        "--query-prompt",
        default=None,
        help="prefix of every query (default: the model's 'query' prompt, else none; '' for none)",
    )
    group.add_argument(
        "--document-prompt",
        default=None,
        help="prefix of every document (default: the model's 'document' or 'passage' prompt)",
    )
    add_cache_arguments(group)


def add_data_dir_argument(group: Any, help: str, required: bool = False) -> None:
    group.add_argument("--data-dir", type=Path, default=None, required=required, help=help)


def add_cache_arguments(group: Any) -> None:
    """--cache-dir and --no-cache."""
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache (default: $LONGEMBED_CACHE_DIR or ~/.cache/longembed/embeddings)",
    )
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the embedding cache")


def existing_folder(path: Path | None, flag: str) -> Path | None:
    """``path`` if it is None or a folder, else a clear error naming the flag."""
    if path is not None and not Path(path).is_dir():
        raise MissingFileError(f"{flag} {path} is not a folder")
    return path


def split_list(values: list[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``; None stays None."""
    if values is None:
        return None
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def parse_length(text: str) -> int:
    """``"512"`` -> 512, ``"4k"`` -> 4096 (k = 1024, as in LongEmbed's lengths)."""
    match = re.fullmatch(r"(\d+)\s*([kK]?)", text.strip())
    if not match:
        raise UserError(f"not a length: {text!r} (use e.g. 512 or 4k)")
    return int(match.group(1)) * (1024 if match.group(2) else 1)


def parse_lengths(values: list[str] | None) -> list[int] | None:
    """``--lengths 256,1k 4k`` -> [256, 1024, 4096]; None stays None."""
    items = split_list(values)
    return None if items is None else [parse_length(x) for x in items]


def default_output(model: str, method: str, max_length: int | None, variant: Sequence[str] = ()) -> Path:
    """``runs/<model folder name>-<method>-<max_length>[-<variant>...]`` (``runs/bm25`` for BM25);
    ``variant`` names what else makes the run different (e.g. "late-chunks", "bm25-rrf"), so that two
    different runs do not share a default folder."""
    if model == "bm25":
        return Path("runs") / "bm25"
    name = Path(model.rstrip("/")).name or "model"
    return Path("runs") / "-".join([name, method, str(max_length if max_length is not None else "native"), *variant])
