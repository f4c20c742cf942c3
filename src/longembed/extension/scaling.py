"""The context scale factor s and the LongEmbed paper's per-scale defaults (Table 6).

Notation (LongEmbed, section 4.2): Lo is the original context, Lt the target context and
s = ceil(Lt / Lo) the scale factor.  longembed computes s per document, either fixed by the
target length (``scale="fixed"``: s = ceil(Lt / Lo), the paper's tables) or from the document's
own length (``scale="per_document"``: s = ceil(n / Lo)).  Neither depends on batch neighbours.
"""

from __future__ import annotations

import math

import torch

from longembed.extension.methods import APPLY_MODES, SCALE_MODES

# Table 6: NTK base multiplier lambda by scale factor s (base 10000 -> 10000 * lambda).
NTK_LAMBDA_TABLE: dict[int, float] = {1: 1.0, 2: 3.0, 4: 5.0, 8: 10.0}


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
        raise ValueError(f"scale must be one of {SCALE_MODES}, got {scale!r}")
    if apply_to == "long":
        s = torch.where(lengths > original_length, s, torch.ones_like(s))
    elif apply_to != "all":
        raise ValueError(f"apply_to must be one of {APPLY_MODES}, got {apply_to!r}")
    return s.clamp(min=1)


def ntk_lambda(s: int) -> float:
    """NTK base multiplier for scale s: Table 6 at s = 1, 2, 4, 8.

    Between table points lambda is interpolated linearly in log-log space; beyond s = 8 it grows
    proportionally to s (lambda = 10 * s / 8), the slope of the table's last segment in log-log.
    """
    if s <= 1:
        return 1.0
    if s in NTK_LAMBDA_TABLE:
        return NTK_LAMBDA_TABLE[s]
    points = sorted(NTK_LAMBDA_TABLE.items())
    if s > points[-1][0]:
        s_last, lam_last = points[-1]
        return lam_last * s / s_last
    for (s0, l0), (s1, l1) in zip(points, points[1:], strict=False):
        if s0 < s < s1:
            t = (math.log(s) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return math.exp(math.log(l0) + t * (math.log(l1) - math.log(l0)))
    raise AssertionError("unreachable")


def selfextend_defaults(s: int, original_length: int) -> tuple[int, int]:
    """SelfExtend group size g and neighbour window w for scale s (Table 6).

    Table 6 uses g = s + 1 and w = Lo / s for s in {2, 4, 8} and both Lo = 512 and Lo = 4096
    (512 -> 2k: g 5, w 128; 4k -> 32k: g 9, w 512); longembed applies the same rule to any s.
    """
    s = max(1, int(s))
    return s + 1, max(1, original_length // s)


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
