"""The SQuAD haystack with SQuAD's questions (``benchmarks/squad_task.py``): every answer span of the built
task lies where a naive ``str.find`` of its paragraph in the built document says, at SQuAD's offset."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import load_benchmark_script, require_data

from longembed.tasks import TaskDirTask

PARAGRAPHS = {
    "Rivers/and lakes": ["The Rhine flows north. It reaches the sea in 1,233 kilometres.",
                         "Lakes are still. The Rhine feeds Lake Constance, which is still."],
    "Birds": ["Owls hunt at night. Owls hunt mice.", "Swifts sleep while flying."],
}
QUESTIONS = {  # (paragraph, question, answer, answer_start in the paragraph, impossible)
    "Rivers/and lakes": [(0, "Which way does the Rhine flow?", "north", 16, False),  # asked in Birds, first by title
                         (0, "How long is it to the sea?", "1,233 kilometres", 45, False),
                         (1, "Which lake does the Rhine feed?", "Lake Constance", 33, False),
                         (1, "Is the lake still?", "still", 58, False),  # "still" is in the paragraph twice: the offset pins it
                         (1, "Which river is green?", "", 0, True)],  # unanswerable: left out
    "Birds": [(0, "When do owls hunt?", "at night", 10, False),
              (1, "which way does the rhine  flow?", "flying", 19, False)],  # kept: Birds is written first
}


def squad_like() -> dict:
    data = []
    for title, paragraphs in PARAGRAPHS.items():
        qas = [[] for _ in paragraphs]
        for n, (p, question, answer, start, impossible) in enumerate(QUESTIONS[title]):
            assert impossible or paragraphs[p][start:start + len(answer)] == answer  # the fixture is right
            qas[p].append({"id": f"{title[:3]}{n}", "question": question, "is_impossible": impossible,
                           "answers": [] if impossible else [{"text": answer, "answer_start": start}]})
        data.append({"title": title, "paragraphs": [{"context": c, "qas": q} for c, q in zip(paragraphs, qas,
                                                                                            strict=True)]})
    return {"version": "v2.0", "data": data}


def test_spans_are_squads_offsets_in_the_paragraph_found_naively_in_the_built_document(tmp_path: Path) -> None:
    squad_task = load_benchmark_script("squad_task")
    (tmp_path / "dev.json").write_text(json.dumps(squad_like()), encoding="utf-8")
    assert squad_task.main(["--data", str(tmp_path / "dev.json"), "--out", str(tmp_path / "out")]) == 0
    data = TaskDirTask(tmp_path / "out" / "task").load()
    assert set(data.corpus) == {"Birds.txt", "Rivers_and_lakes.txt"}
    expected = {}
    for title, questions in QUESTIONS.items():
        document = data.corpus[squad_task.document_name(title)]
        for n, (p, _, answer, start, impossible) in enumerate(questions):
            if impossible or (title, n) == ("Rivers/and lakes", 0):  # unanswerable, or asked again
                continue
            at = document.find(PARAGRAPHS[title][p])  # naive: where the paragraph is in the built document
            assert at >= 0
            expected[f"{title[:3]}{n}"] = {squad_task.document_name(title): [(at + start, at + start + len(answer))]}
    assert data.answers == expected
    for qid, by_doc in data.answers.items():
        ((doc_id, [(s, e)]),) = by_doc.items()
        assert data.corpus[doc_id][s:e] == next(a for t, qs in QUESTIONS.items() for n, (_, _, a, _, _) in enumerate(qs)
                                                if f"{t[:3]}{n}" == qid)
    assert set(data.queries) == set(expected)


def test_the_article_is_its_paragraphs_joined_by_a_blank_line() -> None:
    squad_task = load_benchmark_script("squad_task")
    article = squad_like()["data"][0]
    text, offsets = squad_task.article_document(article)
    assert text == "\n\n".join(PARAGRAPHS["Rivers/and lakes"])
    assert offsets == [0, len(PARAGRAPHS["Rivers/and lakes"][0]) + 2]


def test_the_real_squad_dev_builds_with_every_answer_located(tmp_path: Path) -> None:
    squad_file = require_data("squad") / "dev-v2.0.json"
    squad_task = load_benchmark_script("squad_task")
    assert squad_task.main(["--data", str(squad_file), "--out", str(tmp_path / "out"), "--articles", "3"]) == 0
    data = TaskDirTask(tmp_path / "out" / "task").load()
    squad = json.loads(squad_file.read_text(encoding="utf-8"))
    for article in sorted(squad["data"], key=lambda a: a["title"])[:3]:
        document = data.corpus[squad_task.document_name(article["title"])]
        for paragraph in article["paragraphs"]:
            at = document.find(paragraph["context"])
            for qa in paragraph["qas"]:
                if qa["id"] in data.answers:
                    answer = qa["answers"][0]
                    start = at + answer["answer_start"]
                    assert data.answers[qa["id"]] == {squad_task.document_name(article["title"]):
                                                      [(start, start + len(answer["text"]))]}
    assert len(data.answers) == len(data.queries) > 300
