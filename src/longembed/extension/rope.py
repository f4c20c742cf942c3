"""RoPE's per-document rotary tables, in which the extension methods act.

RoPE rotates query and key pairs by m * theta_j, theta_j = base^(-2j/d), so an attention score
depends on the relative position (m - n) * theta (LongEmbed eq. 1).  A method (``extension.methods``)
changes the positions (GP: floor(p / s), PI: p / s), the frequencies of a document (NTK: base x
lambda, or a base growing with n; YaRN: transformers' own ``ROPE_INIT_FUNCTIONS["yarn"]``), or adds
tables (SelfExtend's grouped positions); ``rotary_tables`` asks it for each and builds the cos/sin.

All methods act per document (each row of a batch has its own positions and frequencies), so a
document's embedding never depends on its batch neighbours.  The rotation itself is applied by
longembed's attention function (``attention.py``): the model is called with position_ids = 0,
which makes its own rotary embedding the exact identity (cos 0 = 1, sin 0 = 0), and the
attention function rotates q and k with the per-document cos/sin computed here.  That is what lets
SelfExtend use two position sets and NTK use a different base per document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import PretrainedConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from longembed.errors import UserError, UserTypeError
from longembed.extension.methods import METHODS, ROPE, ExtensionMethod, Truncate, check_method
from longembed.extension.methods.ntk import (
    dynamic_ntk_multiplier as dynamic_ntk_multiplier,  # where users found it
)


@dataclass(frozen=True)
class RotarySpec:
    """What the attention function needs to know to rotate q and k like the model does.

    ``rotary_dim`` is the number of leading head dimensions that are rotated (partial RoPE);
    rotation is rotate-half (GPT-NeoX / Llama / nomic-bert / ModernBERT layout).  ``params`` are
    the model's rotary parameters (for models with several layer types, e.g. ModernBERT's local
    and global layers, those of one layer type).
    """

    params: dict
    rotary_dim: int
    head_dim: int
    max_position_embeddings: int

    @property
    def base(self) -> float:
        return float(self.params["rope_theta"])

    @property
    def rope_type(self) -> str:
        return self.params.get("rope_type", "default")

    @classmethod
    def from_config(cls, config, layer_type: str | None = None) -> RotarySpec:
        params = dict(getattr(config, "rope_parameters", None) or {})
        if layer_type is not None:
            params = dict(params[layer_type])
        if "rope_theta" not in params:
            if getattr(config, "rope_theta", None) is None:
                raise UserError(f"{type(config).__name__} has no rope_theta: is this a RoPE model?")
            params["rope_theta"] = config.rope_theta
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        partial = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0)
        return cls(
            params=params,
            rotary_dim=int(head_dim * partial),
            head_dim=head_dim,
            max_position_embeddings=int(config.max_position_embeddings),
        )

    def _rope_config(self, params: dict) -> PretrainedConfig:
        """A minimal config for transformers' rope init functions."""
        config = PretrainedConfig(
            hidden_size=self.head_dim,
            num_attention_heads=1,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_position_embeddings,
        )
        config.rope_parameters = {**params, "partial_rotary_factor": self.rotary_dim / self.head_dim}
        return config

    def inv_freq(self, base_multiplier: float = 1.0) -> tuple[torch.Tensor, float]:
        """The model's inverse frequencies theta_j (and its cos/sin factor), base x multiplier."""
        base = self.base * base_multiplier
        if self.rope_type == "default":
            dim = self.rotary_dim
            exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim
            return 1.0 / (base**exponent), 1.0
        return ROPE_INIT_FUNCTIONS[self.rope_type](
            self._rope_config({**self.params, "rope_theta": base}), None
        )

    def yarn_inv_freq(self, s: int, original_length: int, **yarn_options) -> tuple[torch.Tensor, float]:
        """YaRN frequencies and attention factor for scale s, via transformers' implementation."""
        params = {
            "rope_type": "yarn",
            "rope_theta": self.base,
            "factor": float(s),
            "original_max_position_embeddings": original_length,
            **yarn_options,
        }
        return ROPE_INIT_FUNCTIONS["yarn"](self._rope_config(params), None)


@dataclass
class RotaryTables:
    """Per-document cos/sin tables, (B, n, rotary_dim) each, for one batch.

    For SelfExtend also the grouped tables: queries use floor(i/g) +- shift (left keys / right
    keys), keys use floor(j/g); ``window`` (B,) is w per document (0 where SelfExtend is off).
    """

    cos: torch.Tensor
    sin: torch.Tensor
    window: torch.Tensor | None = None
    q_left: tuple[torch.Tensor, torch.Tensor] | None = None
    q_right: tuple[torch.Tensor, torch.Tensor] | None = None
    k_grouped: tuple[torch.Tensor, torch.Tensor] | None = None

    def to(self, device: torch.device) -> RotaryTables:
        def move(x):
            if x is None:
                return None
            return tuple(t.to(device) for t in x) if isinstance(x, tuple) else x.to(device)

        return RotaryTables(**{k: move(v) for k, v in vars(self).items()})


