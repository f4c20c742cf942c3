"""Bad UTF-8 is reported at the line that holds it, with its byte offset (issue 23).

Python's text mode decodes 8 KB blocks ahead of the lines it hands out, so counting lines read named the
wrong line (the probe: line 150 reported as 113, 146 and 93).  Each reader is given a file of ~200 lines
of ~160 bytes whose only bad byte is on line 150, far from the start of an 8 KB block.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from longembed.cli.main import main
from longembed.corpus.shards import Shard, ShardReader
from longembed.search.sources import read_sources
from longembed.tasks.base import iter_jsonl
from longembed.tasks.task_dir_builder import read_questions
from longembed.textfiles import jsonl_objects, jsonl_records, read_utf8, utf8_lines
from longembed.training.data import read_pairs_jsonl

BAD_LINE = 150


def lines_with_a_bad_byte(record: dict, n: int = 200, bad_line: int = BAD_LINE) -> tuple[bytes, int]:
    """``n`` JSON lines (``record`` with its "id", if any, numbered), the field name "pad" on line
    ``bad_line`` spelt with a Latin-1 byte; (the bytes, the bad byte's offset)."""
    rows = [{**record, **({"id": f"{record['id']}{i}"} if "id" in record else {}), "pad": "x" * 100}
            for i in range(1, n + 1)]
    lines = [json.dumps(row).encode() + b"\n" for row in rows]
    lines[bad_line - 1] = lines[bad_line - 1].replace(b"pad", b"p\xe0d", 1)
    offset = sum(len(line) for line in lines[: bad_line - 1]) + lines[bad_line - 1].index(b"\xe0")
    assert offset > 8192 and offset % 8192 > 1000  # inside a later decode block, not at its start
    return b"".join(lines), offset


def message(path: Path, offset: int, line: int = BAD_LINE) -> str:
    """The error's text, as a regular expression."""
    return rf"{path.name}:{line}: not UTF-8 text \(byte 0xe0 at byte offset {offset} of the file\)"


def test_utf8_lines_names_the_line_and_byte_of_plain_and_gzipped_files(tmp_path) -> None:
    data, offset = lines_with_a_bad_byte({"text": "t"})
    plain = tmp_path / "data.jsonl"
    plain.write_bytes(data)
    with pytest.raises(ValueError, match=message(plain, offset)):
        list(utf8_lines(plain))
    packed = tmp_path / "data.jsonl.gz"
    packed.write_bytes(gzip.compress(data))
    with pytest.raises(ValueError, match=message(packed, offset)):
        list(utf8_lines(packed))
    good = tmp_path / "good.txt"
    good.write_bytes(b"one\r\ntwo\n\nthree")
    assert list(utf8_lines(good)) == [(1, "one\r\n"), (2, "two\n"), (3, "\n"), (4, "three")]


def test_tune_train_file_names_the_true_line(tiny_models, tmp_path, capsys) -> None:
    """What ``longembed tune --train-file`` reads, through the library and the command."""
    data, offset = lines_with_a_bad_byte({"query": "q", "positive": "p"})
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=message(path, offset)):
        read_pairs_jsonl(path)
    code = main(["tune", "--model", str(tiny_models["bert"]), "--method", "pi", "--max-length", "128",
                 "--output", str(tmp_path / "tuned"), "--train-file", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"pairs.jsonl:{BAD_LINE}: not UTF-8 text (byte 0xe0 at byte offset {offset} of the file)" in err


def test_task_jsonl_names_the_true_line(tmp_path) -> None:
    data, offset = lines_with_a_bad_byte({"text": "t"})
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(data))
    with pytest.raises(ValueError, match=message(path, offset)):
        list(iter_jsonl(path))


@pytest.mark.parametrize("suffix", [".jsonl", ".txt"])
def test_corpus_shard_names_the_true_line(tmp_path, suffix) -> None:
    data, offset = lines_with_a_bad_byte({"id": "doc", "text": "t"})
    path = tmp_path / f"shard{suffix}"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=message(path, offset)):
        ShardReader(Shard(path, path.name)).count()


def test_txt_shard_counts_lines_as_its_ids_do(tmp_path) -> None:
    """A .txt shard numbers lines as str.splitlines does (a form feed breaks a line): so does its error."""
    path = tmp_path / "shard.txt"
    path.write_bytes(b"one\ntwo\x0cthree \xff\nfour\n")
    for unit in ("line", "file"):  # read whole, the error names the same line
        with pytest.raises(ValueError, match=r"shard.txt:3: not UTF-8 text \(byte 0xff at byte offset 14 of the file\)"):
            ShardReader(Shard(path, path.name), unit=unit).count()
    path.write_bytes(b"one\ntwo\x0cthree\nfour\n")
    assert [doc_id for doc_id, _ in ShardReader(Shard(path, path.name), unit="line").documents()] == [
        "shard:1", "shard:2", "shard:3", "shard:4"
    ]


def test_embed_txt_file_names_the_true_line(tiny_models, tmp_path, capsys) -> None:
    data, offset = lines_with_a_bad_byte({"text": "t"})
    path = tmp_path / "docs.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=message(path, offset)):
        read_utf8(path)
    code = main(["embed", str(path), "-o", str(tmp_path / "v.npy"), "--model", str(tiny_models["bert"])])
    err = capsys.readouterr().err
    assert code == 2 and f"docs.txt:{BAD_LINE}: not UTF-8 text (byte 0xe0 at byte offset {offset}" in err


def test_one_jsonl_reader_names_file_and_line_for_search_sources_and_task_questions(tmp_path) -> None:
    """The .jsonl reader ``longembed index`` and ``longembed task-dir`` share: blank lines skipped, every
    line that is not a JSON object named by file and line (all of them, or the first)."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a", "text": "one", "question": "q1?", "document": "a"}\n\n[1, 2]\n{"id": \n'
                    '{"id": "b", "text": "two", "question": "q2?", "document": "b"}\n')
    records = list(jsonl_records(path))
    assert [r.where for r in records] == [f"{path}:{n}" for n in (1, 3, 4, 5)]
    assert [r.record is not None for r in records] == [True, False, False, True]
    assert records[1].problem == f"{path}:3: expected a JSON object, got list"
    assert records[2].problem.startswith(f"{path}:4: not valid JSON (")
    with pytest.raises(ValueError, match=rf"^{path}:3: expected a JSON object, got list$"):
        list(jsonl_objects(path))
    with pytest.raises(ValueError, match=rf"^{path}:3: expected a JSON object, got list$"):
        read_sources([path])
    rows, problems = read_questions(path)
    assert [r.text for r in rows] == ["q1?", "q2?"]
    assert problems[:2] == [records[1].problem, records[2].problem]
