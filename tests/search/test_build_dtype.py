"""The dtype of an index (issue 53, item 4): ``auto`` checked on a sample of the user's documents, recorded in
the metadata, followed by later builds and by the query encoder; an explicit other dtype is refused."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import lancedb
import pytest
import torch
from conftest import build_tiny, words

import longembed.precision as precision
import longembed.search.build as build_module
import longembed.search.build_precision as build_precision
from longembed.cli.main import main
from longembed.cli.serve import check_model_flags
from longembed.errors import UserError
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index
from longembed.search.build import build_index
from longembed.search.build_precision import sample_documents, with_dtype
from longembed.search.sources import Document
from longembed.search.store import METADATA_KEY
from longembed.search.strategy_encoder import recorded_dtype


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def strategy(model: Path, dtype: str | None = "auto") -> Strategy:
    options = {} if dtype is None else {"dtype": dtype}
    return Strategy(str(model), "pi", 128, granularity="chunks", chunking="tokens:16", late=False,
                    encoder_options=options)


def documents(n: int) -> list[Document]:
    return [Document(f"doc{i:04d}", f"doc{i:04d}.txt", words(60 + i % 7, i)) for i in range(n)]


def metadata(index: Path) -> dict:
    table = lancedb.connect(str(index)).open_table("chunks")
    return json.loads(table.schema.metadata[METADATA_KEY])


def native_bf16(monkeypatch: pytest.MonkeyPatch, instructions: str | None = "AMX") -> None:
    monkeypatch.setattr(precision, "cpu_bf16_support", lambda: instructions)


def test_auto_builds_in_bfloat16_after_the_sample_agrees_and_the_query_encoder_follows(model, tmp_path,
                                                                                        monkeypatch) -> None:
    native_bf16(monkeypatch)
    said: list[str] = []
    report = build_index(tmp_path / "index", documents(40), strategy(model), device="cpu", show_progress=False,
                         log=said.append)
    recorded = metadata(tmp_path / "index")
    assert recorded["dtype"] == "bfloat16" and recorded["config"]["encoder_options"] == {"dtype": "bfloat16"}
    check = recorded["dtype_check"]
    assert check["dtype"] == "bfloat16" and 0.999 <= check["min_cosine"] < 1.0
    assert check["vectors"] > 32  # 32 of the 40 documents, several chunks each
    assert any("dtype bfloat16 (auto: this CPU computes it natively, AMX); checked: " in line for line in said)
    assert "; dtype bfloat16 (auto" in report.summary()
    native_bf16(monkeypatch, None)  # the index decides the query encoder's dtype, not this machine
    index = open_index(tmp_path / "index", device="cpu")
    assert index.encoder is not None and index.encoder.config.dtype == "bfloat16"
    assert next(index.encoder.model.parameters()).dtype == torch.bfloat16
    assert index.facts()["dtype"] == "bfloat16"
    assert index.search("the apple harvest", k=3).results  # queries embedded as the documents were


def test_the_sample_disagreeing_falls_back_to_float32_and_says_why(model, tmp_path, monkeypatch) -> None:
    native_bf16(monkeypatch)
    compared: list[tuple] = []

    def disagreeing(reference, other):  # a model whose bfloat16 vectors drift: the comparison says 0.98
        compared.append((reference.shape, other.shape, (reference != other).any()))
        return 0.98

    monkeypatch.setattr(build_precision, "min_cosine", disagreeing)
    said: list[str] = []
    report = build_index(tmp_path / "index", documents(5), strategy(model), device="cpu", show_progress=False,
                         log=said.append)
    assert len(compared) == 1 and compared[0][0] == compared[0][1] and compared[0][2]  # both ways, really
    recorded = metadata(tmp_path / "index")
    assert recorded["dtype"] == "float32" and recorded["config"]["encoder_options"] == {}
    assert recorded["dtype_check"]["min_cosine"] == 0.98
    line = next(line for line in said if "dtype" in line)
    assert "float32: bfloat16 was checked and fell below cosine 0.999 of float32" in line
    assert "of 5 of your documents (at most 6,553 characters of each), least cosine to float32 0.98000" in line
    assert "\n" not in line
    assert "dtype float32: bfloat16 was checked" in report.summary()
    assert open_index(tmp_path / "index", device="cpu").encoder.config.dtype == "float32"


def test_auto_on_this_cpu_without_bfloat16_is_float32_without_a_check(model, tmp_path, monkeypatch) -> None:
    native_bf16(monkeypatch, None)
    monkeypatch.setattr(build_precision, "compare_on_sample", None)  # never called
    report = build_index(tmp_path / "index", documents(3), strategy(model), device="cpu", show_progress=False, log=None)
    assert metadata(tmp_path / "index")["dtype"] == "float32"
    assert "dtype float32 (auto: this CPU has no native bfloat16 arithmetic" in report.summary()


def test_an_index_built_before_the_dtype_was_recorded_is_float32_and_auto_follows_it(model, tmp_path,
                                                                                    monkeypatch) -> None:
    index = tmp_path / "index"
    current = build_module.index_metadata
    with monkeypatch.context() as before:  # the metadata an earlier longembed wrote: no dtype
        before.setattr(build_module, "index_metadata", lambda *args, **kwargs: {
            key: value for key, value in current(*args, **kwargs).items() if key not in ("dtype", "dtype_check")})
        build_index(index, documents(3), strategy(model, None), device="cpu", show_progress=False, log=None)
    assert "dtype" not in metadata(index) and recorded_dtype(metadata(index)) == "float32"
    assert recorded_dtype({"config": {"encoder_options": {"dtype": "bfloat16"}}}) == "bfloat16"
    native_bf16(monkeypatch)  # this machine would choose bfloat16 for a new index, not for this one
    opened = open_index(index, device="cpu")
    assert opened.facts()["dtype"] == "float32" and opened.encoder.config.dtype == "float32"
    report = build_index(index, documents(4), strategy(model), device="cpu", show_progress=False, log=None)
    assert report.plan.counts() == {"added": 1, "changed": 0, "removed": 0, "unchanged": 3}
    assert "dtype float32 (auto: the index's own)" in report.summary()
    assert recorded_dtype(metadata(index)) == "float32"  # the metadata is written when the table is made


def test_an_explicit_other_dtype_is_refused_unless_rebuild(model, tmp_path) -> None:
    index = tmp_path / "index"
    build_index(index, documents(3), strategy(model, "float32"), device="cpu", show_progress=False, log=None)
    with pytest.raises(UserError, match=r"built with another strategy.*'dtype': 'bfloat16'.*--rebuild"):
        build_index(index, documents(3), strategy(model, "bfloat16"), device="cpu", show_progress=False, log=None)
    build_index(index, documents(3), strategy(model, None), device="cpu", show_progress=False, log=None)  # float32 too
    report = build_index(index, documents(3), strategy(model, "bfloat16"), rebuild=True, device="cpu",
                         show_progress=False, log=None)
    assert "dtype bfloat16 (asked for)" in report.summary() and metadata(index)["dtype"] == "bfloat16"


def test_the_sample_is_seeded_and_float32_is_spelled_as_no_option(model) -> None:
    docs = documents(100)
    assert sample_documents(docs) == sample_documents(docs) and len(sample_documents(docs)) == 32
    assert [d.id for d in sample_documents(docs)] == sorted(d.id for d in sample_documents(docs))
    assert sample_documents(docs[:5]) == docs[:5]


def test_the_sample_is_bounded_in_characters_whatever_the_documents_length() -> None:
    """32 documents of 20,000 characters were 640,000 characters embedded twice (the check cost more than the
    build's own encoding); now each is cut to its share of SAMPLE_CHARS, a prefix of its text."""
    long_documents = [Document(f"d{i}", f"d{i}.txt", words(4000, i)) for i in range(50)]
    sample = sample_documents(long_documents)
    assert len(sample) == 32 and sum(len(d.text) for d in sample) <= build_precision.SAMPLE_CHARS
    by_id = {d.id: d.text for d in long_documents}
    assert all(by_id[d.id].startswith(d.text) and len(d.text) == build_precision.SAMPLE_CHARS // 32 for d in sample)
    (one,) = sample_documents(long_documents[:1])  # a lone document is read further: the whole budget
    assert len(one.text) == min(len(by_id["d0"]), build_precision.SAMPLE_CHARS)
    assert with_dtype(strategy(model, "bfloat16"), "float32").encoder_options == {}
    assert with_dtype(strategy(model, None), "bfloat16").encoder_options == {"dtype": "bfloat16"}


def test_the_index_command_defaults_to_auto(model, tmp_path, monkeypatch, capsys) -> None:
    native_bf16(monkeypatch)
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"d{i}.txt").write_text(words(50, i), encoding="utf-8")
    assert main(["index", str(folder), "--index", str(tmp_path / "index"), "--model", str(model), "--method", "pi",
                 "--max-length", "128", "--device", "cpu"]) == 0
    assert "dtype bfloat16 (auto: this CPU computes it natively, AMX); checked:" in capsys.readouterr().out
    assert metadata(tmp_path / "index")["dtype"] == "bfloat16"


def serve_args(**flags) -> argparse.Namespace:
    return argparse.Namespace(index="my-index", model=None, method=None, max_length=None, **flags)


def test_serve_index_takes_its_dtype_or_auto_and_refuses_another() -> None:
    facts = {"model": "bert", "method": "pi", "max_length": 128, "dtype": "bfloat16"}
    check_model_flags(serve_args(), facts)
    check_model_flags(serve_args(dtype="auto"), facts)
    check_model_flags(serve_args(dtype="bfloat16"), facts)
    with pytest.raises(UserError, match="--index my-index holds bfloat16 vectors: its queries are embedded in "
                                        "bfloat16 too; leave --dtype float32 out"):
        check_model_flags(serve_args(dtype="float32"), facts)
