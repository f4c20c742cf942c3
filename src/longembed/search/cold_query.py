"""A saved query program read back with torch and tokenizers only (no transformers): what a cold dense
search embeds its queries with when the index's version holds one (:mod:`longembed.search.query_program`
writes it).  Inputs longer than the program's Lo, or a manifest that is not the index's, go the slow way.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from longembed.file_hashes import folder_files, same_files

PROGRAM_FORMAT = "longembed-query-program/1"
PROGRAM_DIR = "query_program"
PROGRAM = "program.pt"
TOKENIZER = "tokenizer.json"
MANIFEST = "manifest.json"
#: inputs per forward pass
BATCH = 16


def program_key(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a program must share with the index it serves: its strategy, prompts, model files and dtype."""
    model = metadata.get("model") or {}
    return {"config": metadata.get("config"), "prompts": metadata.get("prompts"), "dtype": metadata.get("dtype"),
            "model": {k: model.get(k) for k in ("name", "method", "max_length", "identity")}}


class QueryProgram:
    """The traced query module and its tokenizer; :meth:`encode` gives unit vectors or None (too long)."""

    def __init__(self, folder: Path, manifest: dict[str, Any]) -> None:
        self.program = torch.jit.load(str(folder / PROGRAM), map_location="cpu")
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.max_tokens = int(manifest["max_tokens"])
        self.pad_id = int(manifest["pad_id"])

    def reads(self, text: str, prompt: str) -> bool:
        """Whether :meth:`encode` embeds ``prompt + text`` (it has at most the tokens the program reads);
        the tokenizer alone, no forward."""
        return len(self._ids([text], prompt)[0]) <= self.max_tokens

    def _ids(self, texts: list[str], prompt: str) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch([prompt + t for t in texts], add_special_tokens=True)]

    def encode(self, texts: list[str], prompt: str) -> np.ndarray | None:
        """float32 (len(texts), dim) unit vectors of ``prompt + text``; None when a text has more tokens
        than the program reads (the caller then uses the full encoder)."""
        ids = self._ids(texts, prompt)
        if any(len(i) > self.max_tokens for i in ids):
            return None
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: np.ndarray | None = None
        with torch.no_grad():
            for start in range(0, len(order), BATCH):
                batch = order[start : start + BATCH]
                n = max(len(ids[i]) for i in batch)
                input_ids = torch.full((len(batch), n), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), n), dtype=torch.long)
                for row, i in enumerate(batch):
                    input_ids[row, : len(ids[i])] = torch.tensor(ids[i])
                    mask[row, : len(ids[i])] = 1
                vectors = self.program(input_ids, mask).numpy()
                if out is None:
                    out = np.empty((len(ids), vectors.shape[1]), dtype=np.float32)
                out[batch] = vectors
        return out if out is not None else None


def same_model_files(identity: dict[str, Any] | None) -> bool:
    """Whether the model folder an index recorded still holds the same files (False when unknown)."""
    if identity is None or not identity.get("path") or not Path(identity["path"]).is_dir():
        return False
    return same_files(identity, {"files": folder_files(Path(identity["path"]))})


def load_query_program(version_folder: Path, metadata: dict[str, Any]) -> QueryProgram | None:
    """The program saved in a version's folder when its manifest matches ``metadata``, else None."""
    folder = version_folder / PROGRAM_DIR
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    if manifest.get("format") != PROGRAM_FORMAT or {k: manifest.get(k) for k in program_key(metadata)} != program_key(metadata):
        return None
    if not same_model_files((metadata.get("model") or {}).get("identity")):
        return None  # the model's files changed since the build: the full encoder's check says so
    try:
        return QueryProgram(folder, manifest)
    except Exception as exc:  # noqa: BLE001 - any reader's error on a damaged file (tokenizers raises Exception)
        warnings.warn(f"{folder}: the saved query program cannot be read ({type(exc).__name__}); searching "
                      "through the model instead (run longembed index --rebuild to save it anew)", stacklevel=2)
        return None
