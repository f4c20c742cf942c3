"""Embedding a corpus of shards (longembed.corpus): the local engine, the Ray engine, resuming, the CLI.

The Ray tests share one local Ray (2 CPUs, no dashboard) started once for this module.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import LO, require_package, words

from longembed import load_encoder
from longembed.cli.main import main
from longembed.corpus import EmbedJob, RaySettings, ShardEmbedder, embed_corpus, plan_corpus, read_embeddings
from longembed.corpus import ray_engine as ray_engine_module
from longembed.corpus.writer import METADATA_KEY

pq = require_package("pyarrow.parquet")
pa = require_package("pyarrow")

MAX_LENGTH = 4 * LO
#: Word counts per document: short, longer than Lo (pi applies), and one past max_length (truncated).
LENGTHS = [5, 40, 12, 90, 3, 200, 25]

#: embed's default is --dtype auto (bfloat16 where the CPU computes it natively): the CLI runs below are
#: compared with float32 jobs, so they say float32
FLOAT32 = ["--dtype", "float32"]


def make_docs(shard: int, n: int) -> list[tuple[str, str]]:
    return [(f"s{shard}-d{i}", words(LENGTHS[(shard + i) % len(LENGTHS)], seed=100 * shard + i)) for i in range(n)]


def write_jsonl_corpus(folder: Path, sizes: tuple[int, ...] = (5, 3, 6, 4)) -> list[tuple[str, str]]:
    """One .jsonl shard per size; returns every (id, text) in shard-name order."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = []
    for shard, n in enumerate(sizes):
        rows = make_docs(shard, n)
        (folder / f"part-{shard}.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows))
        docs.extend(rows)
    return docs


@pytest.fixture
def job(tiny_models) -> EmbedJob:
    # chunk_rows=2: every shard is encoded (and written) in several chunks
    return EmbedJob(str(tiny_models["bert"]), method="pi", max_length=MAX_LENGTH, chunk_rows=2)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[tuple[str, str]]]:
    folder = tmp_path_factory.mktemp("corpus") / "shards"
    return folder, write_jsonl_corpus(folder)


def file_state(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.parquet"))}


# ----------------------------------------------------------------------------- the local engine
@pytest.mark.slow
def test_local_engine_writes_the_encoders_vectors(tiny_models, corpus, job, tmp_path, caplog):
    folder, docs = corpus
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="longembed.corpus"):
        result = embed_corpus(folder, out, job)
    assert "[1/4] part-0.jsonl: 5 documents in" in caplog.text and "[4/4] part-3.jsonl: 4 documents" in caplog.text
    assert [r.shard for r in result.reports] == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl", "part-3.jsonl"]
    assert result.documents == len(docs) and not result.failed
    ids, vectors = read_embeddings(out)
    assert ids == [i for i, _ in docs]
    expected = load_encoder(tiny_models["bert"], method="pi", max_length=MAX_LENGTH).encode([t for _, t in docs])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)

    table = pq.read_table(out / "part-2.parquet")
    assert table.schema.field("vector").type == pa.list_(pa.float32(), 32)
    truncated = [len(t.split()) + 2 > MAX_LENGTH for _, t in make_docs(2, 6)]
    assert table.column("truncated").to_pylist() == truncated and any(truncated)
    assert result.truncated == sum(len(t.split()) + 2 > MAX_LENGTH for _, t in docs)
    record = json.loads(pq.read_metadata(out / "part-0.parquet").metadata[METADATA_KEY])
    assert record["documents"] == 5 and record["config"] == job.fingerprint()
    assert pq.ParquetFile(out / "part-0.parquet").num_row_groups == 3  # chunks of 2 rows


