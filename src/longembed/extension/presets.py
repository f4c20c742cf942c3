"""Presets: a name for a paper's exact settings, so a user need not reconstruct them flag by flag.

longembed's defaults favour what a user of the extended model wants (inputs of at most Lo tokens
embed exactly as with the original model; a document's vector does not depend on its batch).  The
LongEmbed paper and its authors' code (dwzhu-pku/LongEmbed, ``src/encoder_model.py`` and
``src/model_utils.py``) made other choices, which ``preset="longembed-paper"`` reproduces:

======================  ===============================  ===============================================
setting                 longembed default                ``longembed-paper``
======================  ===============================  ===============================================
attention_scale         None                             "logn": logits x max(1, log n / log Lo), "by
                                                         default for all tested models" (Appendix B; the
                                                         code's xformers attention does it per sequence)
gp: scale               "fixed" (s = ceil(Lt / Lo))      "per_document" (the code: s = ceil(n / Lo),
                                                         where n is the padded batch length; per
                                                         document here, so batch-independent)
ntk: apply_to           "long" (only inputs > Lo)        "all" (the code sets rope_theta once for the
                                                         model: queries get the larger base too)
======================  ===============================  ===============================================

PI (fixed s, short inputs on the original positions), RP, SelfExtend (Table 6's g and w; plain
attention below Lo) and PCW are the same in both.  Options given explicitly win over a preset.
The authors' nomic-embed-text runs used nomic's dynamic NTK (``rotary_scaling_factor`` 16 at 8192
tokens): ``method="ntk", ntk_variant="dynamic", ntk_factor=16``.
"""

from __future__ import annotations

from typing import Any

from longembed.errors import UserError

#: Preset name -> options for every method, then per-method options (applied over the first).
PRESETS: dict[str, dict[str, Any]] = {
    "longembed-paper": {
        "all": {"attention_scale": "logn"},
        "gp": {"scale": "per_document"},
        "ntk": {"apply_to": "all"},
    },
}


def preset_options(name: str, method: str) -> dict[str, Any]:
    """The options preset ``name`` sets for ``method``; ValueError naming the presets if unknown."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    preset = PRESETS[name]
    return {**preset.get("all", {}), **preset.get(method, {})}
