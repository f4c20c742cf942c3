"""The method catalogue: one class per method, its config keys, its export decision, and that a new
method is one class (a toy method registered here runs end to end without touching any other file)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from conftest import LO, words
from transformers import AutoConfig, AutoModel, AutoTokenizer

from longembed import load_encoder
from longembed.config import EncoderConfig
from longembed.export.plain_model import exportable_methods
from longembed.extension.methods import (
    ALIBI,
    APE,
    GP,
    METHODS,
    NTK,
    PCW,
    PI,
    POSITION_SCHEMES,
    ROPE,
    RP,
    ExtensionMethod,
    Native,
    SelfExtend,
    Truncate,
    YaRN,
    build_method,
    check_method,
    register,
)
from longembed.extension.positions import position_scheme_for
from longembed.extension.rope import RotarySpec, rotary_tables

#: The issue's contract: these names, these classes.
CLASSES = {
    "truncate": Truncate, "pcw": PCW, "gp": GP, "rp": RP, "pi": PI, "ntk": NTK, "yarn": YaRN,
    "selfextend": SelfExtend, "native": Native,
}
CONFIG_FIELDS = {f.name for f in dataclasses.fields(EncoderConfig)}

#: (method, non-default config values, the method object they make)
ROUND_TRIPS = [
    ("truncate", {}, Truncate()),
    ("pcw", {}, PCW()),
    ("gp", {}, GP()),
    ("rp", {}, RP()),
    ("pi", {}, PI()),
    ("ntk", {"ntk_factor": 4.0}, NTK(factor=4.0)),
    ("ntk", {"ntk_factor": 16.0, "ntk_variant": "dynamic"}, NTK(factor=16.0, variant="dynamic")),
    ("yarn", {"yarn_options": {"beta_fast": 16.0, "truncate": False}}, YaRN({"beta_fast": 16.0, "truncate": False})),
    ("selfextend", {"group_size": 5, "window": 128}, SelfExtend(g=5, w=128)),
    ("native", {}, Native()),
]


def test_every_method_is_one_registered_class_with_its_declarations():
    assert METHODS == CLASSES
    for name, cls in METHODS.items():
        assert issubclass(cls, ExtensionMethod) and cls.name == name and cls.summary
        assert cls.schemes and cls.schemes <= set(POSITION_SCHEMES)
        assert set(cls.config_keys) <= CONFIG_FIELDS, f"{name} reads keys EncoderConfig does not have"
        assert set(cls.exclusive_keys) <= set(cls.config_keys)
        assert cls.exportable_on <= cls.schemes
        # an export decision on every scheme it applies to: exportable, or a reason
        for scheme in cls.schemes:
            assert (cls.export_reason(scheme) is None) == (scheme in cls.exportable_on)
            assert cls.export_reason(scheme) is None or len(cls.export_reason(scheme)) > 10
        assert (APE in cls.exportable_on) == cls.extends_table
        assert check_method(name, next(iter(cls.schemes))) is cls


def test_each_config_key_belongs_to_one_method():
    owners = [key for cls in METHODS.values() for key in cls.config_keys]
    assert len(owners) == len(set(owners))
    assert set(owners) == {"ntk_factor", "ntk_variant", "group_size", "window", "yarn_options"}


def test_exportable_methods_follow_the_classes():
    assert exportable_methods() == "APE models: gp, rp, pi; ROPE models: pi, ntk, yarn"


@pytest.mark.parametrize(("method", "values", "expected"), ROUND_TRIPS, ids=lambda x: str(x)[:30])
def test_config_keys_round_trip_through_encoder_config(method, values, expected):
    config = EncoderConfig(model="m", method=method, max_length=4 * LO, **values)
    built = build_method(config)
    assert built == expected
    assert type(built) is METHODS[method]
    keys = built.config_values()
    assert set(keys) == set(METHODS[method].config_keys)
    assert {k: v for k, v in keys.items() if k in values} == values
    again = EncoderConfig(model="m", method=method, max_length=4 * LO, **keys)
    assert again.to_dict() == config.to_dict()


def test_the_config_json_is_unchanged():
    """The embedding cache is keyed by to_dict(): these are the fields and defaults of every cached run."""
    assert EncoderConfig().to_dict() == {
        "model": "default", "method": "truncate", "max_length": None, "original_length": None,
        "position_scheme": None, "scale": "fixed", "apply_to": "long", "attention_scale": None,
        "temperature": 1.0, "temperature_decay": 0.0, "temperature_reference": 512, "ntk_factor": None,
        "ntk_variant": "static", "group_size": None, "window": None, "yarn_options": {}, "pooling": None,
        "prompts": {}, "on_overflow": "truncate", "dtype": "float32", "quantization": None, "preset": None,
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"method": "pi", "group_size": 0}, "group_size must be a positive integer"),
        ({"method": "selfextend", "window": True}, "window must be a positive integer"),
        ({"method": "ntk", "ntk_factor": -1.0}, "ntk_factor must be a finite positive"),
        ({"method": "ntk", "ntk_variant": "fast"}, "ntk_variant must be one of"),
        ({"method": "gp", "ntk_variant": "dynamic"}, "applies to method 'ntk' only, not 'gp'"),
        ({"method": "yarn", "yarn_options": {"beta_fast": "x"}}, "yarn_options must map names to values"),
        ({"method": "yarn", "yarn_options": {"beta": 1.0}}, "unknown yarn_options"),
    ],
)
def test_each_method_validates_its_own_keys_through_the_config(options, message):
    with pytest.raises(ValueError, match=message):
        EncoderConfig(model="m", max_length=4 * LO, **options)


def test_method_objects_validate_on_construction():
    with pytest.raises(ValueError, match="group_size"):
        SelfExtend(g=0)
    with pytest.raises(ValueError, match="ntk_factor"):
        NTK(factor=math.inf)


# ----------------------------------------------------------------------------- the methods' arithmetic
def test_position_maps_against_the_papers_formulas():
    p = torch.arange(12).unsqueeze(0)
    s = torch.tensor([[3]])
    assert GP().position_ids(p, s, 4).tolist() == [[i // 3 for i in range(12)]]
    assert RP().position_ids(p, s, 4).tolist() == [[i % 4 for i in range(12)]]
    assert PI().position_ids(p, s, 4)[0].tolist() == pytest.approx([i / 3 for i in range(12)])
    assert PI().position_ids(p, torch.tensor([[1]]), 4).dtype == torch.int64  # nothing extended: exact lookup
    assert Truncate().position_ids(p, s, 4) is None and PCW().position_ids(p, s, 4) is None


def test_export_parameters_against_the_papers_values():
    params = {"rope_theta": 10000.0}
    assert PI().rope_parameters(params, 10000.0, 4, 512) == {
        "rope_theta": 10000.0, "rope_type": "linear", "factor": 4.0}
    assert NTK().rope_parameters(params, 10000.0, 4, 512) == {"rope_theta": 50000.0}  # Table 6: lambda(4) = 5
    assert NTK(factor=2.0).rope_parameters(params, 10000.0, 4, 512) == {"rope_theta": 20000.0}
    dynamic = NTK(variant="dynamic")
    assert dynamic.rope_parameters(params, 10000.0, 4, 512)["factor"] == 2.0  # nomic's F for 8k
    assert not dynamic.export_raises_max_positions and NTK().export_raises_max_positions
    yarn = YaRN({"beta_fast": 8.0}).rope_parameters(params, 10000.0, 4, 512)
    assert yarn["original_max_position_embeddings"] == 512 and yarn["factor"] == 4.0 and yarn["beta_fast"] == 8.0
    with pytest.raises(ValueError, match="SelfExtend"):
        SelfExtend().rope_parameters(params, 10000.0, 4, 512)


def test_selfextend_tables_use_table6_defaults_only_for_extended_documents():
    spec = RotarySpec(params={"rope_theta": 10000.0}, rotary_dim=8, head_dim=8, max_position_embeddings=8)
    tables = rotary_tables(SelfExtend(), spec, 16, torch.tensor([4, 1]), 8)
    assert tables.window.tolist() == [2.0, 0.0]  # w = Lo / s = 2 for s = 4; off for s = 1
    override = rotary_tables(SelfExtend(g=3, w=5), spec, 16, torch.tensor([4, 1]), 8)
    assert override.window.tolist() == [5.0, 0.0]


# ----------------------------------------------------------------------------- a new method is one class
@dataclass(frozen=True)
class ClampedPositions(ExtensionMethod):
    """A toy method: positions past the table reuse its last row, p -> min(p, Lo - 1); on RoPE the
    rotation stops at Lo - 1 as well.  It exists only in this test."""

    name = "clamp"
    summary = "toy: p -> min(p, Lo - 1)"
    schemes = frozenset({APE, ROPE})
    config_keys = {"window": "last"}  # reads an existing field, as a contributor's method may
    export_refusal = "a toy"

    last: int | None = None

    def position_ids(self, p: torch.Tensor, s: torch.Tensor, original_length: int) -> torch.Tensor:
        return p.clamp(max=(self.last or original_length) - 1)

    def rotary_positions(self, p: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return p.clamp(max=(self.last or LO) - 1)


@pytest.fixture
def clamp_method() -> Iterator[type[ExtensionMethod]]:
    register(ClampedPositions)
    try:
        yield ClampedPositions
    finally:
        del METHODS["clamp"]


def _plain_model_embedding(folder, text: str, position_ids: torch.Tensor) -> np.ndarray:
    """The unmodified transformers model, given position ids; mean pooled."""
    model = AutoModel.from_pretrained(folder).eval()
    ids = torch.tensor([AutoTokenizer.from_pretrained(folder)(text)["input_ids"]])
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=position_ids).last_hidden_state
    return hidden[0].mean(dim=0).numpy()


def test_a_new_method_is_one_class(clamp_method, tiny_models):
    """Registered here and nowhere else: the config takes it, the APE scheme asks it for positions, and
    the encoder's vector equals the plain model fed the same positions."""
    config = EncoderConfig(model=str(tiny_models["bert"]), method="clamp", max_length=4 * LO, window=20)
    assert build_method(config) == ClampedPositions(last=20)
    encoder = load_encoder(tiny_models["bert"], method="clamp", max_length=4 * LO, window=20)
    assert encoder.pooling == "mean"
    text = words(60, seed=3)
    n = len(encoder.tokenizer(text)["input_ids"])
    assert n > LO
    got = encoder.encode(text, normalize_embeddings=False)
    expected = _plain_model_embedding(tiny_models["bert"], text, torch.arange(n).clamp(max=19).unsqueeze(0))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert "clamp" not in exportable_methods()


