"""Check a model folder's safetensors weight files before loading them: a cut-short or damaged file is a
one-line error that names it, not a library traceback that names neither the file nor the cause.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (each tensor's dtype,
shape and ``data_offsets`` [begin, end) in the data that follows), then the data.  A complete file is
exactly ``8 + N + largest end`` bytes long; a download or copy cut short is shorter.  Reading the
header is enough to tell, so the check costs a few kilobytes of reading, not the weights.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from longembed.errors import UserError

#: The weight files transformers reads from a folder, in its order of preference.
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
#: A header larger than this is not a header (safetensors itself refuses above 100 MB).
LARGEST_HEADER = 100_000_000
AGAIN = "download or copy the model again"


def check_weight_files(folder: Path) -> None:
    """A ValueError naming the first safetensors weight file of ``folder`` that is incomplete or corrupt
    (the single file, or every shard an index lists); nothing when they are whole or absent."""
    folder = Path(folder)
    index = folder / SAFETENSORS_INDEX
    if (folder / SAFETENSORS_FILE).is_file():
        check_safetensors_file(folder / SAFETENSORS_FILE)
    elif index.is_file():
        for name in _indexed_files(index):
            shard = folder / name
            if not shard.is_file():
                raise UserError(f"{shard} is missing ({index.name} lists it): the model is incomplete; {AGAIN}")
            check_safetensors_file(shard)


def check_safetensors_file(path: Path) -> None:
    """A ValueError naming ``path`` when its header cannot be read or it is not as long as its header says."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise UserError(f"{path}: incomplete or corrupt weight file ({size} bytes, not even a header); {AGAIN}")
        (header_length,) = struct.unpack("<Q", head)
        if header_length > LARGEST_HEADER:
            raise UserError(f"{path}: corrupt weight file (not a safetensors header); {AGAIN}")
        if 8 + header_length > size:
            raise UserError(
                f"{path}: incomplete weight file ({size:,} bytes, cut inside its {header_length:,}-byte header); "
                f"{AGAIN}"
            )
        raw = handle.read(header_length)
    try:
        header = json.loads(raw)
        ends = [int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise UserError(f"{path}: corrupt weight file (its safetensors header does not parse); {AGAIN}") from None
    expected = 8 + header_length + max(ends, default=0)
    if size < expected:
        raise UserError(
            f"{path}: incomplete weight file ({size:,} of the {expected:,} bytes its header describes: a download "
            f"or copy cut short); {AGAIN}"
        )
    if size > expected:
        raise UserError(
            f"{path}: corrupt weight file ({size:,} bytes where its header describes {expected:,}); {AGAIN}"
        )


def _indexed_files(index: Path) -> list[str]:
    """The shard files a sharded checkpoint's index maps its tensors to."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return sorted(set(weight_map.values()))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise UserError(f"{index}: corrupt checkpoint index (no readable weight_map); {AGAIN}") from None
