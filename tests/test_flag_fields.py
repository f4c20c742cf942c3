"""flag_field: the one helper that declares a dataclass field and its command-line flag."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from longembed.cli.options import add_settings_arguments, settings_from_args
from longembed.config import EncoderConfig
from longembed.evaluation.spec import EvalSpec
from longembed.evaluation.sweep_spec import SweepSpec
from longembed.flag_fields import flag_field
from longembed.serving.settings import ServerSettings


@dataclass
class _Toy:
    size: int = flag_field("how many", 3)
    mode: str = flag_field("which mode", "a", choices=("a", "b"))
    names: dict[str, str] = flag_field("named values", default_factory=dict, flag=False)
    out: Path | None = flag_field("where", None, flags=("--output",), type=Path, show_default=False)
    cache: bool = flag_field("no cache", True, flags=("--no-cache",), negate=True)


def test_a_flag_field_is_a_dataclass_field_with_its_flag_as_metadata() -> None:
    fields = {f.name: f for f in dataclasses.fields(_Toy)}
    assert fields["size"].default == 3 and dict(fields["size"].metadata) == {"help": "how many", "choices": None}
    assert fields["mode"].metadata["choices"] == ("a", "b")
    assert fields["names"].default_factory is dict and fields["names"].metadata["flag"] is False
    assert _Toy().names == {} and _Toy().names is not _Toy().names  # a mutable default is made per instance


def test_the_flags_of_flag_fields_parse_back_into_the_dataclass() -> None:
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, _Toy)
    options = {a.dest: a for a in parser._actions}
    assert "names" not in options  # flag=False: not a flag of its own
    assert options["size"].option_strings == ["--size"] and options["size"].help == "how many (default: 3)"
    assert options["mode"].choices == ["a", "b"]
    assert options["out"].option_strings == ["--output"] and options["out"].help == "where"
    args = parser.parse_args(["--size", "5", "--mode", "b", "--output", "x", "--no-cache"])
    assert settings_from_args(_Toy, args) == _Toy(size=5, mode="b", out=Path("x"), cache=False)


def test_every_option_of_the_configs_and_specs_is_declared_with_its_help() -> None:
    """The encoder config, the server settings and the run specs all declare their fields with flag_field
    (metadata with a help text and the choices key), so one reader builds every command's flags."""
    for settings in (EncoderConfig, ServerSettings, EvalSpec, SweepSpec):
        for field in dataclasses.fields(settings):
            assert isinstance(field.metadata.get("help"), str), (settings.__name__, field.name)
            assert "choices" in field.metadata, (settings.__name__, field.name)