def test_txt_ids_empty_lines_nested_folders_and_parquet_shards(tiny_models, job, tmp_path):
    texts = [words(8, seed=1), words(50, seed=2), words(3, seed=3)]
    folder = tmp_path / "txt"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(f"{texts[0]}\n\n{texts[1]}\n   \n")
    (folder / "sub" / "b.txt").write_text(f"{texts[2]}\n")
    (folder / "_SUCCESS").write_text("")  # ignored, as are hidden files
    with pytest.warns(UserWarning, match=r"a.txt: skipped 2 empty line\(s\)"):
        result = embed_corpus(folder, tmp_path / "out", dataclasses.replace(job, unit="line"))
    ids, vectors = read_embeddings(tmp_path / "out")
    assert ids == ["a:1", "a:3", "sub/b:1"]
    assert (tmp_path / "out" / "sub" / "b.parquet").is_file() and result.documents == 3
    expected = load_encoder(tiny_models["bert"], method="pi", max_length=MAX_LENGTH).encode(texts)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)

    # the same documents as a .parquet shard with integer ids and other column names
    table = pa.table({"key": [7, 8, 9], "body": texts})
    pq.write_table(table, tmp_path / "docs.parquet")
    parquet_job = EmbedJob(job.model, job.method, job.max_length, text_field="body", id_field="key")
    embed_corpus(tmp_path / "docs.parquet", tmp_path / "out-parquet", parquet_job)
    ids, parquet_vectors = read_embeddings(tmp_path / "out-parquet" / "docs.parquet")
    assert ids == ["7", "8", "9"]
    np.testing.assert_allclose(parquet_vectors, expected, atol=1e-6)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "text": "the cat"}\n{"text": "the dog"}\n', "bad.jsonl:2: missing field 'id'"),
        ('{"id": "a", "text": "the cat"}\n{"id": "b", "text": "  "}\n', "bad.jsonl:2: the 'text' text is empty"),
        ('{"id": "a", "text": "the cat"}\n\n{"id": "a", "text": "a dog"}\n',
         "bad.jsonl:3: duplicate id 'a' (first at"),
        ('{"id": "a", "body": "the cat"}\n', "bad.jsonl:1: expected a string field 'text', got missing"),
        ('{"id": "a", "text": "the cat"}\nnot json\n', "bad.jsonl:2: not valid JSON"),
        ('{"id": [1], "text": "the cat"}\n', "the id [1] is not a non-empty string or an integer"),
    ],
)
def test_a_bad_shard_fails_alone_and_names_file_and_line(job, tmp_path, content, message):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2,))
    (folder / "bad.jsonl").write_text(content)
    result = embed_corpus(folder, tmp_path / "out", job)
    assert [r.shard for r in result.failed] == ["bad.jsonl"] and message in result.failed[0].error
    assert (tmp_path / "out" / "part-0.parquet").is_file()
    assert not (tmp_path / "out" / "bad.parquet").exists()
    assert not list((tmp_path / "out").glob(".tmp-*"))


