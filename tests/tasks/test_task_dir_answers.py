"""Answer quotes and offsets in a ``longembed task-dir`` questions file: located in the named document,
written as ``answers.jsonl``, read back by :class:`TaskDirTask`, and judged by eval's passage hit@1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from longembed.errors import UserError
from longembed.evaluation.runner import evaluate_model
from longembed.report.tables import results_summary
from longembed.retrieval.bm25 import BM25Model
from longembed.tasks import RetrievalData, TaskDirTask, write_task_dir
from longembed.tasks.answer_quotes import occurrences, quote_pattern
from longembed.tasks.task_dir_builder import TaskDirProblems, build_task_dir


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def filler(topic: str, n: int) -> list[str]:
    """``n`` sentences that share no word with the questions below (each names its topic and number)."""
    return [f"Sentence {i} of the {topic} report mentions ordinary matters only." for i in range(n)]


def manual(topic: str, sentences: dict[int, str], n: int = 40) -> str:
    """A document of ``n`` sentences in paragraphs of five, with ``sentences`` put at their positions."""
    lines = filler(topic, n)
    for i, sentence in sentences.items():
        lines[i] = sentence
    return "\n\n".join(" ".join(lines[p : p + 5]) for p in range(0, n, 5))


PUMP = "The zanzibar pump runs at eleven bar of pressure."
VALVE_QUESTION_WORDS = "The quokka valve is serviced with tangerine grease."
VALVE_ANSWER = "Grease is applied every ninety days."
DOCUMENTS = {
    "pump.txt": manual("pump", {22: PUMP}),
    # the question's words are in sentence 3; the answer it quotes is in sentence 31, far from them
    "valve.txt": manual("valve", {3: VALVE_QUESTION_WORDS, 31: VALVE_ANSWER}),
    "notes/boat.md": manual("boat", {12: "The marmalade boat sails on windy\nafternoons only."}),
}
QUESTIONS = [
    {"id": "pump", "question": "zanzibar pump pressure", "document": "pump.txt", "answer": PUMP},
    {"id": "valve", "question": "quokka valve tangerine grease", "document": "valve.txt", "answer": VALVE_ANSWER},
    # copied from a rendered page: the line break inside the sentence is a space in the quote
    {"id": "boat", "question": "when does the marmalade boat sail", "document": "notes/boat", "answer":
     "The marmalade boat sails on windy afternoons only."},
    {"id": "plain", "question": "ordinary matters of the pump report", "document": "pump.txt"},  # no answer given
]


def naive_span(text: str, sentence: str) -> tuple[int, int]:
    """The hand-located answer: where the sentence starts (written by hand, not by the code under test)."""
    start = text.index(sentence.split()[0] + " " + sentence.split()[1])
    return start, start + len(sentence)


def build(tmp_path: Path, questions: Path) -> Path:
    docs = tmp_path / "docs"
    for name, text in DOCUMENTS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    out = tmp_path / "task"
    build_task_dir(docs, questions, out)
    return out


def test_answer_quotes_become_spans_that_eval_judges_as_a_naive_reference_does(tmp_path: Path) -> None:
    folder = build(tmp_path, jsonl(tmp_path / "q.jsonl", QUESTIONS))
    data = TaskDirTask(folder).load()
    expected = {"pump": {"pump.txt": [naive_span(DOCUMENTS["pump.txt"], PUMP)]},
                "valve": {"valve.txt": [naive_span(DOCUMENTS["valve.txt"], VALVE_ANSWER)]},
                "boat": {"notes/boat.md": [naive_span(DOCUMENTS["notes/boat.md"], "The marmalade boat sails on windy "
                                                                                   "afternoons only.")]}}
    assert data.answers == expected  # "plain" gives no answer: it is judged, but has no span
    assert DOCUMENTS["notes/boat.md"][slice(*expected["boat"]["notes/boat.md"][0])].endswith("windy\nafternoons only.")
    written = [json.loads(line) for line in (folder / "answers.jsonl").read_text().splitlines()]
    assert sorted(row["qid"] for row in written) == ["boat", "pump", "valve"]

    run = evaluate_model(BM25Model(), tasks=[TaskDirTask(folder)], output_dir=tmp_path / "run", estimate=False,
                         show_progress=False, log=None)
    result = run.tasks["task"]
    # the naive reference: BM25 shows the window around the one sentence sharing the question's words, so
    # the passage holds the answer where the quote is that sentence (pump, boat) and not where it is 28
    # sentences away from it (valve)
    shown_sentence = {"pump": PUMP, "valve": VALVE_QUESTION_WORDS, "boat": "The marmalade boat"}
    reference = {qid: 100.0 if any(naive_span(DOCUMENTS[d], shown_sentence[qid])[0] < e and
                                   s < naive_span(DOCUMENTS[d], shown_sentence[qid])[1]
                                   for d, spans in by_doc.items() for s, e in spans) else 0.0
                 for qid, by_doc in expected.items()}
    assert reference == {"pump": 100.0, "valve": 0.0, "boat": 100.0}
    assert result.secondary_per_query["passage_hit@1"] == reference
    assert result.metrics["passage_hit@1"] == pytest.approx(200 / 3, abs=0.01)
    assert "passage_hit@1: 66.7 [" in results_summary(run)  # what eval prints beside nDCG@10
    assert run.config.task_dirs["task"]["sha256"].keys() == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv",
                                                             "answers.jsonl"}


@pytest.mark.parametrize("suffix, delimiter", [(".tsv", "\t"), (".csv", ",")])
def test_offsets_in_a_table_give_the_span_with_or_without_a_quote(tmp_path: Path, suffix: str, delimiter: str) -> None:
    text = DOCUMENTS["pump.txt"]
    start = text.index("The zanzibar")
    rows = [["question", "document", "answer", "answer_start", "answer_end"],
            ["zanzibar pump pressure", "pump.txt", "", str(start), str(start + 20)],
            ["pump pressure in bar", "pump.txt", "eleven bar", str(text.index("eleven")), ""],
            ["quokka grease", "valve.txt", "", "", ""]]  # empty cells: no answer given
    questions = tmp_path / f"q{suffix}"
    questions.write_text("\n".join(delimiter.join(r) for r in rows) + "\n", encoding="utf-8")
    data = TaskDirTask(build(tmp_path, questions)).load()
    eleven = text.index("eleven")
    assert data.answers == {"q1": {"pump.txt": [(start, start + 20)]}, "q2": {"pump.txt": [(eleven, eleven + 10)]}}


def test_a_wrong_quote_or_offset_is_refused_with_its_line_and_nothing_is_written(tmp_path: Path) -> None:
    text = DOCUMENTS["pump.txt"]
    rows = [
        {"question": "fine", "document": "pump.txt", "answer": PUMP},
        {"question": "wrong quote", "document": "pump.txt", "answer": "The pump runs at twelve bar."},
        {"question": "ambiguous", "document": "pump.txt", "answer": "ordinary matters only."},
        {"question": "wrong offset", "document": "pump.txt", "answer": PUMP, "answer_start": 3},
        {"question": "two documents", "documents": ["pump.txt", "valve.txt"], "answer": PUMP, "answer_start": 0},
        {"question": "past the end", "document": "pump.txt", "answer_start": len(text) + 5, "answer_end": len(text) + 9},
        {"question": "end alone", "document": "pump.txt", "answer_end": 9},
        {"question": "bad offset", "document": "pump.txt", "answer": PUMP, "answer_start": -1},
        {"question": "not text", "document": "pump.txt", "answer": 11},
        {"question": "end disagrees", "document": "pump.txt", "answer": PUMP, "answer_start": text.index(PUMP),
         "answer_end": text.index(PUMP) + 3},
    ]
    questions = jsonl(tmp_path / "q.jsonl", rows)
    with pytest.raises(TaskDirProblems) as caught:
        build(tmp_path, questions)
    problems = caught.value.problems
    assert [p.split(": ", 1)[0] for p in problems] == [f"{questions}:{n}" for n in range(2, 11)]
    assert "'The pump runs at twelve bar.' does not occur in 'pump.txt'" in problems[0]
    assert "occurs 39 times in 'pump.txt' (at characters" in problems[1] and "give answer_start" in problems[1]
    assert "is not at answer_start 3 of 'pump.txt': the text there reads" in problems[2]
    assert f"the quote occurs at {text.index(PUMP)}" in problems[2]
    assert "names 2" in problems[3] and "past the end" in problems[4] and "answer_end needs answer_start" in problems[5]
    assert "(a whole number >= 0), not -1" in problems[6] and "must be a string" in problems[7]
    assert f"is not where the answer ends in 'pump.txt' ({text.index(PUMP) + len(PUMP)})" in problems[8]
    assert all("\n" not in p for p in problems)
    assert not (tmp_path / "task").exists()


def test_whitespace_normalised_quotes_match_any_run_of_whitespace() -> None:
    text = "Tables:\n| a  |\tb |\nend."
    assert occurrences("| a | b |", text) == [(8, 18)]
    assert occurrences("a  |", text) == [(10, 14)]  # exact first
    assert quote_pattern("x.y (z)").fullmatch("x.y \n (z)")


def answered_data() -> RetrievalData:
    return RetrievalData(corpus={"d1": "one two three", "d2": "four five"}, queries={"q1": "two", "q2": "five"},
                         qrels={"q1": {"d1": 1}, "q2": {"d2": 1, "d1": 0}},
                         answers={"q1": {"d1": [(4, 7), (8, 13)]}, "q2": {"d2": [(0, 4)]}}).validate()


@pytest.mark.parametrize("layout", ["beir", "longembed"])
def test_written_answers_read_back_unchanged(tmp_path: Path, layout: str) -> None:
    data = answered_data()
    assert TaskDirTask(write_task_dir(data, tmp_path / layout, layout=layout)).load() == data


@pytest.mark.parametrize("row, message", [
    ({"qid": "q2", "doc_id": "d1", "start": 0, "end": 3}, "document 'd1' is not judged relevant to query 'q2'"),
    ({"qid": "q9", "doc_id": "d1", "start": 0, "end": 3}, "query 'q9' is not in the queries file"),
    ({"qid": "q1", "doc_id": "d1", "start": 5, "end": 50}, r"\[5, 50\) is not a non-empty span of document 'd1'"),
    ({"qid": "q1", "doc_id": "d1", "start": 3, "end": 4}, r"\[3, 4\) is not a non-empty span"),
    ({"qid": "q1", "doc_id": "d1", "start": "0", "end": 3}, "'start' must be an integer character offset"),
])
def test_a_bad_answers_line_is_an_error_naming_it(tmp_path: Path, row: dict, message: str) -> None:
    folder = write_task_dir(answered_data(), tmp_path / "t")
    with open(folder / "answers.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
    with pytest.raises(UserError, match=rf"answers.jsonl:4: {message}"):
        TaskDirTask(folder).load()


def test_answers_of_a_query_the_qrels_leave_out_go_with_it(tmp_path: Path) -> None:
    folder = write_task_dir(answered_data(), tmp_path / "t")
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\n", encoding="utf-8")
    task = TaskDirTask(folder / "qrels" / "dev.tsv")
    assert task.load().answers == {"q2": {"d2": [(0, 4)]}}
    assert task.record.left_out_by_reason["unjudged"] == 1
