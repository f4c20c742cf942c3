"""The catalogue of context-window extension methods and the position schemes they fit.

A method is a name plus the position schemes it applies to; the arithmetic lives in ``ape.py``,
``rope.py``, ``pcw.py`` and ``attention.py``.  Position schemes are read from the model config
(``detect_position_scheme``) and can be overridden by the user.
"""

from __future__ import annotations

from dataclasses import dataclass

APE, ROPE, ALIBI = "ape", "rope", "alibi"
POSITION_SCHEMES = (APE, ROPE, ALIBI)

# The choices of the methods' switches, here (no torch) so that the config and the command line can
# list them without importing the arithmetic.
#: s = ceil(Lt / Lo) for every document ("fixed") or ceil(n / Lo) per document ("per_document").
SCALE_MODES = ("fixed", "per_document")
#: Which inputs a method changes: only those longer than Lo ("long"), or every input ("all").
APPLY_MODES = ("long", "all")
#: NTK: one base for the target length ("static"), or a base that grows with n ("dynamic").
NTK_VARIANTS = ("static", "dynamic")


@dataclass(frozen=True)
class MethodInfo:
    name: str
    schemes: frozenset[str]
    summary: str


METHODS: dict[str, MethodInfo] = {
    m.name: m
    for m in (
        MethodInfo(
            "truncate", frozenset(POSITION_SCHEMES), "keep the first max_length tokens (the baseline)"
        ),
        MethodInfo(
            "pcw", frozenset(POSITION_SCHEMES), "parallel context windows: average of Lo-token windows"
        ),
        MethodInfo("gp", frozenset({APE, ROPE}), "grouped positions: p -> floor(p / s)"),
        MethodInfo("rp", frozenset({APE}), "recurrent positions: p -> p mod Lo"),
        MethodInfo("pi", frozenset({APE, ROPE}), "linear position interpolation: p -> p / s"),
        MethodInfo("ntk", frozenset({ROPE}), "NTK-aware interpolation: RoPE base x lambda"),
        MethodInfo("yarn", frozenset({ROPE}), "YaRN: per-frequency RoPE interpolation + attention factor"),
        MethodInfo(
            "selfextend", frozenset({ROPE}), "SelfExtend: exact positions in window w, grouped (g) beyond"
        ),
        MethodInfo("native", frozenset({ALIBI}), "ALiBi extrapolates natively: feed the whole input"),
    )
}

# Architectures whose positions are rotary (checked before falling back to config attributes).
ROPE_MODEL_TYPES = frozenset(
    {"nomic_bert", "modernbert", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "eurobert"}
)
APE_MODEL_TYPES = frozenset(
    {"bert", "roberta", "xlm-roberta", "camembert", "distilbert", "electra", "mpnet", "ernie"}
)
# Models whose position table starts at padding_idx + 1 (fairseq convention).
OFFSET_POSITION_MODEL_TYPES = frozenset({"roberta", "xlm-roberta", "camembert"})


def detect_position_scheme(config) -> str:
    """ "ape", "rope" or "alibi" from a transformers config; ValueError when it cannot tell."""
    model_type = getattr(config, "model_type", "")
    if model_type == "jina_bert" or getattr(config, "position_embedding_type", None) == "alibi":
        return ALIBI
    if (
        model_type in ROPE_MODEL_TYPES
        or getattr(config, "rope_parameters", None)
        or hasattr(config, "rope_theta")
    ):
        return ROPE
    if model_type in APE_MODEL_TYPES and getattr(config, "position_embedding_type", "absolute") == "absolute":
        return APE
    raise ValueError(
        f"cannot tell the position scheme of model_type {model_type!r}; pass position_scheme= one of {POSITION_SCHEMES}"
    )


def check_method(method: str, scheme: str) -> MethodInfo:
    """The method's info, or a ValueError that names the methods this model does support."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from: {', '.join(METHODS)}")
    info = METHODS[method]
    if scheme not in info.schemes:
        fitting = [m.name for m in METHODS.values() if scheme in m.schemes]
        raise ValueError(
            f"method {method!r} does not apply to {scheme.upper()} models ({info.summary}); "
            f"for this model use one of: {', '.join(fitting)}"
        )
    return info
