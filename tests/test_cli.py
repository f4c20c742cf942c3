"""The `longembed embed` command: inputs, outputs, overflow summary, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import LO, words

from longembed import load_encoder
from longembed.cli.main import main


def test_embed_txt_and_jsonl_give_the_api_vectors(tiny_models, tmp_path, capsys):
    docs = [words(10, seed=1), words(100, seed=2), words(20, seed=3)]
    txt = tmp_path / "docs.txt"
    txt.write_text("\n".join(docs) + "\n\n")
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": d, "id": i}) for i, d in enumerate(docs)))
    expected = load_encoder(tiny_models["bert"], method="pi", max_length=4 * LO).encode(docs)
    for path in (txt, jsonl):
        out = tmp_path / f"{path.stem}-{path.suffix[1:]}.npy"
        code = main(
            [
                "embed",
                str(path),
                "-o",
                str(out),
                "--model",
                str(tiny_models["bert"]),
                "--method",
                "pi",
                "--max-length",
                str(4 * LO),
            ]
        )
        assert code == 0
        np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
        assert "truncated: none" in capsys.readouterr().out


def test_embed_reports_truncated_documents(tiny_models, tmp_path, capsys):
    path = tmp_path / "docs.txt"
    path.write_text(f"{words(5)}\n{words(200, seed=1)}\n")
    code = main(["embed", str(path), "-o", str(tmp_path / "o.npy"), "--model", str(tiny_models["bert"])])
    assert code == 0
    out = capsys.readouterr().out
    assert "truncated: 1 document(s) exceeded --max-length 32 tokens (first indices [1])" in out


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('{"text": "fine"}\nnot json\n', ".jsonl", "docs.jsonl:2: not valid JSON"),
        ('{"body": "x"}\n', ".jsonl", "expected an object with a string field 'text'"),
        ("a,b\n", ".csv", "unsupported input type '.csv'"),
        ("\n\n", ".txt", "no documents found"),
    ],
)
def test_embed_bad_input_is_a_clear_error(tiny_models, tmp_path, capsys, content, suffix, message):
    path = tmp_path / f"docs{suffix}"
    path.write_text(content)
    code = main(["embed", str(path), "-o", str(tmp_path / "o.npy"), "--model", str(tiny_models["bert"])])
    assert code == 2
    assert message in capsys.readouterr().err


def test_embed_method_that_does_not_fit_and_missing_file(tiny_models, tmp_path, capsys):
    path = tmp_path / "docs.txt"
    path.write_text("hello\n")
    assert (
        main(
            [
                "embed",
                str(path),
                "-o",
                str(tmp_path / "o.npy"),
                "--model",
                str(tiny_models["bert"]),
                "--method",
                "ntk",
                "--max-length",
                "64",
            ]
        )
        == 2
    )
    assert "does not apply to APE models" in capsys.readouterr().err
    assert main(["embed", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "o.npy")]) == 2
    assert "input file not found" in capsys.readouterr().err