def test_folder_errors_before_any_work(job, tmp_path):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2,))
    (folder / "more.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match=r"mixes shard types: 1 \.jsonl \(part-0.jsonl\); 1 \.parquet"):
        plan_corpus(folder, tmp_path / "out", job)
    (folder / "more.parquet").unlink()
    (folder / "notes.csv").write_text("hi")
    with pytest.raises(ValueError, match=r"1 file\(s\) that are not shards \(notes.csv\)"):
        plan_corpus(folder, tmp_path / "out", job)
    (folder / "notes.csv").unlink()
    with pytest.raises(ValueError, match="inside the input folder"):
        plan_corpus(folder, folder / "vectors", job)
    with pytest.raises(ValueError, match="not a .npy file"):
        plan_corpus(folder, tmp_path / "v.npy", job)
    with pytest.raises(FileNotFoundError, match="input not found"):
        plan_corpus(tmp_path / "nope", tmp_path / "out", job)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no shards found"):
        plan_corpus(empty, tmp_path / "out", job)


# ----------------------------------------------------------------------------- resuming
def test_resume_embeds_only_the_missing_shard(corpus, job, tmp_path):
    folder, _ = corpus
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    ids_before, vectors_before = read_embeddings(out)
    state = file_state(out)
    (out / "part-2.parquet").unlink()

    result = embed_corpus(folder, out, job)
    assert [r.shard for r in result.reports] == ["part-2.jsonl"] and result.documents == 6
    assert len(result.plan.done) == 3
    after = file_state(out)
    assert {k: v for k, v in after.items() if k != "part-2.parquet"} == {
        k: v for k, v in state.items() if k != "part-2.parquet"
    }
    ids, vectors = read_embeddings(out)
    assert ids == ids_before
    np.testing.assert_array_equal(vectors, vectors_before)


@pytest.mark.slow
def test_nothing_to_do_loads_no_model(corpus, job, tmp_path, monkeypatch):
    folder, _ = corpus
    embed_corpus(folder, tmp_path / "out", job)
    monkeypatch.setattr(ShardEmbedder, "__init__", lambda *a, **k: pytest.fail("the model loaded"))
    result = embed_corpus(folder, tmp_path / "out", job)
    assert result.reports == [] and len(result.plan.done) == 4


def test_partial_and_damaged_files_are_not_counted_as_done(corpus, job, tmp_path):
    folder, _ = corpus
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    good = (out / "part-1.parquet").read_bytes()
    # a run killed while writing part-1 leaves only its temporary file (never the final name) ...
    (out / "part-1.parquet").unlink()
    (out / ".tmp-part-1.parquet-x1y2").write_bytes(good[: len(good) // 2])
    # ... and a final file cut short (a copy gone wrong) does not read back
    (out / "part-3.parquet").write_bytes((out / "part-3.parquet").read_bytes()[:-20])
    plan = plan_corpus(folder, out, job)
    assert [s.name for s, _ in plan.pending] == ["part-1.jsonl", "part-3.jsonl"]
    assert any("part-3.parquet: the file cannot be read back" in note for note in plan.redo)

    result = embed_corpus(folder, out, job)
    assert sorted(r.shard for r in result.reports) == ["part-1.jsonl", "part-3.jsonl"]
    assert not list(out.glob(".tmp-*"))
    assert read_embeddings(out)[0] == [i for i, _ in corpus[1]]


@pytest.mark.slow
def test_a_run_interrupted_mid_shard_leaves_no_output(corpus, job, tmp_path, monkeypatch):
    folder, _ = corpus
    out = tmp_path / "out"
    original = ShardEmbedder._encode_chunks

    def one_chunk_then_stop(self, reader, report):
        chunks = original(self, reader, report)
        yield next(chunks)
        raise KeyboardInterrupt

    monkeypatch.setattr(ShardEmbedder, "_encode_chunks", one_chunk_then_stop)
    with pytest.raises(KeyboardInterrupt):
        embed_corpus(folder, out, job)
    assert not list(out.iterdir())
    monkeypatch.undo()
    assert len(embed_corpus(folder, out, job).reports) == 4


def test_changed_shard_is_embedded_again_and_another_configuration_is_refused(job, tmp_path):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2, 2))
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    with (folder / "part-1.jsonl").open("a") as handle:
        handle.write(json.dumps({"id": "new", "text": "the end"}) + "\n")
    result = embed_corpus(folder, out, job)
    assert [r.shard for r in result.reports] == ["part-1.jsonl"] and result.documents == 3
    assert any("the shard changed" in note for note in result.plan.redo)
    other = EmbedJob(job.model, method="gp", max_length=MAX_LENGTH)
    with pytest.raises(ValueError, match="another configuration .*different method"):
        embed_corpus(folder, out, other)


def rewrite_footer(path: Path, change) -> None:
    """Rewrite an output file with ``change(record)`` applied to its footer record (an older longembed's file)."""
    table = pq.read_table(path)
    record = json.loads(pq.read_metadata(path).metadata[METADATA_KEY])
    change(record)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(record)}), path)


