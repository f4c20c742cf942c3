"""The query encoder of an index saved as a TorchScript program beside its version's files, so that a cold
search embeds its queries with torch and tokenizers alone, never importing transformers (issue 53, item 3).

:func:`save_query_program` traces (``torch.jit.trace``) the module that maps (input_ids, attention_mask) to
the unit query vector as the index's encoder computes it, for inputs of at most Lo tokens, where the
extension method leaves the model untouched; it saves the program only when its vectors equal the
encoder's on probe texts.  ``torch.export`` refuses the model: longembed's attention branches on data
(``bool(key_mask.all())``), which a trace on a padded batch bakes in as the masked branch, equal to the
unmasked one on unpadded inputs.  :mod:`longembed.search.cold_query` reads the program back.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from longembed.encoder import LongContextEncoder
from longembed.extension.attention import AttentionPlan
from longembed.extension.scaling import document_scales
from longembed.pooling import pool
from longembed.search.cold_query import (
    MANIFEST,
    PROGRAM,
    PROGRAM_DIR,
    PROGRAM_FORMAT,
    TOKENIZER,
    QueryProgram,
    program_key,
)

#: texts the saved program must embed as the encoder does before it is kept (prompts put before each)
PROBES = ("harvest apple", "who founded it", "a", "the quick brown fox jumps", "Kyoto 1997?")
#: the largest difference from the encoder's vectors a saved program may show
TOLERANCE = 1e-5


class QueryModule(torch.nn.Module):
    """(input_ids, attention_mask), right-padded, of inputs of at most Lo tokens -> unit vectors, float32."""

    def __init__(self, encoder: LongContextEncoder, position_offset: int | None) -> None:
        super().__init__()
        runner = encoder.runner
        self.model = runner.model
        self.pooling = runner.pooling
        self.token_types = runner._takes_token_types
        self.position_offset = position_offset  # None: the model's own positions, else ids 0..n-1 + offset

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.bool()
        inputs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.token_types:
            inputs["token_type_ids"] = torch.zeros_like(input_ids)
        if self.position_offset is not None:  # as the encoder passes them (padding at the offset, masked)
            steps = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0).expand_as(input_ids)
            inputs["position_ids"] = torch.where(mask, steps, torch.zeros_like(steps)) + self.position_offset
        hidden = self.model(**inputs, longembed_plan=AttentionPlan(key_mask=mask)).last_hidden_state.float()
        return torch.nn.functional.normalize(pool(hidden, mask, self.pooling), dim=-1)


def short_input_positions(encoder: LongContextEncoder) -> tuple[str | None, int | None]:
    """(why the encoder's inputs of at most Lo tokens do not run as the plain model does, or None; the
    offset of the position ids 0..n-1 it passes the model, None when it passes none)."""
    config = encoder.config
    if encoder.device.type != "cpu":
        return f"the encoder runs on {encoder.device.type}, the program is traced on cpu", None
    if config.apply_to != "long":
        return f"apply_to={config.apply_to!r} changes the positions of short inputs too", None
    if config.attention_scale is not None or config.temperature != 1:
        return "attention scaling or TempScale changes every input's attention", None
    runner = encoder.runner
    lengths = torch.tensor([2, encoder.original_length])
    scales = document_scales(lengths, encoder.original_length, encoder.max_length, config.scale, config.apply_to)
    positions = runner.positions.batch(lengths, encoder.original_length, scales)
    if positions.rotary is not None:
        return f"the method {encoder.method} rotates the queries and keys in longembed's attention", None
    ids = positions.model_inputs.get("position_ids")
    if set(positions.model_inputs) - {"position_ids"}:
        return f"the method {encoder.method} passes the model {sorted(positions.model_inputs)}", None
    if ids is None:
        return None, None
    offset = int(ids[0, 0])
    steps = torch.arange(encoder.original_length) + offset
    if ids.is_floating_point() or not (bool((ids[0, :2] == steps[:2]).all()) and bool((ids[1] == steps).all())):
        return f"the method {encoder.method} moves the positions of short inputs", None
    return None, offset


def _alone_difference(saved: QueryProgram, encoder: LongContextEncoder, probe: str, prompt: str) -> float:
    """The largest difference between the program's and the encoder's vector of ``probe`` (one the program
    reads: :meth:`QueryProgram.reads`) embedded alone, as a
    search embeds its query: in a batch the two pad differently, and in bfloat16 padding alone moves a vector
    by about 4e-4 (more than :data:`TOLERANCE`), where alone they agree to 1e-8."""
    got = saved.encode([probe], prompt)
    assert got is not None, "only the probes the program reads are compared"
    want = encoder.encode([probe], prompt=prompt, normalize_embeddings=True)
    return float(np.abs(got - want).max())


def save_query_program(encoder: LongContextEncoder, metadata: dict[str, Any], folder: Path) -> str | None:
    """Save the program, its tokenizer and manifest in ``folder/query_program``; a one-line reason when it
    is not saved (the index then searches through transformers, as before)."""
    reason, offset = short_input_positions(encoder)
    if reason is not None:
        return reason
    try:
        return _save(encoder, metadata, folder / PROGRAM_DIR, offset)
    except Exception as exc:  # an op the tracer cannot record: the index works without the program
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


def _save(encoder: LongContextEncoder, metadata: dict[str, Any], target: Path, offset: int | None) -> str | None:
    target.mkdir()
    pad = encoder.tokenizer.pad_token_id if encoder.tokenizer.pad_token_id is not None else 0
    example = torch.full((2, 4), pad, dtype=torch.long)
    example[0] = torch.tensor(encoder.runner.tokenize(["example text"])[0].ids[:4] + [pad] * 4)[:4]
    example[1, :2] = example[0, :2]
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])  # padded: the trace records the masked attention
    module = QueryModule(encoder, offset).eval()
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the branches on data, recorded as traced
        program = torch.jit.trace(module, (example, mask), check_trace=False)
    program.save(str(target / PROGRAM))
    encoder.tokenizer.backend_tokenizer.save(str(target / TOKENIZER))
    longest = min(encoder.original_length, encoder.max_length)  # past Lo the method acts; past Lt a cut
    manifest = {**program_key(metadata), "format": PROGRAM_FORMAT, "max_tokens": longest, "pad_id": pad}
    (target / MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
    saved = QueryProgram(target, manifest)
    for prompt in {metadata["prompts"]["query"] or "", metadata["prompts"]["document"] or ""}:
        probes = [p for p in PROBES if saved.reads(p, prompt)]  # those it reads
        differences = [_alone_difference(saved, encoder, probe, prompt) for probe in probes]
        if not probes or max(differences) > TOLERANCE:
            for file in target.iterdir():
                file.unlink()
            target.rmdir()
            return "the traced program's vectors differ from the encoder's"
    return None
