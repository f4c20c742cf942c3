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
        ('{"text": "fine"}\n{"text": "   "}\n', ".jsonl", "docs.jsonl:2: the 'text' text is empty"),
        ('{"text": "fine"}\n\n{"text": "bad \\ud800 here"}\n', ".jsonl",
         "docs.jsonl:3: the text holds a lone surrogate (U+D800)"),
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


def test_embed_latin1_file_names_the_file(tiny_models, tmp_path, capsys):
    """A file that is not UTF-8: exit 2, one line naming the file, the line and the byte."""
    path = tmp_path / "docs.txt"
    path.write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    assert main(["embed", str(path), "-o", str(tmp_path / "o.npy"), "--model", str(tiny_models["bert"])]) == 2
    assert "docs.txt:1: not UTF-8 text (byte 0xe9 at byte offset 3 of the file)" in capsys.readouterr().err


def test_embed_output_path_is_the_file_written(tiny_models, tmp_path, capsys):
    """-o x.bin writes x.bin.npy and says so; -o FOLDER is refused; .npy is kept as given."""
    path = tmp_path / "docs.txt"
    path.write_text("hello there\n")
    model = ["--model", str(tiny_models["bert"])]
    assert main(["embed", str(path), "-o", str(tmp_path / "x.bin"), *model]) == 0
    assert (tmp_path / "x.bin.npy").is_file() and not (tmp_path / "x.bin").exists()
    assert f"-> {tmp_path / 'x.bin.npy'} " in capsys.readouterr().out
    folder = tmp_path / "out"
    folder.mkdir()
    assert main(["embed", str(path), "-o", str(folder), *model]) == 2
    assert "is a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / "out.npy").exists()


def test_embed_unwritable_output_fails_before_any_work(tiny_models, tmp_path, capsys, monkeypatch):
    """An output that cannot be written fails at once, before the model loads or anything is encoded."""
    import longembed.cli.embed as embed

    monkeypatch.setattr(embed, "load_encoder", lambda *a, **k: pytest.fail("the model loaded"))
    path = tmp_path / "docs.txt"
    path.write_text("hello\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["embed", str(path), "-o", str(blocker / "sub" / "v.npy")]) == 2
    assert "is not a writable folder" in capsys.readouterr().err


def test_embed_device_and_derived_encoder_flags(tiny_models, tmp_path, capsys):
    """Every EncoderConfig field is a flag (prompts, temperature decay, ...); a missing device is one line."""
    path = tmp_path / "docs.txt"
    path.write_text("cat\n")
    out = tmp_path / "v.npy"
    argv = ["embed", str(path), "-o", str(out), "--model", str(tiny_models["bert"]), "--prompts", "query=the ",
            "--prompt-name", "query", "--temperature-decay", "0.5", "--device", "cpu"]
    assert main(argv) == 0
    expected = load_encoder(tiny_models["bert"], prompts={"query": "the "}, temperature_decay=0.5).encode(["the cat"])
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
    import torch

    if not torch.cuda.is_available():
        assert main([*argv[:-1], "cuda"]) == 2
        err = capsys.readouterr().err
        assert "device 'cuda' is not available on this machine" in err and "Traceback" not in err
