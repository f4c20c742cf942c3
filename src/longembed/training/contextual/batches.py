"""The planned steps as model inputs: token ids of every document, query and standalone text, tokenized once.

A document is tokenized as late chunking at inference tokenizes it (``LongContextEncoder.tokenize`` with
the document prompt), and each chunk pools the tokens that ``chunking.late.span_token_indices`` gives
its character span (the first chunk also the opening special and prompt tokens, the last the closing
ones), so training pools exactly what ``encode_chunks(..., late=True)`` pools.  Queries carry the query
prompt; the distillation texts (a step's queries and the chunks that answer them, each embedded alone)
carry their role's prompt, as naive chunks and queries are embedded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from longembed.chunking.late import span_token_indices
from longembed.chunking.tokens import token_offsets
from longembed.encoder import LongContextEncoder
from longembed.errors import UserError
from longembed.training.contextual.data import ContextDocument, StepItem
from longembed.training.contextual.loss import QueryTarget


@dataclass(frozen=True)
class DocumentInput:
    """A document's token ids (one model input) and, per chunk, the indices of the tokens it pools."""

    ids: list[int]
    chunk_tokens: list[np.ndarray]


@dataclass(frozen=True)
class StepInputs:
    """One step: its documents, its queries (ids, and where their answers are), its distillation texts (ids,
    and the row of each in the teacher's targets)."""

    documents: list[DocumentInput]
    queries: list[list[int]]
    targets: list[QueryTarget]
    distill: list[list[int]]
    distill_rows: list[int]


@dataclass
class PlannedInputs:
    """Every step's inputs, and the distillation texts in target order (``texts``: (role, text), ``ids``)."""

    steps: list[StepInputs]
    texts: list[tuple[str, str]]
    ids: list[list[int]]

    def digest(self) -> str:
        """A SHA-256 of the standalone texts' token ids, in order: what the teacher's targets are for."""
        return hashlib.sha256(json.dumps(self.ids).encode()).hexdigest()


def plan_inputs(
    encoder: LongContextEncoder, documents: Sequence[ContextDocument], plan: Sequence[Sequence[StepItem]],
    doc_tokens: int,
) -> PlannedInputs:
    """Tokenize what ``plan`` uses; a ValueError if a document's tokens pass ``doc_tokens``."""
    prompts = encoder.retrieval_prompts()
    used = sorted({item.document for step in plan for item in step})
    tokenized = dict(zip(used, encoder.runner.tokenize([documents[d].text for d in used], prompts["document"]), strict=True))
    document_inputs = {}
    for d, tokens in tokenized.items():
        if tokens.n_tokens > doc_tokens:
            raise UserError(f"training document {d} ({documents[d].group}) has {tokens.n_tokens} tokens, over "
                             f"the budget of {doc_tokens}: the packing undercounted")
        indices = span_token_indices(token_offsets(tokens), documents[d].spans())
        document_inputs[d] = DocumentInput(list(tokens.ids), indices)
    rows: dict[tuple[str, str], int] = {}
    texts: list[tuple[str, str]] = []

    def row(role: str, text: str) -> int:
        if (role, text) not in rows:
            rows[(role, text)] = len(texts)
            texts.append((role, text))
        return rows[(role, text)]

    steps_rows = []
    for step in plan:
        queries, targets, distill = [], [], []
        for k, item in enumerate(step):
            doc = documents[item.document]
            for q in item.queries:
                text, positives = doc.queries[q]
                queries.append(row("query", text))
                targets.append(QueryTarget(k, positives))
                distill += [rows[("query", text)]] + [row("document", doc.chunks[p]) for p in positives]
        steps_rows.append((step, queries, targets, list(dict.fromkeys(distill))))
    ids = _tokenize_texts(encoder, texts, prompts)
    steps = [
        StepInputs([document_inputs[item.document] for item in step], [ids[r] for r in queries], targets,
                   [ids[r] for r in distill], distill)
        for step, queries, targets, distill in steps_rows
    ]
    return PlannedInputs(steps, texts, ids)


def _tokenize_texts(
    encoder: LongContextEncoder, texts: Sequence[tuple[str, str]], prompts: dict[str, str]
) -> list[list[int]]:
    """Token ids of (role, text) pairs with their role's prompt; a ValueError for one over the window Lo."""
    out: list[list[int]] = [[] for _ in texts]
    for role in ("query", "document"):
        where = [i for i, (r, _) in enumerate(texts) if r == role]
        for i, tokens in zip(where, encoder.runner.tokenize([texts[i][1] for i in where], prompts[role]), strict=True):
            if tokens.n_tokens > encoder.original_length:
                raise UserError(f"a {role} of {tokens.n_tokens} tokens is longer than the model's window "
                                 f"({encoder.original_length}): {texts[i][1][:60]!r}...")
            out[i] = list(tokens.ids)
    return out