def test_a_shard_edited_to_the_same_size_is_embedded_again(tiny_models, job, tmp_path, caplog):
    """The probe: one text edited in place, same byte size: "nothing to embed" and the old text's vector."""
    folder = tmp_path / "in"
    docs = write_jsonl_corpus(folder, sizes=(3, 2))
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    shard = folder / "part-0.jsonl"
    old_text = docs[1][1]
    new_text = old_text.replace("the", "one", 1) if "the" in old_text else "one" + old_text[3:]
    assert len(new_text) == len(old_text) and new_text != old_text
    size = shard.stat().st_size
    shard.write_text(shard.read_text().replace(json.dumps(old_text), json.dumps(new_text)))
    assert shard.stat().st_size == size

    with caplog.at_level(logging.WARNING, logger="longembed.corpus.plan"):
        result = embed_corpus(folder, out, job)
    assert [r.shard for r in result.reports] == ["part-0.jsonl"]
    assert "same size, different content" in caplog.text
    ids, vectors = read_embeddings(out / "part-0.parquet")
    expected = load_encoder(job.model, method="pi", max_length=MAX_LENGTH).encode([new_text])[0]
    np.testing.assert_allclose(vectors[ids.index(docs[1][0])], expected, atol=1e-5)
    assert len(embed_corpus(folder, out, job).reports) == 0  # and now it is current


def test_an_output_without_a_content_hash_is_embedded_again(job, tmp_path):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2, 2))
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    rewrite_footer(out / "part-1.parquet", lambda record: record.pop("source_sha256"))
    plan = plan_corpus(folder, out, job)
    assert [s.name for s, _ in plan.pending] == ["part-1.jsonl"]
    assert any("records no hash of its shard's content" in note for note in plan.redo)


def test_an_output_whose_shard_was_deleted_is_reported_and_kept(tiny_models, job, tmp_path, capsys, caplog):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2, 2, 2))
    out = tmp_path / "out"
    embed_corpus(folder, out, job)
    (folder / "part-1.jsonl").unlink()
    plan = plan_corpus(folder, out, job)
    assert plan.stray == [out / "part-1.parquet"] and not plan.pending
    model = ["--model", job.model, "--method", "pi", "--max-length", str(MAX_LENGTH), *FLOAT32]
    with caplog.at_level(logging.WARNING, logger="longembed.corpus.plan"):
        assert main(["embed", str(folder), "-o", str(out), *model]) == 0
    assert (f"1 file(s) in {out} have no shard in {folder} (deleted or renamed since they were written): "
            "part-1.parquet; left in place") in caplog.text
    assert "nothing to embed" in capsys.readouterr().out
    assert (out / "part-1.parquet").is_file()  # nothing lost: the user decides


