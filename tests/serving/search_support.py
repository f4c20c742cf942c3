"""Documents for the search server's tests, and a real index of them built by ``longembed index``."""

from __future__ import annotations

from pathlib import Path

from longembed.cli.main import main

DOCUMENTS = {
    "essays/founders.txt": "How it started. " * 20 + "Y Combinator was founded in 2005 by Paul Graham, Jessica "
    "Livingston, Robert Morris and Trevor Blackwell, in Cambridge, Massachusetts. " + "The first batch. " * 20,
    "essays/python.txt": "Python is a programming language. Lisp is another language; hackers like both. " * 6,
    "essays/cities.txt": "Cities tell you what they value: Cambridge says you should be smarter. " * 6,
    "notes/xss.txt": '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> founded batch. ' * 3,
}
#: The real index's model options: MiniLM (Lo = 512) extended by PI to 1024 tokens.
METHOD, MAX_LENGTH = "pi", 1024


def build_real_index(folder: Path, model: Path) -> Path:
    """:data:`DOCUMENTS` as files under ``folder/docs``, indexed (late chunks + BM25) into ``folder/index``."""
    docs = folder / "docs"
    for doc_id, text in DOCUMENTS.items():
        (docs / doc_id).parent.mkdir(parents=True, exist_ok=True)
        (docs / doc_id).write_text(text, encoding="utf-8")
    index = folder / "index"
    status = main(["index", str(docs), "--index", str(index), "--model", str(model), "--method", METHOD,
                   "--max-length", str(MAX_LENGTH), "--strategy", "late-chunks+bm25"])
    assert status == 0, "longembed index failed"
    return index
