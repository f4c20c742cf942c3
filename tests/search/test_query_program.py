"""The query program a build saves with a dense index (issue 53, item 3): its vectors are the index's query
encoder's, a search uses it only when its manifest is the index's, and a longer input goes the slow way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import LO, build_tiny, words

from longembed.retrieval.strategy import Strategy
from longembed.search.build import build_index
from longembed.search.cold_query import MANIFEST, PROGRAM_DIR, QueryProgram, load_query_program
from longembed.search.index import SearchIndex
from longembed.search.query_program import PROBES
from longembed.search.sources import Document
from longembed.search.strategy_encoder import load_strategy_encoder
from longembed.search.version_files import saved_version

#: queries of 1 to about Lo tokens
QUERIES = ["a", "harvest apple", words(8, 1), words(20, 2), words(LO - 4, 3)]


def build(tmp_path: Path, method: str = "truncate", max_length: int | None = None) -> tuple[Path, Strategy]:
    model = build_tiny("bert", tmp_path / "bert")
    docs = [Document(f"d{i}.txt", f"d{i}.txt", words(30 + 5 * i, i) + (" harvest apple" if i == 2 else ""))
            for i in range(6)]
    strategy = Strategy(str(model), method, max_length, granularity="chunks", chunking="tokens:16", late=False)
    build_index(tmp_path / "index", docs, strategy, show_progress=False, log=None)
    return tmp_path / "index", strategy


def version_folder(index: Path) -> Path:
    saved = saved_version(index)
    assert saved is not None
    return saved[1]


@pytest.mark.parametrize(("method", "max_length"), [("truncate", None), ("pi", 2 * LO)])
def test_the_saved_program_embeds_queries_as_the_index_encoder_does(tmp_path: Path, method: str,
                                                                     max_length: int | None) -> None:
    index, strategy = build(tmp_path, method, max_length)
    opened = SearchIndex(index)
    program = load_query_program(version_folder(index), opened.metadata)
    assert program is not None
    encoder = load_strategy_encoder(strategy)
    prompt = opened.prompts["query"] or ""
    got = program.encode(QUERIES, prompt)
    want = encoder.encode(QUERIES, prompt=prompt, normalize_embeddings=True)
    assert got is not None and got.shape == want.shape
    assert np.abs(got - want).max() < 1e-5
    assert (got * want).sum(axis=1).min() > 1 - 1e-5
    assert program.encode([words(3 * LO, 4)], prompt) is None  # past Lo: the full encoder's


def test_a_search_uses_the_program_and_ranks_as_the_encoder_does(tmp_path: Path) -> None:
    index, strategy = build(tmp_path)
    fast = SearchIndex(index)
    slow = SearchIndex(index, encoder=load_strategy_encoder(strategy))
    assert fast._program is not None and fast._encoder is None and slow._program is None
    for query in QUERIES:
        a, b = fast.search(query, k=4, passages="chunk"), slow.search(query, k=4, passages="chunk")
        assert [r.id for r in a.results] == [r.id for r in b.results]
        assert np.allclose([r.score for r in a.results], [r.score for r in b.results], atol=1e-5)
    assert fast._encoder is None  # every query was the program's
    long = fast.search(words(3 * LO, 5), k=4, passages="chunk")  # past Lo: the encoder, loaded now
    assert fast._encoder is not None
    assert [r.id for r in long.results] == [r.id for r in slow.search(words(3 * LO, 5), k=4, passages="chunk").results]


def test_a_program_whose_manifest_is_not_the_index_is_ignored(tmp_path: Path) -> None:
    index, _ = build(tmp_path)
    manifest_file = version_folder(index) / PROGRAM_DIR / MANIFEST
    manifest = json.loads(manifest_file.read_text())
    manifest["prompts"] = {**manifest["prompts"], "query": "another prompt: "}
    manifest_file.write_text(json.dumps(manifest))
    opened = SearchIndex(index)
    assert opened._program is None and opened._encoder is not None
    assert opened.search("harvest apple", k=2).results


def test_a_model_the_program_cannot_serve_is_said_in_one_line_and_the_index_still_searches(tmp_path: Path) -> None:
    model = build_tiny("nomic", tmp_path / "nomic")  # rotary: the method passes its tables to the attention
    docs = [Document(f"d{i}.txt", f"d{i}.txt", words(30, i)) for i in range(3)]
    said: list[str] = []
    build_index(tmp_path / "index", docs, Strategy(str(model), "truncate", None, granularity="chunks",
                                                   chunking="tokens:16", late=False), show_progress=False, log=said.append)
    notes = [line for line in said if "no query program saved" in line]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert not (version_folder(tmp_path / "index") / PROGRAM_DIR).exists()
    assert SearchIndex(tmp_path / "index").search(words(3, 1), k=2).results


def test_the_build_checks_each_probe_once_alone_and_reads_says_what_encode_embeds(
        tmp_path: Path, monkeypatch) -> None:
    """The probe check ran the program once per probe only to learn whether it read it, then again to compare;
    the tokenizer says what it reads now, and each probe runs once, alone (as a search embeds its query)."""
    calls: list[int] = []
    real = QueryProgram.encode

    def counted(self, texts, prompt):
        calls.append(len(texts))
        return real(self, texts, prompt)

    monkeypatch.setattr(QueryProgram, "encode", counted)
    index, _ = build(tmp_path)
    program = load_query_program(version_folder(index), SearchIndex(index).metadata)
    assert program is not None and calls == [1] * len(PROBES)  # the tiny model's prompts are both ""
    for text in ("a", words(LO - 4, 3), words(3 * LO, 4)):
        assert program.reads(text, "") == (real(program, [text], "") is not None)
    assert not program.reads(words(3 * LO, 4), "")


def test_a_bfloat16_index_saves_its_program_which_embeds_a_query_as_the_encoder_does(tmp_path: Path) -> None:
    # bfloat16 padding moves a vector by ~4e-4: the check compared padded batches and refused every bfloat16
    # program (a cold search then loaded transformers); alone, the program is the encoder's to 1e-8
    model = build_tiny("bert", tmp_path / "bert")
    docs = [Document(f"d{i}.txt", f"d{i}.txt", words(30 + 5 * i, i)) for i in range(4)]
    strategy = Strategy(str(model), granularity="chunks", chunking="tokens:16", late=False,
                        encoder_options={"dtype": "bfloat16"})
    build_index(tmp_path / "index", docs, strategy, show_progress=False, log=None)
    opened = SearchIndex(tmp_path / "index")
    program = load_query_program(version_folder(tmp_path / "index"), opened.metadata)
    assert program is not None
    encoder = load_strategy_encoder(strategy)
    for query in QUERIES:
        want = encoder.encode([query], prompt="", normalize_embeddings=True)
        assert np.abs(program.encode([query], "") - want).max() < 1e-5
