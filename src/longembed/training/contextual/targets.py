"""The original model's vectors of the distillation texts, computed once and cached on disk.

One float32 array (texts x dim) in ``targets.npy`` with ``manifest.json`` (the model's files, the texts'
digest), in a folder named by both, so a resumed or repeated run finds them and a changed model or text
never does.  The size is checked against the free disk space before anything is written (an error that
says what to do when it does not fit); the file is written atomically.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from longembed.diskspace import check_free_space
from longembed.encoder import LongContextEncoder
from longembed.evaluation.cache.storage import canonical_json
from longembed.pooling import pool
from longembed.results.files import atomic_write_bytes, read_json, write_json
from longembed.training.contextual.batches import PlannedInputs

TARGETS_FILE, MANIFEST = "targets.npy", "manifest.json"
_DISK_MARGIN = 1 << 30  # leave 1 GiB free


def targets_folder(root: Path, model_files: dict[str, Any], inputs: PlannedInputs) -> Path:
    key = hashlib.sha256(canonical_json({"model": model_files, "texts": inputs.digest()}).encode()).hexdigest()[:24]
    return Path(root) / key


def targets_bytes(inputs: PlannedInputs, dim: int) -> int:
    return len(inputs.ids) * dim * 4


def check_disk(folder: Path, needed: int, margin: int = _DISK_MARGIN) -> None:
    """An OSError when ``needed`` bytes (plus ``margin``) are not free where ``folder`` is written."""
    check_free_space(folder, needed, margin, "the distillation targets",
                     "use --distill-weight 0, fewer --max-steps, or --cache-dir on a larger disk")


def teacher_targets(
    teacher: LongContextEncoder, inputs: PlannedInputs, folder: Path, manifest: dict[str, Any],
    show_progress: bool = True, batch_size: int = 32,
) -> tuple[np.ndarray, bool]:
    """(targets (texts x dim) float32, whether they were computed now): read from ``folder`` when there."""
    path = folder / TARGETS_FILE
    if path.is_file() and (folder / MANIFEST).is_file():
        cached = np.load(path)
        if cached.shape == (len(inputs.ids), teacher.embedding_dim) and read_json(folder / MANIFEST).get(
            "texts_sha256") == inputs.digest():
            return cached, False
    check_disk(folder, targets_bytes(inputs, teacher.embedding_dim))
    folder.mkdir(parents=True, exist_ok=True)
    vectors = np.zeros((len(inputs.ids), teacher.embedding_dim), dtype=np.float32)
    starts = range(0, len(inputs.ids), batch_size)
    for start in tqdm(starts, desc="distillation targets", unit="batch", disable=not show_progress):
        chunk = inputs.ids[start : start + batch_size]
        with torch.no_grad():
            states, mask = teacher.runner.forward_states(chunk)
            vectors[start : start + len(chunk)] = pool(states, mask, teacher.pooling).numpy()
    write_json(folder / MANIFEST, {**manifest, "texts": len(inputs.ids), "texts_sha256": inputs.digest()})
    atomic_write_bytes(path, lambda handle: np.save(handle, vectors))
    return vectors, True
