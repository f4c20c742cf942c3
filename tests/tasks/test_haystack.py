"""Tests of a user's haystack (longembed.tasks.haystack) and of passkey and needle built from it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from longembed.tasks import get_task
from longembed.tasks import needle as needle_mod
from longembed.tasks import passkey as passkey_mod
from longembed.tasks.base import word_budget
from longembed.tasks.haystack import Haystack, load_haystack, prefix_words

KEY_RE = re.compile(r"(\w+ \w+)'s pass key is (\d{5})\. Remember it\. \2 is the pass key for \1\.")


def contract(i: int, sentences: int) -> str:
    return "\n".join(f"Clause {i}-{j} binds the tenant to the lease terms." for j in range(sentences))


def write_folder(root: Path, sentences: int = 60) -> Path:
    """Two .txt files, a .jsonl of two documents in a subfolder, and a file that is not read."""
    (root / "b").mkdir(parents=True)
    (root / "z.txt").write_text(contract(1, sentences), encoding="utf-8")
    (root / "a.txt").write_text(contract(0, sentences), encoding="utf-8")
    rows = [{"text": contract(2, sentences), "id": "x"}, {"text": contract(3, sentences)}]
    (root / "b" / "more.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    (root / "notes.md").write_text("not a document", encoding="utf-8")
    return root


def test_a_folder_is_read_in_sorted_order_and_normalised(tmp_path: Path) -> None:
    haystack = load_haystack(write_folder(tmp_path / "docs"))
    # a.txt, b/more.jsonl (its two lines), z.txt; newlines -> spaces; split on ".", strip, join with ". "
    raw = " ".join([contract(0, 60), contract(2, 60), contract(3, 60), contract(1, 60)]).replace("\n", " ")
    expected = ". ".join(piece.strip() for piece in raw.split("."))
    assert haystack.text == expected
    assert haystack.text.startswith("Clause 0-0 binds the tenant to the lease terms. Clause 0-1 binds")
    assert haystack.documents == 4 and haystack.words == len(expected.split()) == 4 * 60 * 9
    assert haystack.sha256 == hashlib.sha256(expected.encode("utf-8")).hexdigest()
    assert haystack.skipped == ("notes.md",)
    assert haystack.describe() == {"path": str(tmp_path / "docs"), "documents": 4, "words": 2160,
                                   "sha256": haystack.sha256}


def test_bad_folders_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_haystack(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no documents"):
        load_haystack(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "docs.jsonl").write_text('{"text": "fine"}\n\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs.jsonl:3: expected a JSON object with a string field 'text'"):
        load_haystack(bad)
    (bad / "docs.jsonl").write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs.jsonl:2: not valid JSON"):
        load_haystack(bad)
    (bad / "docs.jsonl").unlink()
    (bad / "latin1.txt").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:1: not UTF-8"):
        load_haystack(bad)


def test_a_short_haystack_names_its_words_and_longest_length(tmp_path: Path) -> None:
    haystack = load_haystack(write_folder(tmp_path / "docs"))  # 2160 words: fills 2048 (1536 words), not 4096
    assert haystack.longest_length() == 2048
    assert haystack.covering(2048) == haystack.text
    for task in (get_task("passkey", haystack=haystack), get_task("needle", haystack=haystack)):
        with pytest.raises(ValueError, match="2160 words, fewer than the 3072 words of length 4096 .*longest length "
                                             "it can serve is 2048"):
            task.load(None, 4096)
    tiny = Haystack("x", "Too short.", 1, 2, "0")
    with pytest.raises(ValueError, match="it serves no length"):
        tiny.covering(256)


@pytest.mark.parametrize("queries", [50, 70])
def test_passkey_on_a_haystack(tmp_path: Path, queries: int) -> None:
    haystack = load_haystack(write_folder(tmp_path / "docs"))
    task = passkey_mod.PasskeyTask(queries_per_length=queries, haystack=tmp_path / "docs")
    data = task.load(None, 1024)
    prefix = prefix_words(haystack.text, word_budget(1024) - passkey_mod.KEY_WORDS)
    assert len(data.corpus) == 2 * queries and len(data.queries) == queries
    places = set()
    for text in data.corpus.values():
        assert len(text.split()) == word_budget(1024)
        lines = text.split("\n")
        (key_line,) = [i for i, line in enumerate(lines) if KEY_RE.fullmatch(line)]
        before, after = " ".join(lines[:key_line]), " ".join(lines[key_line + 1 :])
        assert " ".join(p for p in (before, after) if p) == prefix  # the shared prefix, key taken out
        assert after == "" or after.startswith("Clause ")  # at a sentence boundary
        places.add(len(before))
    assert len(places) > 20
    # the paper's 100 people and keys, document by document, are those without the haystack (drawn first)
    plain = passkey_mod.generate(1024, queries_per_length=queries)
    keys = [KEY_RE.search(t).group(0) for t in data.corpus.values()]
    assert keys[:100] == [KEY_RE.search(t).group(0) for t in plain.corpus.values()][:100]
    assert data == passkey_mod.generate(1024, queries_per_length=queries, haystack=haystack)


def test_needle_on_a_haystack_needs_no_data_dir(tmp_path: Path) -> None:
    haystack = load_haystack(write_folder(tmp_path / "docs"))
    task = needle_mod.NeedleTask(haystack=haystack, queries_per_length=60)
    data = task.load(None, 2048)
    needles = task.needles
    longest = max(len(n.fact.split()) for n in needles[:120])
    prefix = prefix_words(haystack.text, word_budget(2048) - longest)
    assert len(data.corpus) == 120 and len(data.queries) == 60
    for i, text in enumerate(data.corpus.values()):
        before, _, after = f"\n{text}\n".partition(f"\n{needles[i].fact}\n")
        assert " ".join(p for p in (before.strip(), after.strip()) if p) == prefix
    assert data == needle_mod.generate(2048, haystack, needles, queries_per_length=60)
