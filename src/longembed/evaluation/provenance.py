"""Where a vector came from: the model's files, the encoder's settings, longembed's code, the libraries.

Two uses.  A result file records it (``versions`` in results.json), so that a number can be traced
to what produced it.  The embedding cache keys on it (:func:`cache_fingerprint`), so that a cached
vector is reused only when everything that decides it is the same, and never after a change to the
model, the settings that change vectors, or longembed's vector code.
"""

from __future__ import annotations

import hashlib
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

import longembed
from longembed.encoder_protocol import EncoderMetadata
from longembed.evaluation.cache.storage import CACHE_FORMAT
from longembed.retrieval.model_files import hash_file, model_folder, model_identity  # noqa: F401 (their old home)

#: EncoderConfig fields that never change a vector: ``model`` (the folder's *content* is in the
#: fingerprint instead, so a moved or copied folder stays warm), ``prompts`` (the prompt actually used is
#: in the fingerprint), ``temperature`` (the per-call temperature actually used is), ``on_overflow``
#: (it only decides between truncating and raising) and ``preset`` (its effect is in the other fields).
NON_VECTOR_CONFIG_FIELDS = ("model", "prompts", "temperature", "on_overflow", "preset")

#: Parts of longembed that cannot change a cached vector; every other module is in the code
#: fingerprint.  The server, the adapters and ``advise`` call the encoder and never write the cache's
#: vectors themselves.
# Parts of the package that never compute an encoder's vectors.  ``training`` is one: it writes model
# folders, and the core layers that load and run a folder never import it (the layer rule), so editing a
# trainer keeps the embedding cache warm.  tests/evaluation/test_provenance.py checks that loading and
# running an encoder imports none of these parts.
NON_VECTOR_PARTS = ("cli", "evaluation", "report", "tasks", "collapse", "results", "noise", "lazy", "advice",
                    "serving", "integrations", "training", "retrieval", "search")

def code_fingerprint(root: Path | None = None) -> str:
    """sha256 of the longembed modules that compute vectors (all but :data:`NON_VECTOR_PARTS`): part of
    the cache key, so that a change to the encoder's code never serves stale vectors.  ``root``: the
    package folder (default: the installed one)."""
    root = Path(longembed.__file__).resolve().parent if root is None else Path(root)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NON_VECTOR_PARTS:
            continue
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    """Versions of longembed (and its vector code's hash), torch, transformers, numpy and Python."""
    return {
        "longembed": longembed.__version__,
        "longembed_code_sha256": code_fingerprint(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def package_version(name: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def encoder_device(encoder: EncoderMetadata) -> str:
    """The device type an encoder runs on ("cpu", "cuda", ...)."""
    device = encoder.device
    return device.type if isinstance(device, torch.device) else str(device)


def resolved_settings(encoder: EncoderMetadata) -> dict[str, Any]:
    """What the encoder made of its config (detected scheme, Lo, Lt, pooling, normalization), from its
    metadata (or from anything with the same members: a ``LongContextEncoder``, a ``CachedEncoder``)."""
    return {
        "method": encoder.method,
        "position_scheme": encoder.position_scheme,
        "original_length": encoder.original_length,
        "max_length": encoder.max_length,
        "pooling": encoder.pooling,
        "normalize": encoder.normalize,
    }


def cache_fingerprint(
    encoder: EncoderMetadata,
    identity: dict[str, Any],
    prompt: str,
    temperature: float,
    versions: dict[str, str],
    include_code: bool = True,
    normalize: bool = True,
    quantity: str = "embedding",
) -> dict[str, Any]:
    """Everything that decides a cached vector: model content, vector-relevant config, prompt, tau, code.

    The mtimes and the folder path of ``identity`` are left out (they do not change a vector); torch and
    transformers versions and the device type are kept (they can change the last bits of a vector).
    ``include_code=False`` leaves out the hash of longembed's vector code (keeping only its version):
    for reusing vectors across code edits known not to change them (e.g. while developing).
    ``quantity`` names what is cached when it is not the embedding itself (e.g. sigma_a).
    """
    config_dict = encoder.config.to_dict()
    fingerprint = {
        "format": CACHE_FORMAT,
        "model_files": {
            name: {"size": f["size"], "sha256": f["sha256"]} for name, f in identity["files"].items()
        },
        "config": {k: v for k, v in config_dict.items() if k not in NON_VECTOR_CONFIG_FIELDS},
        "resolved": resolved_settings(encoder),
        "prompt": prompt,
        "temperature": float(temperature),
        "normalize_embeddings": normalize,
        "code": versions["longembed_code_sha256"] if include_code else f"longembed {versions['longembed']}",
        "torch": versions["torch"],
        "transformers": versions["transformers"],
        "device": encoder_device(encoder),
    }
    if quantity != "embedding":
        fingerprint["quantity"] = quantity
    return fingerprint
