"""The context scale factor s, log-n attention scaling and TempScale's length-aware temperature.

Notation (LongEmbed, section 4.2): Lo is the original context, Lt the target context and
s = ceil(Lt / Lo) the scale factor.  longembed computes s per document, either fixed by the
target length (``scale="fixed"``: s = ceil(Lt / Lo), the paper's tables) or from the document's
own length (``scale="per_document"``: s = ceil(n / Lo)).  Neither depends on batch neighbours.
The per-scale defaults of Table 6 belong to their methods (``methods.ntk.ntk_lambda``,
``methods.selfextend.selfextend_defaults``); they stay importable from here, where users found them.
"""

from __future__ import annotations

import math

import torch

from longembed.errors import UserError
from longembed.extension.methods import APPLY_MODES, SCALE_MODES
from longembed.extension.methods.ntk import NTK_LAMBDA_TABLE, ntk_lambda
from longembed.extension.methods.selfextend import selfextend_defaults

__all__ = [
    "NTK_LAMBDA_TABLE", "ceil_div", "document_scales", "fixed_scale", "length_temperature", "logn_factor",
    "ntk_lambda", "selfextend_defaults",
]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def fixed_scale(target_length: int, original_length: int) -> int:
    """s = ceil(Lt / Lo), at least 1."""
    return max(1, ceil_div(target_length, original_length))


def document_scales(
    lengths: torch.Tensor,
    original_length: int,
    target_length: int,
    scale: str = "fixed",
    apply_to: str = "long",
) -> torch.Tensor:
    """The scale factor of every document in a batch, shape (B,), int64.

    ``lengths`` are the documents' true token counts (padding excluded).  A document that the
    method does not act on gets s = 1, for which every method is the identity.  With
    ``apply_to="long"`` (the default) only documents longer than Lo are extended, so short inputs
    embed exactly as with the original model; ``apply_to="all"`` reproduces the paper's static
    runs, where a fixed s is applied to every input.
    """
    if scale == "fixed":
        s = torch.full_like(lengths, fixed_scale(target_length, original_length))
    elif scale == "per_document":
        s = (lengths + original_length - 1) // original_length
    else:
        raise UserError(f"scale must be one of {SCALE_MODES}, got {scale!r}")
    if apply_to == "long":
        s = torch.where(lengths > original_length, s, torch.ones_like(s))
    elif apply_to != "all":
        raise UserError(f"apply_to must be one of {APPLY_MODES}, got {apply_to!r}")
    return s.clamp(min=1)


def logn_factor(lengths: torch.Tensor, original_length: int) -> torch.Tensor:
    """Attention-logit multiplier max(1, log n / log Lo) per document (LongEmbed Appendix B)."""
    n = lengths.to(torch.float64).clamp(min=1)
    factor = torch.log(n) / math.log(original_length)
    return factor.clamp(min=1.0).to(torch.float32)


def length_temperature(
    lengths: torch.Tensor, temperature: float, decay: float = 0.0, reference: int = 512
) -> torch.Tensor:
    """TempScale tau per document, optionally lower for longer inputs (length-aware TempScale).

    tau(n) = temperature * (log(reference) / log(n)) ** decay for n > reference, else temperature.
    decay = 0 is the paper's single tau.  With decay = 1 and reference = Lo, 1 / tau(n) is exactly
    the log-n attention scaling max(1, log n / log Lo) times 1 / temperature: log-n scaling is the
    special case of a temperature that falls with length, which is what the length-collapse paper
    suggests (its Appendix C.7) but did not build.
    """
    tau = torch.full(lengths.shape, float(temperature))
    if decay:
        n = lengths.to(torch.float64).clamp(min=2)
        ratio = (math.log(reference) / torch.log(n)).clamp(max=1.0)
        tau = tau * ratio.pow(decay).to(torch.float32)
    return tau