def _cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, factor: torch.Tensor):
    """cos/sin (B, n, d) of positions (B, n) x inv_freq (B, d/2), times factor (B,)."""
    freqs = positions.to(torch.float32).unsqueeze(-1) * inv_freq.unsqueeze(1)
    emb = torch.cat((freqs, freqs), dim=-1)
    f = factor.view(-1, 1, 1)
    return emb.cos() * f, emb.sin() * f


def rotary_tables(
    method: ExtensionMethod | str,
    spec: RotarySpec,
    seq_len: int,
    scales: torch.Tensor,
    original_length: int,
    *,
    lengths: torch.Tensor | None = None,
    **options: Any,
) -> RotaryTables:
    """cos/sin tables for every document of a batch under ``method``.

    ``method`` is a method object, or a name ("none" for plain RoPE) with its ``EncoderConfig`` keys as
    ``options`` (e.g. ``group_size=3``).  ``lengths`` (B,) are the documents' token counts; dynamic NTK
    needs them (its base depends on n).
    """
    if isinstance(method, str):
        method = rope_method(method, **options)
    batch = len(scales)
    p = torch.arange(seq_len, dtype=torch.float32).unsqueeze(0).expand(batch, -1)
    s = scales.to(torch.float32).unsqueeze(1)
    base_inv, base_factor = spec.inv_freq()
    inv = base_inv.unsqueeze(0).expand(batch, -1).clone()
    factor = torch.full((batch,), float(base_factor))
    counts = lengths.tolist() if lengths is not None else [None] * batch
    for b, (sb, n) in enumerate(zip(scales.tolist(), counts, strict=True)):
        own = method.frequencies(spec, sb, n, original_length)
        if own is not None:
            inv[b], factor[b] = (torch.as_tensor(x) for x in own)
    cos, sin = _cos_sin(method.rotary_positions(p, s), inv, factor)
    tables = RotaryTables(cos=cos, sin=sin)
    method.add_rotary_tables(tables, p, scales, original_length, lambda q: _cos_sin(q, inv, factor))
    return tables


def rope_method(name: str, **options: Any) -> ExtensionMethod:
    """A RoPE method by name ("none": plain RoPE) with its ``EncoderConfig`` keys; other methods' keys
    are ignored, unknown keys refused."""
    known = {key for m in METHODS.values() for key in m.config_keys}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserTypeError(f"unknown method option(s) {unknown}; method options: {sorted(known)}")
    if name == "none":
        return Truncate()
    cls = check_method(name, ROPE)
    return cls(**{field: options[key] for key, field in cls.config_keys.items() if key in options})


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (B, H, n, head_dim) with cos/sin (B, n, rotary_dim); extra dims pass through.

    RoPE in the rotate-half layout, x * cos + (-x2, x1) * sin for x = (x1, x2), written half by
    half into one output: (x1 cos_1 - x2 sin_1, x2 cos_2 + x1 sin_2).  Four multiply-adds over half the dims read and
    write about half the memory of the five full-size operations of the formula as written, which
    matters because this runs on q and k in every layer (on top of the model's own rotation).
    """
    d = cos.shape[-1]
    half = d // 2
    cos, sin = cos.unsqueeze(1).to(x.dtype), sin.unsqueeze(1).to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:d]
    out = torch.empty_like(x)
    first, second = out[..., :half], out[..., half:d]
    torch.mul(x1, cos[..., :half], out=first).addcmul_(x2, sin[..., :half], value=-1)
    torch.mul(x2, cos[..., half:], out=second).addcmul_(x1, sin[..., half:])
    if d < x.shape[-1]:
        out[..., d:] = x[..., d:]
    return out


def selfextend_relative_positions(n: int, group_size: int, window: int) -> torch.Tensor:
    """The (n, n) matrix of SelfExtend relative positions i - j, bidirectional (for tests/docs).

    |i - j| < w: i - j.  Otherwise sign(i - j) * (floor(max(i,j)/g) - floor(min(i,j)/g) + w - floor(w/g)).
    """
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    exact = i - j
    shift = window - window // group_size
    grouped = torch.div(torch.maximum(i, j), group_size, rounding_mode="floor") - torch.div(
        torch.minimum(i, j), group_size, rounding_mode="floor"
    )
    return torch.where(exact.abs() < window, exact, torch.sign(exact) * (grouped + shift))