def test_an_id_in_two_shards_is_refused_naming_both_places(job, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "x1", "text": "the cat"}\n{"id": "shared", "text": "a dog"}\n')
    (folder / "b.jsonl").write_text('{"id": "shared", "text": "one fish"}\n')
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=(
        rf"id 'shared' is in two shards: {folder / 'a.jsonl'}:2 and {folder / 'b.jsonl'}:1; ids key the vectors"
    )):
        embed_corpus(folder, out, job)
    assert not out.exists() or not list(out.iterdir())
    # an id already embedded in a done shard counts too
    (folder / "b.jsonl").write_text('{"id": "y1", "text": "one fish"}\n')
    embed_corpus(folder, out, job)
    (folder / "c.jsonl").write_text('{"id": "y2", "text": "two fish"}\n\n{"id": "x1", "text": "red fish"}\n')
    with pytest.raises(ValueError, match=rf"id 'x1' is in two shards: {folder / 'a.jsonl'}:1 and "
                                         rf"{folder / 'c.jsonl'}:3"):
        embed_corpus(folder, out, job)
    assert not (out / "c.parquet").exists()


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_one_file_under_two_names_is_refused(job, tmp_path, link):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2, 2))
    (folder / "sub").mkdir()
    make = os.symlink if link == "symlink" else os.link
    make(folder / "part-0.jsonl", folder / "sub" / "again.jsonl")
    with pytest.raises(ValueError, match=(
        rf"{folder}: part-0.jsonl and sub/again.jsonl are the same file \({folder / 'part-0.jsonl'}, through a "
        r"link\); it would be embedded twice: remove one of the two names"
    )):
        plan_corpus(folder, tmp_path / "out", job)


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o027], ids=lambda mask: f"umask{mask:03o}")
def test_parquet_outputs_follow_the_umask(job, tmp_path, umask):
    """Shards come out as ``open()`` would make them (they were -rw------- whatever the umask)."""
    folder = tmp_path / "in"
    write_jsonl_corpus(folder, sizes=(2,))
    previous = os.umask(umask)
    try:
        embed_corpus(folder, tmp_path / "out", job)
    finally:
        os.umask(previous)
    assert (tmp_path / "out" / "part-0.parquet").stat().st_mode & 0o777 == 0o666 & ~umask


# ----------------------------------------------------------------------------- the Ray engine
@pytest.fixture(scope="module")
def local_reference(tiny_models, corpus, tmp_path_factory) -> tuple[list[str], np.ndarray]:
    job = EmbedJob(str(tiny_models["bert"]), method="pi", max_length=MAX_LENGTH, chunk_rows=2)
    out = tmp_path_factory.mktemp("local") / "out"
    embed_corpus(corpus[0], out, job)
    return read_embeddings(out)


def test_ray_engine_gives_the_local_engines_ids_and_vectors(ray_runtime, corpus, job, local_reference, tmp_path):
    """One actor here; two in the CLI test below (each Ray run costs seconds of actor start-up)."""
    result = embed_corpus(corpus[0], tmp_path / "out", job, engine="ray", ray=RaySettings(actors=1))
    assert sorted(r.shard for r in result.reports) == [f"part-{i}.jsonl" for i in range(4)]
    assert not result.failed and ray_runtime.is_initialized()  # a Ray it did not start is left running
    ids, vectors = read_embeddings(tmp_path / "out")
    assert ids == local_reference[0]
    np.testing.assert_allclose(vectors, local_reference[1], atol=1e-6)


def test_ray_actor_that_cannot_load_the_model_is_one_clear_error(ray_runtime, corpus, job, tmp_path):
    bad = EmbedJob(job.model, method="ntk", max_length=MAX_LENGTH)  # a RoPE method on an APE model
    with pytest.raises(ValueError, match="on the Ray actors: cannot load the encoder: .*does not apply to APE"):
        embed_corpus(corpus[0], tmp_path / "out", bad, engine="ray", ray=RaySettings(actors=1))
    with pytest.raises(ValueError, match="3 actor"):
        embed_corpus(corpus[0], tmp_path / "out", job, engine="ray", ray=RaySettings(actors=3))


def test_cli_ray_end_to_end_with_a_bad_shard_then_resumed(ray_runtime, tiny_models, corpus, local_reference,
                                                         tmp_path, capsys):
    folder = tmp_path / "in"
    write_jsonl_corpus(folder)
    (folder / "part-9.jsonl").write_text('{"id": "x", "text": "the cat"}\n{"id": "x", "text": "a dog"}\n')
    out = tmp_path / "out"
    argv = ["embed", str(folder), "-o", str(out), "--engine", "ray", "--actors", "2", "--model",
            str(tiny_models["bert"]), "--method", "pi", "--max-length", str(MAX_LENGTH), *FLOAT32]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "1 of 5 shard(s) failed" in captured.err and "part-9.jsonl:2: duplicate id 'x'" in captured.err
    assert "embedded 18 documents from 4 shard(s)" in captured.out and "engine ray, 2 actor(s) x 1 CPU" in captured.out
    ids, vectors = read_embeddings(out)
    assert ids == local_reference[0]
    np.testing.assert_allclose(vectors, local_reference[1], atol=1e-6)

    state = file_state(out)
    (folder / "part-9.jsonl").write_text('{"id": "x", "text": "the cat"}\n{"id": "y", "text": "a dog"}\n')
    assert main(argv) == 0
    out_text = capsys.readouterr().out
    assert "embedded 2 documents from 1 shard(s)" in out_text and "4 shard(s) already done, skipped" in out_text
    assert {k: v for k, v in file_state(out).items() if k != "part-9.parquet"} == state
    assert read_embeddings(out / "part-9.parquet")[0] == ["x", "y"]


