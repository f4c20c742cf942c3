"""The `longembed embed` command: inputs, outputs, overflow summary, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import LO, words

from longembed import load_encoder
from longembed.cli.main import main
from longembed.precision import resolve_dtype

#: what embed's default, --dtype auto, runs in on this machine (bfloat16 where the CPU computes it natively):
#: the API encoder the command is compared with runs in it too
AUTO = resolve_dtype("auto").dtype


def test_embed_txt_and_jsonl_give_the_api_vectors(tiny_models, tmp_path, capsys):
    docs = [words(10, seed=1), words(100, seed=2), words(20, seed=3)]
    txt = tmp_path / "docs.txt"
    txt.write_text("\n".join(docs) + "\n\n")  # read by line (--unit line)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(json.dumps({"text": d, "id": i}) for i, d in enumerate(docs)))
    expected = load_encoder(tiny_models["bert"], method="pi", max_length=4 * LO, dtype=AUTO).encode(docs)
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
                *(["--unit", "line"] if path.suffix == ".txt" else []),
            ]
        )
        assert code == 0
        np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
        assert "truncated: none" in capsys.readouterr().out


def test_embed_reports_truncated_documents(tiny_models, tmp_path, capsys):
    path = tmp_path / "docs.txt"
    path.write_text(f"{words(5)}\n{words(200, seed=1)}\n")
    code = main(["embed", str(path), "-o", str(tmp_path / "o.npy"), "--model", str(tiny_models["bert"]),
                 "--unit", "line"])
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
            "--prompt-name", "query", "--temperature-decay", "0.5", "--overwrite", "--device", "cpu"]
    assert main(argv) == 0
    expected = load_encoder(tiny_models["bert"], prompts={"query": "the "}, temperature_decay=0.5,
                            dtype=AUTO).encode(["the cat"])
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
    import torch

    if not torch.cuda.is_available():
        assert main([*argv[:-1], "cuda"]) == 2
        err = capsys.readouterr().err
        assert "device 'cuda' is not available on this machine" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- issue 40 (5, 8) and 41 (--unit)
def test_embed_refuses_to_replace_an_existing_file_without_overwrite(tiny_models, tmp_path, capsys, monkeypatch):
    """Issue 40: ``embed -o e6.npy`` replaced an existing file with rc 0; like export, tune and retrofit it
    now needs --overwrite, and says so before the model loads."""
    import longembed.cli.embed as embed

    path = tmp_path / "docs.txt"
    path.write_text("hello there\n")
    out = tmp_path / "e6.npy"
    np.save(out, np.arange(3))
    real_load = embed.load_encoder
    monkeypatch.setattr(embed, "load_encoder", lambda *a, **k: pytest.fail("the model loaded"))
    assert main(["embed", str(path), "-o", str(out), "--model", str(tiny_models["bert"])]) == 2
    assert f"longembed embed: error: {out} exists; pass --overwrite to replace it" in capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out), np.arange(3))
    monkeypatch.setattr(embed, "load_encoder", real_load)
    assert main(["embed", str(path), "-o", str(out), "--model", str(tiny_models["bert"]), "--overwrite"]) == 0
    assert np.load(out).shape == (1, 32)


def _folder_root_cannot_write() -> Path:
    """/sys: ``os.access`` says writable to root, but no file can be created there (the case issue 40 hit)."""
    folder = Path("/sys")
    try:
        probe = folder / ".longembed-probe"
        probe.write_text("")
        probe.unlink()
    except OSError:
        return folder
    pytest.skip("/sys takes new files on this machine")


@pytest.mark.parametrize("corpus", [False, True])
def test_embed_output_that_takes_no_file_fails_before_encoding(tiny_models, tmp_path, capsys, monkeypatch, corpus):
    """Issue 40: an -o folder that ``os.access`` calls writable but that takes no file was found only after
    all the encoding; a file is now tried there (or in the nearest existing parent) before the model loads."""
    import longembed.cli.embed as embed
    import longembed.corpus.job as corpus_job

    folder = _folder_root_cannot_write()
    monkeypatch.setattr(embed, "load_encoder", lambda *a, **k: pytest.fail("the model loaded"))
    monkeypatch.setattr(corpus_job, "load_encoder", lambda *a, **k: pytest.fail("the model loaded"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("hello there")
    source, out = (docs, folder / "longembed-out") if corpus else (docs / "a.txt", folder / "sub" / "v.npy")
    assert main(["embed", str(source), "-o", str(out), "--model", str(tiny_models["bert"])]) == 2
    err = capsys.readouterr().err
    assert "is not a writable folder" in err and "Traceback" not in err


def test_embed_unit_file_and_line(tiny_models, tmp_path, capsys):
    """Issue 41: ``embed DIR`` of essays read each .txt line as a document. A .txt/.md is now one document by
    default (a folder of them, one per file, ids the names); ``--unit line`` keeps one per line; a .jsonl
    stays one per line and refuses ``--unit file``."""
    from longembed.corpus import read_embeddings

    essays = {"apple": f"{words(20, seed=1)}\n\n{words(15, seed=2)}\n", "boss": f"{words(12, seed=3)}\n{words(9, seed=4)}"}
    folder = tmp_path / "essays"
    folder.mkdir()
    for name, text in essays.items():
        (folder / f"{name}.txt").write_text(text)
    model = ["--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", str(4 * LO)]
    encoder = load_encoder(tiny_models["bert"], method="pi", max_length=4 * LO, dtype=AUTO)

    assert main(["embed", str(folder), "-o", str(tmp_path / "whole"), *model]) == 0
    ids, vectors = read_embeddings(tmp_path / "whole")
    assert ids == ["apple", "boss"]
    np.testing.assert_allclose(vectors, encoder.encode(list(essays.values())), atol=1e-6)

    assert main(["embed", str(folder), "-o", str(tmp_path / "lines"), "--unit", "line", *model]) == 0
    ids, _ = read_embeddings(tmp_path / "lines")
    assert ids == ["apple:1", "apple:3", "boss:1", "boss:2"]

    md = tmp_path / "note.md"
    md.write_text(essays["apple"])
    assert main(["embed", str(md), "-o", str(tmp_path / "note.npy"), *model]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "note.npy"), encoder.encode([essays["apple"]]), atol=1e-6)
    assert main(["embed", str(md), "-o", str(tmp_path / "note-lines.npy"), "--unit", "line", *model]) == 0
    assert np.load(tmp_path / "note-lines.npy").shape == (2, 32)

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text('{"text": "a"}\n')
    capsys.readouterr()
    assert main(["embed", str(jsonl), "-o", str(tmp_path / "j.npy"), "--unit", "file", *model]) == 2
    assert "--unit file applies to .txt/.md files; a .jsonl file holds one document per line" in capsys.readouterr().err


def test_embed_help_states_the_unit_default(capsys):
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--unit {file,line}" in text and "the whole file (file, the default" in text
