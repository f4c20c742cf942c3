"""Tests of the LongEmbed tasks (longembed.tasks): registry, generators, loaders, hub layout."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import DATA_DIR, require_data, require_package

from longembed.tasks import DEFAULT_TASKS, TASKS, HubTask, TaskDataMissing, get_task
from longembed.tasks import hotpotqa as hotpotqa_mod
from longembed.tasks import needle as needle_mod
from longembed.tasks import passkey as passkey_mod
from longembed.tasks.base import SYNTHETIC_LENGTHS, RetrievalData, word_budget

DATA = DATA_DIR


def needs(sub: str) -> Path:
    return require_data(sub)


def single_relevant(data: RetrievalData, qid: str) -> str:
    (doc_id,) = data.qrels[qid]
    return doc_id


# ---------------------------------------------------------------- registry


def test_registry_names_and_metadata() -> None:
    assert set(TASKS) == {
        "passkey",
        "needle",
        "qmsum",
        "qmsum_passages",
        "squality",
        "hotpotqa",
        "narrativeqa",
        "summscreenfd",
        "2wikimqa",
    }
    assert DEFAULT_TASKS == ("passkey", "needle", "qmsum", "squality", "hotpotqa", "narrativeqa")
    for name, task in TASKS.items():
        assert task.metadata.name == name
        synthetic = name in ("passkey", "needle")
        assert task.metadata.main_score == ("accuracy@1" if synthetic else "ndcg@10")
        assert task.metadata.lengths == (SYNTHETIC_LENGTHS if synthetic else None)
        assert task.metadata.source
    assert TASKS["squality"].metadata.stand_in_for == "SummScreenFD"
    assert TASKS["hotpotqa"].metadata.stand_in_for == "2WikiMultihopQA"
    assert SYNTHETIC_LENGTHS == (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


def test_get_task_options_and_errors() -> None:
    assert get_task("passkey", seed=7).seed == 7
    with pytest.raises(ValueError, match="valid names:.*passkey.*2wikimqa"):
        get_task("passkeys")
    with pytest.raises(ValueError, match="does not take"):
        get_task("passkey", bogus=1)
    with pytest.raises(ValueError, match="no hub version"):
        get_task("squality", source="hub")
    hub = get_task("needle", source="hub")
    assert isinstance(hub, HubTask) and hub.config == "needle"
    assert hub.metadata.lengths == SYNTHETIC_LENGTHS and "dwzhu/LongEmbed" in hub.metadata.source
    assert get_task("summscreenfd").config == "summ_screen_fd"


def test_length_is_checked() -> None:
    with pytest.raises(ValueError, match="per length"):
        TASKS["passkey"].load(None)
    with pytest.raises(ValueError, match="not one of"):
        TASKS["passkey"].load(None, 300)
    with pytest.raises(ValueError, match="no lengths"):
        TASKS["qmsum"].load(DATA, 256)


def test_missing_data_raises_task_data_missing_naming_the_source(tmp_path: Path) -> None:
    for name, hint in [
        ("qmsum", "Yale-LILY/QMSum"),
        ("squality", "nyu-mll/SQuALITY"),
        ("hotpotqa", "hotpot_dev_distractor_v1.json"),
        ("narrativeqa", "dwzhu/LongEmbed"),
        ("2wikimqa", "dwzhu/LongEmbed"),
    ]:
        for data_dir in (tmp_path, None):
            with pytest.raises(TaskDataMissing, match=re.escape(hint)):
                TASKS[name].load(data_dir)
    with pytest.raises(TaskDataMissing, match="PaulGrahamEssays"):
        TASKS["needle"].load(tmp_path, 256)


# ---------------------------------------------------------------- passkey

KEY_RE = re.compile(r"(\w+ \w+)'s pass key is (\d{5})\. Remember it\. \2 is the pass key for \1\.")


@pytest.mark.slow
def test_passkey_all_lengths_follow_the_recipe() -> None:
    task = passkey_mod.PasskeyTask()
    filler = set(passkey_mod.FILLER_SENTENCES)
    for length in SYNTHETIC_LENGTHS:
        data = task.load(None, length)
        budget = word_budget(length)
        assert len(data.corpus) == 100 and len(data.queries) == 50
        people = {}
        positions = set()
        for doc_id, text in data.corpus.items():
            n_words = len(text.split())
            assert budget - 4 <= n_words <= budget
            keys = KEY_RE.findall(text)
            assert len(keys) == 1
            name, key = keys[0]
            people[name] = doc_id
            # The key sentence is a line of its own; the rest is filler sentences only.
            lines = text.split("\n")
            key_line = next(i for i, line in enumerate(lines) if KEY_RE.fullmatch(line))
            positions.add(key_line)
            rest = " ".join(lines[:key_line] + lines[key_line + 1 :])
            assert set(re.findall(r"[^.]+\.", rest.replace(". ", ".\n").replace("\n", ""))) <= filler
        assert len(people) == 100  # unique people
        assert len({len(t) - 2 * len(n) for n, t in ((n, data.corpus[d]) for n, d in people.items())}) <= 2
        for qid, query in data.queries.items():
            name = re.fullmatch(r"What is the pass key for (\w+ \w+)\?", query).group(1)
            assert single_relevant(data, qid) == people[name]
        # the key is not always at the same place
        assert len({data.corpus[d].index("pass key") for d in data.corpus}) > 20


def test_passkey_is_deterministic_and_lengths_are_independent() -> None:
    a = passkey_mod.generate(512, seed=1)
    passkey_mod.generate(256, seed=1)  # generating another length first changes nothing
    b = passkey_mod.PasskeyTask(seed=1).load(None, 512)
    assert a == b
    c = passkey_mod.generate(512, seed=2)
    assert a.corpus != c.corpus and a.queries != c.queries
    # relevant documents are not the first 50 ids (ties are broken by id)
    relevant = sorted(single_relevant(a, q) for q in a.qrels)
    assert relevant != sorted(a.corpus)[:50]


# ---------------------------------------------------------------- needle


def _needles(n: int) -> tuple[needle_mod.Needle, ...]:
    return tuple(
        needle_mod.Needle(f"Fact number {i} says zebra{i} likes tea.", f"What does zebra{i} like?")
        for i in range(n)
    )


def test_needle_generation_on_a_toy_haystack() -> None:
    haystack = ". ".join(f"Sentence {i} of the haystack has seven words" for i in range(5000)) + "."
    needles = _needles(100)
    longest = max(len(n.fact.split()) for n in needles)
    for length in (256, 2048):
        data = needle_mod.generate(length, haystack, needles, seed=3)
        assert len(data.corpus) == 100 and len(data.queries) == 50
        prefix = needle_mod.prefix_words(haystack, word_budget(length) - longest)
        for i, text in enumerate(data.corpus.values()):
            fact = needles[i].fact
            assert len(text.split()) <= word_budget(length)
            assert f"\n{fact}\n" in f"\n{text}\n"  # on a line of its own
            assert " \n" not in text and "\n " not in text and text == text.strip()
            assert text.count("zebra") == 1
            before, _, after = f"\n{text}\n".partition(f"\n{fact}\n")
            # removing the needle gives back the shared prefix; the needle sits at a sentence start
            assert " ".join(p for p in (before.strip(), after.strip()) if p) == prefix
            assert after.strip() == "" or after.startswith("Sentence")
        for qid, question in data.queries.items():
            i = int(re.search(r"zebra(\d+)", question).group(1))
            assert single_relevant(data, qid) == f"needle-{length}-doc{i:03d}"
    again = needle_mod.generate(512, haystack, needles, seed=3)
    assert again == needle_mod.generate(512, haystack, needles, seed=3)
    assert again != needle_mod.generate(512, haystack, needles, seed=4)


def test_packaged_needles_are_valid() -> None:
    needles = needle_mod.load_needles()
    assert len(needles) == 400
    assert len({n.fact for n in needles}) == 400 and len({n.question for n in needles}) == 400


def test_needles_file_validation(tmp_path: Path) -> None:
    def write(rows: list[dict]) -> Path:
        path = tmp_path / "needles.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        return path

    good = [{"fact": f"Fact {i}.", "question": f"Question {i}?"} for i in range(60)]
    assert len(needle_mod.load_needles(write(good))) == 60
    with pytest.raises(ValueError, match="needles.jsonl:3: missing or empty field 'question'"):
        needle_mod.load_needles(write(good[:2] + [{"fact": "x"}] + good[2:]))
    with pytest.raises(ValueError, match="duplicate fact"):
        needle_mod.load_needles(write(good + [{"fact": "Fact 1.", "question": "New?"}]))
    with pytest.raises(ValueError, match="duplicate question"):
        needle_mod.load_needles(write(good + [{"fact": "New.", "question": "Question 1?"}]))
    with pytest.raises(ValueError, match="1 needle\\(s\\); at least 2"):
        needle_mod.load_needles(write(good[:1]))
    with pytest.raises(ValueError, match="not UTF-8"):
        path = tmp_path / "latin1.jsonl"
        path.write_bytes('{"fact": "caf\u00e9", "question": "q?"}'.encode("latin-1"))
        needle_mod.load_needles(path)
    task = needle_mod.NeedleTask(needles_path=write(good))
    assert len(task.needles) == 60


@pytest.mark.parametrize("n_needles", [2, 7, 50, 60])
def test_fewer_than_50_needles_give_one_query_per_needle(tmp_path: Path, n_needles: int) -> None:
    """A needles file of any size >= 2: one document per needle, min(50, needles) queries, each
    query's relevant document holding its own fact."""
    path = tmp_path / "needles.jsonl"
    rows = [{"fact": f"Zorblat {i} owns a teal canoe.", "question": f"Who owns canoe {i}?"} for i in range(n_needles)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    needles = needle_mod.load_needles(path)
    data = needle_mod.generate(1024, "Some words here. More words there. " * 400, needles)
    assert len(data.corpus) == n_needles and len(data.queries) == min(50, n_needles)
    by_question = {n.question: n.fact for n in needles}
    for qid, question in data.queries.items():
        (doc_id,) = data.qrels[qid]
        assert by_question[question] in data.corpus[doc_id]


@pytest.mark.slow
def test_needle_on_the_essays() -> None:
    needs(needle_mod.ESSAY_SUBDIR)
    task = needle_mod.NeedleTask()
    haystack = needle_mod.build_haystack(DATA / needle_mod.ESSAY_SUBDIR)
    # LongEmbed's needle documents start exactly like this (data README; mteb's example documents)
    assert haystack.startswith(
        "Aaron Swartz created a scraped feed of the essays page. November 2021(This essay is derived from "
        "a talk at the Cambridge Union. )When I was a kid, I'd have said there wasn't. My father told me "
        "so. Some people like some things, and other people like other things, and who's to say who's "
        "right?It seemed so obvious"
    )
    assert "\n" not in haystack and len(haystack.split()) > 100_000
    facts = [n.fact for n in task.needles]
    for length in SYNTHETIC_LENGTHS:
        data = task.load(DATA, length)
        assert len(data.corpus) == 100 and len(data.queries) == 50
        stripped = set()
        for i, text in enumerate(data.corpus.values()):
            assert len(text.split()) <= word_budget(length)
            assert f"\n{facts[i]}\n" in f"\n{text}\n"
            stripped.add(" ".join(f"\n{text}\n".replace(f"\n{facts[i]}\n", " ").split()))
        assert len(stripped) == 1  # the needle is the only difference between documents
        questions = {n.question: f"needle-{length}-doc{i:03d}" for i, n in enumerate(task.needles)}
        for qid, question in data.queries.items():
            assert single_relevant(data, qid) == questions[question]


# ---------------------------------------------------------------- qmsum


def test_qmsum_matches_longembed_exactly() -> None:
    needs("qmsum/data/ALL")
    data = TASKS["qmsum"].load(DATA)
    assert len(data.corpus) == 197 and len(data.queries) == 1527
    # MTEB's statistics of LEMBQMSumRetrieval (data README)
    assert sum(map(len, data.corpus.values())) == 10_507_156
    assert sum(map(len, data.queries.values())) == 661_959
    assert min(map(len, data.corpus.values())) == 6_428 and max(map(len, data.corpus.values())) == 147_260
    assert all(len(r) == 1 for r in data.qrels.values())
    assert len(set(data.queries.values())) == 1527
    first = next(iter(data.corpus.values()))
    assert re.match(r"[^\n:]+: ", first)
    # the two answers shared by two meetings are kept with the first meeting
    for shared, meeting in [
        ("The meeting discussed various topics such as data collection", "Bed005"),
        ("The Bayes-net is going to be the focus of the presentation.", "Bed013"),
    ]:
        (qid,) = [q for q, t in data.queries.items() if t.startswith(shared)]
        assert single_relevant(data, qid) == meeting


def test_qmsum_count_check(tmp_path: Path) -> None:
    root = tmp_path / "qmsum/data/ALL"
    for split in ("train", "val"):
        (root / split).mkdir(parents=True)
    meeting = {
        "meeting_transcripts": [{"speaker": "A", "content": "hello"}, {"speaker": "B", "content": "hi"}],
        "general_query_list": [{"query": "q", "answer": "They greet."}],
        "specific_query_list": [],
    }
    (root / "train" / "M1.json").write_text(json.dumps(meeting), encoding="utf-8")
    with pytest.raises(ValueError, match="1 meetings and 1 queries, expected 197 and 1527"):
        TASKS["qmsum"].load(tmp_path)


# ---------------------------------------------------------------- squality


def test_squality_summary_to_story() -> None:
    needs("squality/data/v1-3/txt")
    data = TASKS["squality"].load(DATA)
    assert len(data.corpus) == 127 and len(data.queries) == 508
    per_story = Counter(single_relevant(data, q) for q in data.qrels)
    assert set(per_story.values()) == {4} and len(per_story) == 127
    stats = data.stats()
    assert 4500 < stats["mean_doc_words"] < 5500 and stats["mean_query_words"] > 90
    one = get_task("squality", max_summaries_per_story=1).load(DATA)
    assert len(one.queries) == 127 and one.corpus == data.corpus


# ---------------------------------------------------------------- hotpotqa


@pytest.mark.slow
def test_hotpotqa_documents_hold_their_evidence_once() -> None:
    path = needs(f"{hotpotqa_mod.SUBDIR}/{hotpotqa_mod.FILENAME}")
    data = TASKS["hotpotqa"].load(DATA)
    assert len(data.corpus) == 300 and len(data.queries) == 300
    examples = {f"hotpotqa-{ex['_id']}": ex for ex in hotpotqa_mod.read_hotpotqa(path)}
    title_doc: dict[str, str] = {}
    for doc_id, text in data.corpus.items():
        assert 5500 <= len(text.split()) <= 6000
        titles = re.findall(r"(?m)^Passage \d+:\n(.*)$", text)
        for title in titles:
            assert title_doc.setdefault(title, doc_id) == doc_id, f"{title!r} is in two documents"
    for qid, question in data.queries.items():
        ex = examples[qid]
        assert question == ex["question"]
        doc = data.corpus[single_relevant(data, qid)]
        context = dict((t, "".join(s).strip()) for t, s in ex["context"])
        for title in {t for t, _ in ex["supporting_facts"]}:
            assert f"\n{title}\n{context[title]}" in doc
            assert title_doc[title] == single_relevant(data, qid)
    # supporting paragraphs are not all at the start of their documents
    depth = [
        data.corpus[single_relevant(data, q)].find(examples[q]["supporting_facts"][0][0]) for q in data.qrels
    ]
    assert max(depth) > 10_000


@pytest.mark.slow
def test_hotpotqa_is_deterministic() -> None:
    path = needs(f"{hotpotqa_mod.SUBDIR}/{hotpotqa_mod.FILENAME}")
    examples = hotpotqa_mod.read_hotpotqa(path)
    a = hotpotqa_mod.build_hotpotqa(examples, num_queries=40, doc_words=2000, seed=5)
    b = hotpotqa_mod.build_hotpotqa(examples, num_queries=40, doc_words=2000, seed=5)
    c = hotpotqa_mod.build_hotpotqa(examples, num_queries=40, doc_words=2000, seed=6)
    assert a == b and a.queries != c.queries
    assert all(len(t.split()) <= 2000 for t in a.corpus.values())


# ---------------------------------------------------------------- hub layout


def _write_jsonl(path: Path, rows: list[dict], gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path.with_name(path.name + ".gz"), "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def test_hub_layout_real_task(tmp_path: Path) -> None:
    root = tmp_path / "LongEmbed" / "narrativeqa"
    _write_jsonl(root / "corpus.jsonl", [{"doc_id": "s1", "text": "A story."}, {"doc_id": "s2", "text": "B"}])
    _write_jsonl(root / "queries.jsonl", [{"qid": "1", "text": "Who?"}, {"qid": "2", "text": "Why?"}])
    _write_jsonl(root / "qrels.jsonl", [{"qid": "1", "doc_id": "s2"}, {"qid": "2", "doc_id": "s1"}])
    data = TASKS["narrativeqa"].load(tmp_path)
    assert data.corpus == {"s1": "A story.", "s2": "B"}
    assert data.queries == {"1": "Who?", "2": "Why?"}
    assert data.qrels == {"1": {"s2": 1}, "2": {"s1": 1}}
    with pytest.raises(TaskDataMissing, match="summ_screen_fd"):
        TASKS["summscreenfd"].load(tmp_path)


def test_hub_layout_synthetic_task_selects_context_length(tmp_path: Path) -> None:
    root = tmp_path / "passkey"  # also found directly under data_dir; gzipped files are fine
    corpus, queries, qrels = [], [], []
    for length in (256, 512):
        for i in range(3):
            corpus.append({"doc_id": f"{length}-d{i}", "text": f"doc {i}", "context_length": length})
            queries.append({"qid": f"{length}-q{i}", "text": f"query {i}", "context_length": length})
            qrels.append({"qid": f"{length}-q{i}", "doc_id": f"{length}-d{i}", "context_length": length})
    _write_jsonl(root / "corpus.jsonl", corpus, gz=True)
    _write_jsonl(root / "queries.jsonl", queries)
    _write_jsonl(root / "qrels.jsonl", qrels)
    task = get_task("passkey", source="hub")
    data = task.load(tmp_path, 512)
    assert sorted(data.corpus) == ["512-d0", "512-d1", "512-d2"]
    assert data.qrels == {f"512-q{i}": {f"512-d{i}": 1} for i in range(3)}
    with pytest.raises(ValueError, match="no documents with context_length 1024"):
        task.load(tmp_path, 1024)


def test_hub_layout_beir_field_names_and_parquet(tmp_path: Path) -> None:
    pd = require_package("pandas")
    root = tmp_path / "LongEmbed" / "2wikimqa"
    root.mkdir(parents=True)
    _write_jsonl(root / "corpus.jsonl", [{"_id": "d1", "text": "x"}, {"_id": "d2", "text": "y"}])
    _write_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "?"}])
    _write_jsonl(root / "qrels.jsonl", [{"query-id": "q1", "corpus-id": "d2", "score": 2}])
    assert TASKS["2wikimqa"].load(tmp_path).qrels == {"q1": {"d2": 2}}
    require_package("pyarrow")  # pandas' parquet engine (the test extra)
    pd.DataFrame([{"qid": "q1", "text": "parquet?"}]).to_parquet(root / "queries.parquet")
    (root / "queries.jsonl").unlink()
    assert TASKS["2wikimqa"].load(tmp_path).queries == {"q1": "parquet?"}


def test_hub_layout_inconsistent_qrels_are_rejected(tmp_path: Path) -> None:
    root = tmp_path / "LongEmbed" / "qmsum"
    _write_jsonl(root / "corpus.jsonl", [{"doc_id": "d1", "text": "x"}])
    _write_jsonl(root / "queries.jsonl", [{"qid": "q1", "text": "?"}])
    _write_jsonl(root / "qrels.jsonl", [{"qid": "q1", "doc_id": "d9"}])
    with pytest.raises(ValueError, match="not in the corpus"):
        get_task("qmsum", source="hub").load(tmp_path)
