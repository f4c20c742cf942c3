"""The teacher's targets, computed once per training text and kept on disk (numpy).

One file per planned batch, ``batch-<b>.npz``: ``pooled`` (B, hidden) float32, the teacher's mean-pooled
vectors; ``tokens`` (B, L_b, hidden) float16, its last-layer token states, when the loss uses them
(``token_weight > 0``); ``ids_sha256``, the digest of the batch's token ids, checked before a file is
used.  Files are written atomically, so a run killed while computing targets keeps every finished
batch.  The folder is named by a digest of the teacher's files and of the whole batch plan, so a
longer run (more steps, the same plan) reuses every file, and a changed teacher or text never does.

Why token states are cached too: all-MiniLM-L6-v2's states for a text of 288 tokens (the mean of
64..512) take 221 KB in float16, so the 20,700 texts the benchmark-safe text gives take about 4.6 GB,
the size of a two-hour CPU run.  Recomputing them instead would cost the teacher's forward on every
step (a third of the student's forward and backward) in every epoch and after every resume.  Before
computing, the size is estimated against the free disk space (an error if it does not fit: pass
``token_weight=0``, fewer steps, or a cache folder on a larger disk).  Pooled vectors alone are 1.5
KB a text.  Targets are float32 computations of the teacher in any case, whatever the student's
precision.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import BertModel

from longembed.errors import UserFileError
from longembed.evaluation.cache.storage import canonical_json
from longembed.evaluation.provenance import hash_file
from longembed.results.files import atomic_write_bytes, write_json

TARGETS_FORMAT = 1
MANIFEST = "manifest.json"
#: Files of a model folder that decide the teacher's outputs (besides the token ids, in the plan).
_MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
_DISK_MARGIN = 1 << 30  # leave 1 GiB free


def teacher_identity(transformer_path: Path) -> dict[str, Any]:
    """Size and sha256 (whole, or first and last MiB of large files) of the teacher's config and weights."""
    files = {}
    for name in _MODEL_FILES:
        path = Path(transformer_path) / name
        if path.is_file():
            described = hash_file(path)
            files[name] = {"size": described["size"], "sha256": described["sha256"]}
    return files


def ids_digest(batch: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(batch, dtype=np.int64).tobytes()).hexdigest()


def targets_key(teacher: dict[str, Any], plan_digest: str) -> str:
    """The cache folder's name: sha256 of the teacher's identity and the plan (first 24 hex digits)."""
    value = {"format": TARGETS_FORMAT, "teacher": teacher, "plan_sha256": plan_digest}
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:24]


def token_states_bytes(batches: list[np.ndarray], hidden_size: int) -> int:
    """Disk bytes of the float16 token states of ``batches``."""
    return sum(int(b.size) for b in batches) * hidden_size * 2


@dataclass(frozen=True)
class TeacherTargets:
    """The cached targets of one plan: read one batch at a time by the training loop."""

    folder: Path
    token_states: bool

    def path(self, batch: int) -> Path:
        return self.folder / f"batch-{batch:06d}.npz"

    def read(self, batch: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(pooled (B, hidden) float32, token states (B, L, hidden) float32 or None) of batch ``batch``."""
        with np.load(self.path(batch)) as data:
            pooled = data["pooled"]
            tokens = data["tokens"].astype(np.float32) if self.token_states else None
        return pooled, tokens

    def has(self, batch: int, ids: np.ndarray) -> bool:
        """Whether batch ``batch``'s file exists, is for these token ids and holds what the loss needs."""
        path = self.path(batch)
        if not path.is_file():
            return False
        try:
            with np.load(path) as data:
                return str(data["ids_sha256"]) == ids_digest(ids) and (not self.token_states or "tokens" in data.files)
        except (OSError, ValueError, KeyError):  # a damaged file is recomputed
            return False


def teacher_targets(
    teacher: BertModel,
    batches: list[np.ndarray],
    folder: Path,
    token_states: bool,
    device: torch.device,
    manifest: dict[str, Any],
    show_progress: bool = True,
) -> tuple[TeacherTargets, int]:
    """The targets of ``batches`` in ``folder``, computing the missing ones; and how many were computed.

    ``manifest`` (teacher, plan, counts) is written beside them for whoever finds the folder.
    """
    targets = TeacherTargets(folder, token_states)
    missing = [b for b, ids in enumerate(batches) if not targets.has(b, ids)]
    if not missing:
        return targets, 0
    folder.mkdir(parents=True, exist_ok=True)
    if token_states:
        _check_disk(folder, token_states_bytes([batches[b] for b in missing], teacher.config.hidden_size))
    write_json(folder / MANIFEST, {**manifest, "format": TARGETS_FORMAT, "token_states": token_states})
    teacher.to(device)
    for b in tqdm(missing, desc="teacher targets", unit="batch", disable=not show_progress):
        pooled, tokens = _teacher_forward(teacher, batches[b], device)
        arrays = {"ids_sha256": np.asarray(ids_digest(batches[b])), "pooled": pooled}
        if token_states:
            arrays["tokens"] = tokens.astype(np.float16)
        atomic_write_bytes(targets.path(b), lambda handle, arrays=arrays: np.savez(handle, **arrays))
    return targets, len(missing)


@torch.no_grad()
def _teacher_forward(teacher: BertModel, ids: np.ndarray, device: torch.device) -> tuple[np.ndarray, np.ndarray]:
    """(mean-pooled vectors, token states) of one unpadded batch, float32: mean pooling averages every
    token, [CLS] and [SEP] included, as sentence-transformers' mean pooling does with no padding."""
    states = teacher(input_ids=torch.from_numpy(ids).to(device)).last_hidden_state.float()
    return states.mean(dim=1).cpu().numpy(), states.cpu().numpy()


def _check_disk(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if needed > free - _DISK_MARGIN:
        raise UserFileError(
            f"the teacher's token states need {needed / 2**30:.1f} GiB in {folder} but {free / 2**30:.1f} GiB are "
            "free; use token_weight=0 (--token-weight 0: pooled vectors only), fewer steps, or a cache folder "
            "on a larger disk (--cache-dir)"
        )
