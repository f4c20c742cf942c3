"""``index`` reads the whole of every document by default (naive chunks), and a strategy that truncates
says how many documents it cut and by how many tokens: in the build's summary, ``INDEX/truncated.json``
and the index's facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_tiny, words
from transformers import AutoTokenizer

from longembed.cli.index import chosen_strategy
from longembed.cli.main import build_parser, given_flags
from longembed.retrieval.strategy import Strategy
from longembed.search import open_index, truncation
from longembed.search.build import build_index
from longembed.search.sources import Document
from longembed.search.truncation import TRUNCATED_FILE, read_truncated, tokens_after


def index_strategy(*flags: str) -> Strategy:
    argv = ["index", "docs/", "--index", "my-index", *flags]
    args = build_parser(argv).parse_args(argv)
    args.given_flags = given_flags(argv)
    return chosen_strategy(args)[1]


def test_the_default_strategy_reads_every_token_in_naive_chunks() -> None:
    strategy = index_strategy()
    assert strategy.chunked and not strategy.late and strategy.chunking == "tokens:256"
    assert index_strategy("--late").late and index_strategy("--chunking", "tokens:128").chunking == "tokens:128"
    assert not index_strategy("--granularity", "document").chunked  # truncation when asked for
    assert not index_strategy("--method", "pi", "--max-length", "4096").chunked  # one long window
    assert index_strategy("--model", "bm25").lexical_only


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny("bert", tmp_path_factory.mktemp("tiny") / "bert")


def test_a_truncating_build_says_what_it_cut(model: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = {"short": words(5, 1), "long": words(200, 2), "longer": words(400, 3)}
    docs = [Document(i, f"{i}.txt", t) for i, t in texts.items()]
    report = build_index(tmp_path / "index", docs, Strategy(str(model)), show_progress=False, log=None)
    window = report.window
    assert window is not None
    read = window - tokenizer.num_special_tokens_to_add()
    expected = {i: len(tokenizer(t, add_special_tokens=False)["input_ids"]) - read for i, t in texts.items() if i != "short"}
    assert all(n > 0 for n in expected.values())
    recorded = json.loads((tmp_path / "index" / TRUNCATED_FILE).read_text())
    assert recorded == expected
    assert report.truncated == {"documents": 2, "tokens": sum(expected.values()), "largest": expected["longer"]}
    assert (f"2 document(s) cut at the model's {window} tokens: {sum(expected.values()):,} tokens not read "
            f"(the largest cut {expected['longer']:,})") in report.summary()
    assert open_index(tmp_path / "index").facts()["truncated"] == report.truncated
    again = build_index(tmp_path / "index", docs[:2], Strategy(str(model)), show_progress=False, log=None)
    assert again.truncated == {"documents": 1, "tokens": expected["long"], "largest": expected["long"]}
    chunked = build_index(tmp_path / "chunks", docs, Strategy(str(model), granularity="chunks", late=False,
                                                                chunking="tokens:16"), show_progress=False, log=None)
    assert chunked.truncated["documents"] == 0 and "cut" not in chunked.summary()


def test_tokens_after_counts_a_long_rest_in_blocks_as_a_whole() -> None:
    class Words:  # one token per word
        def __call__(self, text: str, **_: object) -> dict:
            return {"input_ids": text.split()}

    text = " ".join(f"w{i}" for i in range(60_000))
    assert tokens_after(Words(), text, 0) == 60_000
    assert tokens_after(Words(), text, len("w0 w1 ")) == 59_998


def test_a_fast_tokenizer_counts_many_blocks_in_batches_as_a_whole(model: Path, monkeypatch) -> None:
    # the Rust batch path (several calls of several blocks, the last call short) against one whole-text count
    tokenizer = AutoTokenizer.from_pretrained(model)
    assert hasattr(tokenizer.backend_tokenizer, "encode_batch_fast")
    monkeypatch.setattr(truncation, "COUNT_BLOCK_CHARS", 60)
    monkeypatch.setattr(truncation, "COUNT_BLOCKS_AT_ONCE", 3)
    text = words(900, 7)
    start = text.index(" ", 100) + 1
    assert len(text) - start > 60 * 3 * 4
    whole = len(tokenizer(text[start:], add_special_tokens=False)["input_ids"])
    assert tokens_after(tokenizer, text, start) == whole


def test_a_damaged_truncation_record_is_one_warning_and_read_as_unknown(tmp_path: Path) -> None:
    (tmp_path / TRUNCATED_FILE).write_bytes(b'\x84{"d1": 3')
    with pytest.warns(UserWarning, match="damaged"):
        assert read_truncated(tmp_path) == {}
