"""sigma_a of an encoder's attention on real texts, through the encoder's attention-observer hook.

The length-collapse paper's Figure 7 plots sigma_a = ||(I - 11^T/n) A||_2 of the last layer's
attention A against text length.  The encoder's runner (``ModelRunner.observe_attention``) shows
each sequence's attention rows on demand; :func:`~longembed.collapse.spectral.sigma_a_blockwise` turns them into
sigma_a per head without ever holding the n x n matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from longembed.collapse.spectral import sigma_a_blockwise
from longembed.encoder import LongContextEncoder
from longembed.encoder_protocol import resolve_prompt
from longembed.extension.pcw import mean_over_windows
from longembed.model_runner import AttentionView, RunOptions

__all__ = ["attention_sigma_a"]


def attention_sigma_a(
    encoder: LongContextEncoder,
    texts: str | Sequence[str],
    layer: int = -1,
    iters: int = 30,
    prompt: str | None = None,
    prompt_name: str | None = None,
    temperature: float | None = None,
    show_progress_bar: bool = False,
) -> np.ndarray:
    """sigma_a of one layer's attention (default the last), mean over heads, one value per text.

    For PCW the value of a text is the mean over its windows.  ``temperature`` overrides the
    encoder's TempScale tau for this call.  Returns float32 (len(texts),).
    """
    n_texts = 1 if isinstance(texts, str) else len(texts)
    values: dict[int, float] = {}
    owners: dict[int, int] = {}

    def observe(view: AttentionView) -> None:
        values[view.sequence] = float(sigma_a_blockwise(view.rows, view.length, iters=iters).mean())
        owners[view.sequence] = view.text

    runner = encoder.runner
    inputs = runner.tokenize(texts, resolve_prompt(encoder.prompts, prompt, prompt_name))
    runner.observe_attention(
        inputs, observe, layer=layer, options=RunOptions(temperature=temperature, show_progress_bar=show_progress_bar)
    )
    order = sorted(values)
    per_sequence = torch.tensor([values[i] for i in order], dtype=torch.float32)
    return mean_over_windows(per_sequence, [owners[i] for i in order], n_texts).numpy()
