"""The sentence-transformers folder format (``longembed.sentence_transformers_folder``): what it writes
opens in sentence-transformers (the installed release, the reference) and in ``load_encoder`` with the
same vectors; what sentence-transformers writes, in its newer form, reads back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import build_tiny, words
from sentence_transformers import SentenceTransformer

from longembed import load_encoder
from longembed.loading import resolve_model
from longembed.sentence_transformers_folder import (
    copy_modules,
    is_sentence_transformers_folder,
    read_folder,
    read_pooling,
    set_max_seq_length,
    transformer_path,
    write_modules,
)

TEXTS = [words(12, seed=1), words(30, seed=2), words(5, seed=3)]


@pytest.fixture(scope="module")
def plain_bert(tmp_path_factory) -> Path:
    """A plain Hugging Face folder (no modules.json)."""
    return build_tiny("bert", tmp_path_factory.mktemp("plain") / "bert")


@pytest.mark.parametrize(("pooling", "normalize"), [("mean", False), ("cls", True), ("last", False)])
def test_written_folders_open_in_sentence_transformers_and_load_encoder_alike(
    plain_bert: Path, tmp_path: Path, pooling: str, normalize: bool
) -> None:
    folder = tmp_path / "st"
    shutil.copytree(plain_bert, folder)
    hidden = json.loads((folder / "config.json").read_text())["hidden_size"]
    write_modules(folder, pooling, hidden, normalize=normalize)
    set_max_seq_length(folder, 64)

    declared = read_folder(folder)
    assert (declared.transformer_path, declared.pooling, declared.normalize) == (folder, pooling, normalize)
    reference = SentenceTransformer(str(folder), device="cpu")
    assert reference.max_seq_length == 64
    expected = reference.encode(TEXTS, convert_to_numpy=True)
    got = load_encoder(str(folder)).encode(TEXTS, batch_size=2)
    np.testing.assert_allclose(got, expected, atol=2e-5)
    norms = np.linalg.norm(got, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5) == normalize


def test_a_folder_sentence_transformers_saved_reads_back(plain_bert: Path, tmp_path: Path) -> None:
    """The newer form (``sentence_transformers.base.modules...`` types, a ``pooling_mode`` key) as the
    installed release writes it: the transformer, the pooling and the prompts are found."""
    model = SentenceTransformer(str(plain_bert), device="cpu")
    model.prompts = {"query": "query: "}
    model.save(str(tmp_path / "saved"))
    declared = read_folder(tmp_path / "saved")
    assert declared.transformer_path == tmp_path / "saved" and declared.pooling == "mean"
    assert declared.prompts["query"] == "query: "
    assert resolve_model(tmp_path / "saved").prompts["query"] == "query: "


def test_copied_modules_put_the_transformer_at_the_root_and_keep_the_rest(plain_bert: Path, tmp_path: Path) -> None:
    """A teacher whose transformer sits in a subfolder (``0_Transformer``, older sentence-transformers):
    the copy's modules point at the root, pooling, normalization, settings and prompts are kept."""
    teacher = tmp_path / "teacher"
    shutil.copytree(plain_bert, teacher / "0_Transformer")
    hidden = json.loads((teacher / "0_Transformer" / "config.json").read_text())["hidden_size"]
    write_modules(teacher, "cls", hidden, normalize=True, transformer="0_Transformer")
    (teacher / "0_Transformer" / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32,
                                                                                    "do_lower_case": False}))
    (teacher / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "q: "}}))
    assert transformer_path(teacher) == teacher / "0_Transformer" and transformer_path(plain_bert) == plain_bert

    student = tmp_path / "student"
    shutil.copytree(teacher / "0_Transformer", student)
    (student / "sentence_bert_config.json").unlink()
    copy_modules(teacher, student, 128)
    declared = read_folder(student)
    assert (declared.transformer_path, declared.pooling, declared.normalize) == (student, "cls", True)
    assert declared.prompts == {"query": "q: "}
    assert json.loads((student / "sentence_bert_config.json").read_text()) == {"max_seq_length": 128,
                                                                               "do_lower_case": False}
    assert SentenceTransformer(str(student), device="cpu").max_seq_length == 128


def test_a_plain_folder_is_not_a_sentence_transformers_folder_and_odd_pooling_is_refused(
    plain_bert: Path, tmp_path: Path
) -> None:
    assert not is_sentence_transformers_folder(plain_bert)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(ValueError, match=f"{config}: unsupported pooling"):
        read_pooling(config)
    config.write_text(json.dumps({"pooling_mode": "cls", "embedding_dimension": 8}))
    assert read_pooling(config) == "cls"
    with pytest.raises(ValueError, match="pooling must be one of"):
        write_modules(tmp_path, "max", 8)