# ----------------------------------------------------------------------------- the CLI without Ray
@pytest.mark.slow
def test_cli_folder_local_engine_and_flag_errors(tiny_models, corpus, local_reference, tmp_path, capsys):
    model = ["--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", str(MAX_LENGTH), *FLOAT32]
    out = tmp_path / "out"
    assert main(["embed", str(corpus[0]), "-o", str(out), *model]) == 0
    captured = capsys.readouterr().out
    assert "embedded 18 documents from 4 shard(s)" in captured and "engine local" in captured
    assert "truncated: 2 document(s) exceeded --max-length 128 tokens" in captured
    ids, vectors = read_embeddings(out)
    assert ids == local_reference[0]
    np.testing.assert_allclose(vectors, local_reference[1], atol=1e-6)
    assert main(["embed", str(corpus[0]), "-o", str(out), *model]) == 0
    assert "nothing to embed: all 4 shard(s)" in capsys.readouterr().out

    txt = tmp_path / "docs.txt"
    txt.write_text("the cat\n")
    assert main(["embed", str(txt), "-o", str(tmp_path / "v.npy"), "--actors", "2", *model]) == 2
    assert "--actors only apply with --engine ray" in capsys.readouterr().err
    assert main(["embed", str(corpus[0]), "-o", str(tmp_path / "v.npy"), *model]) == 2
    assert "a corpus is written to a folder" in capsys.readouterr().err


def test_cli_ray_engine_without_ray_installed_says_what_to_install(tiny_models, corpus, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(ray_engine_module, "RAY_IMPORT_ERROR", ImportError("No module named 'ray'"))
    code = main(["embed", str(corpus[0]), "-o", str(tmp_path / "out"), "--engine", "ray",
                 "--model", str(tiny_models["bert"])])
    assert code == 2
    assert "--engine ray needs ray[data] (No module named 'ray'): pip install 'longembed[ray]'" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


BLOCK_RAY = """
import json, sys
sys.modules["ray"] = sys.modules["pyarrow"] = None  # as if the ray extra were not installed
from longembed.cli.main import main
print(json.dumps([main(argv) for argv in json.loads(sys.argv[1])]))
"""


@pytest.mark.slow
def test_core_install_embeds_a_file_without_ray_or_pyarrow(tiny_models, tmp_path):
    """Without the ``ray`` extra, ``longembed embed FILE.txt`` works and a corpus says what to install."""
    txt = tmp_path / "docs.txt"
    txt.write_text("the cat\n")
    base = ["embed", str(txt), "--model", str(tiny_models["bert"])]
    runs = [[*base, "-o", str(tmp_path / "v.npy")], [*base, "-o", str(tmp_path / "out"), "--engine", "ray"]]
    done = subprocess.run([sys.executable, "-c", BLOCK_RAY, json.dumps(runs)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert json.loads(done.stdout.splitlines()[-1]) == [0, 2], done.stderr
    assert np.load(tmp_path / "v.npy").shape == (1, 32)
    assert "pip install 'longembed[ray]'" in done.stderr and not (tmp_path / "out").exists()
