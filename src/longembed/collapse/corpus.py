"""Long real documents for the length-collapse measurements.

Three sources in the layout of the project's shared data folder (see its README):

* ``essays``: Paul Graham essays, ``paul_graham_essays/PaulGrahamEssays/*.txt`` (the
  LongEmbed needle haystack), one document per file, text as stored;
* ``squality``: SQuALITY Gutenberg short stories, ``squality/data/v1-3/txt/{train,dev,test}.jsonl``,
  one JSON object per line whose ``document`` is the story (``metadata.passage_id`` names it);
* ``qmsum``: QMSum meetings, ``qmsum/data/ALL/{train,val}/*.json``, the document being
  ``"\\n".join(f"{speaker}: {content}")`` over ``meeting_transcripts`` (LongEmbed's recipe).

Texts are kept exactly as built by these recipes (no whitespace normalization), so a
document's text is the one LongEmbed uses.  Documents with identical text are kept once (the
first in the order below).  The order is deterministic: sources in the order asked, files
sorted by name, lines in file order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import MissingFileError, UserError
from longembed.tasks import needle, qmsum, squality

__all__ = ["SOURCES", "Document", "load_long_documents"]

SOURCES: tuple[str, ...] = ("essays", "squality", "qmsum")
"""Names accepted by :func:`load_long_documents`."""


@dataclass(frozen=True)
class Document:
    """One long document: where it comes from, a stable id, and its text."""

    source: str
    doc_id: str
    text: str


def _require_dir(path: Path, source: str, data_dir: Path) -> Path:
    if not path.is_dir():
        raise MissingFileError(
            f"{source}: expected the folder {path} (inside data dir {data_dir}); "
            "see the data README for the expected layout"
        )
    return path


def _essays(data_dir: Path) -> Iterator[Document]:
    folder = _require_dir(data_dir / needle.ESSAY_SUBDIR, "essays", data_dir)
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise MissingFileError(f"essays: no *.txt files in {folder}")
    for f in files:
        yield Document("essays", f"essays/{f.stem}", f.read_text(encoding="utf-8"))


def _squality(data_dir: Path) -> Iterator[Document]:
    folder = _require_dir(data_dir / squality.SUBDIR, "squality", data_dir)
    for _, story in squality.read_stories(folder, require_all=False):
        yield Document("squality", f"squality/{story['metadata']['passage_id']}", story["document"])


def _qmsum(data_dir: Path) -> Iterator[Document]:
    folder = _require_dir(data_dir / qmsum.SUBDIR, "qmsum", data_dir)
    files = qmsum.meeting_files(folder)
    if not files:
        raise MissingFileError(f"qmsum: no {{{','.join(qmsum.SPLITS)}}}/*.json files in {folder}")
    for f in files:
        text = qmsum.meeting_document(qmsum.read_meeting(f))
        yield Document("qmsum", f"qmsum/{f.parent.name}/{f.stem}", text)


_LOADERS = {"essays": _essays, "squality": _squality, "qmsum": _qmsum}


def _dedupe(docs: Iterable[Document]) -> list[Document]:
    seen_text: set[str] = set()
    seen_id: set[str] = set()
    out = []
    for d in docs:
        if d.text in seen_text or d.doc_id in seen_id:
            continue
        seen_text.add(d.text)
        seen_id.add(d.doc_id)
        out.append(d)
    return out


def load_long_documents(data_dir: str | Path, sources: Sequence[str] = SOURCES) -> list[Document]:
    """Read the long documents of the given sources from ``data_dir``.

    Why: the collapse measurement needs real long texts that can be cut to any length up to
    several thousand tokens; these three sources are the long documents available offline.

    Args:
        data_dir: folder in the layout of the shared data folder.
        sources: any of ``"essays"``, ``"squality"``, ``"qmsum"``.

    Returns:
        Deduplicated documents (by text and by id) in a deterministic order.

    Raises:
        FileNotFoundError: ``data_dir`` or a requested source's folder is missing or empty.
        ValueError: an unknown source name.
    """
    data_dir = Path(data_dir)
    unknown = [s for s in sources if s not in _LOADERS]
    if unknown:
        raise UserError(f"unknown source(s) {unknown}: choose from {list(SOURCES)}")
    if not sources:
        raise UserError("no sources given")
    if not data_dir.is_dir():
        raise MissingFileError(
            f"data dir {data_dir} does not exist (expected the shared data folder layout)"
        )
    docs: list[Document] = []
    for source in dict.fromkeys(sources):  # keep order, drop repeats
        docs.extend(_LOADERS[source](data_dir))
    return _dedupe(docs)
