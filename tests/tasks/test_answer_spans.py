"""Where the answer is: the answer spans tasks carry beside their qrels (``RetrievalData.answers``)."""

from __future__ import annotations

import re

import pytest

from longembed.errors import UserError
from longembed.tasks import hotpotqa as hotpotqa_mod
from longembed.tasks import needle as needle_mod
from longembed.tasks import passkey as passkey_mod
from longembed.tasks.base import RetrievalData
from longembed.tasks.qmsum import meeting_document, turn_spans


def test_needle_answers_are_the_planted_sentence() -> None:
    haystack = ". ".join(f"Sentence {i} of the haystack has seven words" for i in range(3000)) + "."
    needles = tuple(needle_mod.Needle(f"Fact number {i} says zebra{i} likes tea.", f"What does zebra{i} like?")
                    for i in range(100))
    data = needle_mod.generate(1024, haystack, needles, seed=3)
    assert data.answers is not None and set(data.answers) == set(data.queries)
    for qid, question in data.queries.items():
        i = int(re.search(r"zebra(\d+)", question).group(1))
        ((doc_id, [(start, end)]),) = data.answers[qid].items()
        assert data.qrels[qid] == {doc_id: 1} and data.corpus[doc_id][start:end] == needles[i].fact


def test_qmsum_turn_ranges_become_character_spans_of_the_transcript() -> None:
    meeting = {"meeting_transcripts": [{"speaker": "A", "content": "Hello all ."},
                                       {"speaker": "B", "content": "The budget is ten euros ."},
                                       {"speaker": "A", "content": "Agreed ."}]}
    text = meeting_document(meeting)
    ((start, end),) = turn_spans(meeting, [["1", "2"]], "m")
    assert text[start:end] == "B: The budget is ten euros .\nA: Agreed ."
    with pytest.raises(UserError, match="outside 0..2"):
        turn_spans(meeting, [["1", "3"]], "m")
    with pytest.raises(UserError, match="not a pair of turn numbers"):
        turn_spans(meeting, [["x"]], "m")


def _data(**answers: list[tuple[int, int]]) -> RetrievalData:
    return RetrievalData(corpus={"d": "some text here", "e": "other"}, queries={"q": "text"},
                         qrels={"q": {"d": 1}}, answers={"q": answers} if answers else None)


def test_answers_are_checked_and_do_not_change_the_fingerprint() -> None:
    assert _data(d=[(5, 9)]).validate().fingerprint() == _data().validate().fingerprint()
    with pytest.raises(UserError, match="not one of its relevant documents"):
        _data(e=[(0, 2)]).validate()
    with pytest.raises(UserError, match="spans"):
        _data(d=[(10, 40)]).validate()
    with pytest.raises(UserError, match="spans"):
        _data(d=[(4, 5)]).validate()  # only a space


def test_passkey_answers_are_the_key_sentence_line() -> None:
    data = passkey_mod.PasskeyTask().load(None, 256)
    assert data.answers is not None and set(data.answers) == set(data.queries)
    for qid, by_doc in data.answers.items():
        ((doc_id, [(start, end)]),) = by_doc.items()
        name = data.queries[qid].removeprefix("What is the pass key for ").removesuffix("?")
        assert data.corpus[doc_id][start:end].startswith(f"{name}'s pass key is ")
        assert data.corpus[doc_id][start:end].endswith(f"is the pass key for {name}.")


def test_hotpotqa_answers_are_the_supporting_sentences() -> None:
    example = {"context": [["Alpha", [" Alpha is a town.", " It has a river."]], ["Beta", ["Beta is a dog.", " Beta barks."]]],
               "supporting_facts": [["Alpha", 1], ["Beta", 0]]}
    passages = [hotpotqa_mod._passage("Gamma", ["Filler here."]),  # noqa: SLF001 - the task's own formatting
                hotpotqa_mod._passage("Beta", example["context"][1][1]),  # noqa: SLF001
                hotpotqa_mod._passage("Alpha", example["context"][0][1])]  # noqa: SLF001
    text = "\n".join(hotpotqa_mod._format(n, t, x) for n, (t, x) in enumerate(passages, start=1))  # noqa: SLF001
    spans = hotpotqa_mod.supporting_spans(example, passages)
    assert [text[s:e] for s, e in spans] == ["Beta is a dog.", "It has a river."]
