"""A model folder whose safetensors weights are cut short or damaged is a one-line error naming the file
(issue 23: a truncated model.safetensors gave a raw library traceback, without the file's name)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from longembed import load_encoder
from longembed.cli.main import main
from longembed.weight_files import check_weight_files


@pytest.fixture
def model_copy(tiny_models, tmp_path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_models["bert"], folder)
    return folder


def cut(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: cut(f, 5), r"incomplete or corrupt weight file \(5 bytes, not even a header\)"),
        (lambda f: cut(f, 40), r"incomplete weight file \(40 bytes, cut inside its [\d,]+-byte header\)"),
        (lambda f: cut(f, f.stat().st_size // 2), r"incomplete weight file \([\d,]+ of the [\d,]+ bytes its header"),
        (lambda f: f.write_bytes(f.read_bytes() + b"\0" * 10), r"corrupt weight file \([\d,]+ bytes where its header"),
        (
            lambda f: f.write_bytes(b"\x10\0\0\0\0\0\0\0" + b"not json at all!" + b"\0" * 64),
            r"corrupt weight file \(its safetensors header does not parse\)",
        ),
    ],
)
def test_damaged_safetensors_is_a_one_line_error_naming_the_file(model_copy, tmp_path, capsys, damage, message):
    weights = model_copy / "model.safetensors"
    damage(weights)
    with pytest.raises(ValueError, match=rf"{weights}: {message}.*download or copy the model again"):
        load_encoder(str(model_copy), method="pi", max_length=128)
    docs = tmp_path / "docs.txt"
    docs.write_text("the cat\n")
    code = main(["embed", str(docs), "-o", str(tmp_path / "v.npy"), "--model", str(model_copy)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(weights) in err and "Traceback" not in err


def test_sharded_checkpoint_names_a_missing_or_cut_shard(model_copy) -> None:
    weights = load_file(model_copy / "model.safetensors")
    (model_copy / "model.safetensors").unlink()
    names = sorted(weights)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for file, keys in parts.items():
        save_file({k: weights[k].contiguous() for k in keys}, model_copy / file)
    index = {"metadata": {}, "weight_map": {k: file for file, keys in parts.items() for k in keys}}
    (model_copy / "model.safetensors.index.json").write_text(json.dumps(index))
    check_weight_files(model_copy)  # whole: nothing to say
    second = model_copy / "model-00002-of-00002.safetensors"
    cut(second, second.stat().st_size - 100)
    with pytest.raises(ValueError, match=rf"{second}: incomplete weight file"):
        load_encoder(str(model_copy), method="pi", max_length=128)
    second.unlink()
    with pytest.raises(ValueError, match=rf"{second} is missing \(model.safetensors.index.json lists it\)"):
        check_weight_files(model_copy)
