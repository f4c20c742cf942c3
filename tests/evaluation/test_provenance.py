"""The cache key's code fingerprint covers every module that computes vectors, and only those."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import longembed
from longembed.evaluation.provenance import NON_VECTOR_PARTS, code_fingerprint

LOAD_AND_ENCODE = """
import json, sys
from longembed.encoder import load_encoder
for folder, method, max_length in json.loads(sys.argv[1]):
    load_encoder(folder, method=method, max_length=max_length, device="cpu").encode(["a b c " * 60, "d e"], batch_size=2)
print(json.dumps(sorted(name for name in sys.modules if name.startswith("longembed."))))
"""


@pytest.mark.slow
def test_loading_and_running_encoders_imports_no_part_the_fingerprint_leaves_out(tiny_models: dict[str, Path]) -> None:
    """Every longembed module imported while encoders of every family and extension kind load and encode is one
    the fingerprint hashes, except the package's import plumbing (``lazy``: names imported on first use), which
    cannot change a number: no unhashed part (training, evaluation, ...) can change a cached vector.  (``noise``,
    the log filters, is no longer imported by the library at all: only the command line attaches them.)"""
    runs = [(str(tiny_models["bert"]), "truncate", None)]
    runs += [(str(tiny_models["bert"]), m, 256) for m in ("pi", "rp", "gp", "pcw")]
    runs += [(str(tiny_models["nomic"]), m, 256) for m in ("ntk", "selfextend")]
    runs += [(str(tiny_models["jina"]), "native", 256)]
    out = subprocess.run([sys.executable, "-c", LOAD_AND_ENCODE, json.dumps(runs)], capture_output=True, text=True,
                         check=True)
    imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert "longembed.encoder" in imported and len(imported) > 10
    unhashed = {name for name in imported if name.split(".")[1] in NON_VECTOR_PARTS}
    assert unhashed == {"longembed.lazy"}


def test_the_fingerprint_follows_vector_code_and_ignores_training(tmp_path: Path) -> None:
    package = shutil.copytree(Path(longembed.__file__).parent, tmp_path / "longembed",
                              ignore=shutil.ignore_patterns("__pycache__"))
    before = code_fingerprint(package)
    assert before == code_fingerprint(Path(longembed.__file__).parent)
    with (package / "training" / "tune.py").open("a") as f:
        f.write("\n# a trainer edit\n")
    assert code_fingerprint(package) == before
    with (package / "encoder.py").open("a") as f:
        f.write("\n# an encoder edit\n")
    assert code_fingerprint(package) != before