def test_a_new_rope_method_changes_the_rotary_tables(clamp_method, tiny_models):
    model_config = AutoConfig.from_pretrained(tiny_models["llama"])
    scheme = position_scheme_for(model_config, ClampedPositions(last=4))
    batch = scheme.batch(torch.tensor([10]), 10, torch.tensor([1]))
    plain = position_scheme_for(model_config, "truncate").batch(torch.tensor([10]), 10, torch.tensor([1]))
    torch.testing.assert_close(batch.rotary.cos[0, :4], plain.rotary.cos[0, :4], rtol=0, atol=0)
    for p in range(4, 10):  # every position from 3 on rotates as position 3
        torch.testing.assert_close(batch.rotary.cos[0, p], plain.rotary.cos[0, 3], rtol=0, atol=0)


def test_a_method_refuses_the_schemes_it_does_not_declare():
    with pytest.raises(ValueError, match="does not apply to ALIBI models"):
        check_method("pi", ALIBI)


def test_rotary_tables_by_name_takes_config_keys():
    spec = RotarySpec(params={"rope_theta": 10000.0}, rotary_dim=8, head_dim=8, max_position_embeddings=8)
    by_name = rotary_tables("selfextend", spec, 16, torch.tensor([4]), 8, group_size=3, window=5)
    by_object = rotary_tables(SelfExtend(g=3, w=5), spec, 16, torch.tensor([4]), 8)
    torch.testing.assert_close(by_name.q_left, by_object.q_left, rtol=0, atol=0)
    with pytest.raises(TypeError, match="unknown method option"):
        rotary_tables("ntk", spec, 16, torch.tensor([4]), 8, ntk_base=3)
