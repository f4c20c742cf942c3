"""The haystack of the generated tasks: a user's folder of documents read as one text, and the cutting
of a word-budgeted prefix out of it with a line hidden at a sentence boundary.

``longembed eval --haystack DIR`` builds passkey and needle from the user's documents instead of the
filler sentences and the Paul Graham essays, to see how a model behaves at 8k on *their* texts:

* the folder's ``.txt`` and ``.jsonl`` files (searched recursively) are read in sorted order of their
  paths relative to the folder; a ``.txt`` file is one document, a ``.jsonl`` line one document (its
  string field ``text``); other files are listed in :attr:`Haystack.skipped`, not read;
* the documents are joined with newlines and normalised as the essays are (:func:`normalise`:
  newlines become spaces, the text is split on ``"."``, every piece stripped, the pieces re-joined
  with ``". "``);
* a length whose word budget the text cannot fill is an error (:meth:`Haystack.covering`): the
  user's text is never repeated to fill it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from longembed.errors import MissingFileError, UserError
from longembed.tasks.base import SYNTHETIC_LENGTHS, iter_jsonl, word_budget
from longembed.textfiles import read_utf8

#: The file types a haystack folder's documents come in.
DOCUMENT_SUFFIXES = (".txt", ".jsonl")


@dataclass(frozen=True)
class Haystack:
    """A user's documents as one normalised text, with what a run records of it (:meth:`describe`)."""

    path: str
    text: str
    documents: int
    words: int
    sha256: str
    skipped: tuple[str, ...] = ()

    def describe(self) -> dict[str, object]:
        """What ``results.json`` records: the folder, its document and word counts, the text's sha256."""
        return {"path": self.path, "documents": self.documents, "words": self.words, "sha256": self.sha256}

    def longest_length(self) -> int | None:
        """The longest evaluation length whose word budget the text fills (None: not even the shortest)."""
        served = [n for n in SYNTHETIC_LENGTHS if word_budget(n) <= self.words]
        return max(served) if served else None

    def covering(self, length: int) -> str:
        """The text, if it fills the word budget of ``length`` tokens; else a ValueError saying how many
        words it has and the longest length it can serve."""
        if self.words >= word_budget(length):
            return self.text
        longest = self.longest_length()
        serves = f"the longest length it can serve is {longest}" if longest else "it serves no length"
        raise UserError(
            f"haystack {self.path}: {self.words} words, fewer than the {word_budget(length)} words of length "
            f"{length} ({serves}; the text is not repeated to fill a length)"
        )


def normalise(text: str) -> str:
    """The essays' normalisation: newlines -> spaces, split on ".", strip every piece, join with ". "."""
    return ". ".join(piece.strip() for piece in text.replace("\n", " ").split("."))


def load_haystack(path: Path | str) -> Haystack:
    """Read the ``.txt`` / ``.jsonl`` documents of the folder ``path`` (recipe in the module docstring).

    Raises FileNotFoundError if ``path`` is not a folder, and ValueError for a folder without documents,
    bad UTF-8, a ``.jsonl`` line that is not an object with a string ``text`` (naming file:line) or a
    text without a single word.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise MissingFileError(f"haystack {root} is not a folder")
    files = sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: p.relative_to(root).as_posix())
    readable = [p for p in files if p.suffix in DOCUMENT_SUFFIXES]
    skipped = tuple(p.relative_to(root).as_posix() for p in files if p.suffix not in DOCUMENT_SUFFIXES)
    documents = [doc for p in readable for doc in _documents(p)]
    if not documents:
        raise UserError(f"haystack {root}: no documents (no .txt file, no .jsonl line)")
    text = normalise("\n".join(documents))
    words = len(text.split())
    if words == 0:
        raise UserError(f"haystack {root}: {len(documents)} documents but not a single word")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Haystack(str(root), text, len(documents), words, digest, skipped)


def _documents(path: Path) -> list[str]:
    """The documents of one file: a .txt file whole, or the ``text`` of every line of a .jsonl file."""
    if path.suffix == ".txt":
        return [read_utf8(path)]
    out = []
    for lineno, record in iter_jsonl(path):
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise UserError(f"{path}:{lineno}: expected a JSON object with a string field 'text'")
        out.append(text)
    return out


def prefix_words(text: str, n_words: int) -> str:
    """The start of ``text`` up to and including its ``n_words``-th word, original spacing kept.

    The text is repeated if it has fewer words (Kamradt's haystack likewise loops over the essays; a
    user's haystack is checked by :meth:`Haystack.covering` first, so it is never repeated).
    """
    if n_words <= 0:
        return ""
    n_text = len(text.split())
    if n_text == 0:
        raise UserError("empty haystack")
    if n_text < n_words:
        text = " ".join([text] * (n_words // n_text + 1))
    for count, match in enumerate(re.finditer(r"\S+", text), start=1):
        if count == n_words:
            return text[: match.end()]
    raise AssertionError("unreachable")  # pragma: no cover


def sentence_boundaries(prefix: str) -> list[int]:
    """Offsets where a sentence starts in ``prefix``: its start, after each ``". "``, and its end if it
    ends with a full stop (a prefix cut by word count usually ends inside a sentence)."""
    inner = [m.end() for m in re.finditer(r"\. ", prefix) if m.end() < len(prefix)]
    end = [len(prefix)] if prefix.endswith(".") else []
    return [0, *inner, *end]


def insert_needle(prefix: str, position: int, fact: str) -> str:
    """Put ``fact`` on its own line at offset ``position`` of ``prefix`` (a sentence boundary)."""
    before = prefix[:position].rstrip(" ")
    after = prefix[position:]
    return "\n".join(part for part in (before, fact, after) if part)


def as_haystack(haystack: Haystack | Path | str | None) -> Haystack | None:
    """A task's ``haystack`` option: a :class:`Haystack` as it is, a folder read by :func:`load_haystack`."""
    if haystack is None or isinstance(haystack, Haystack):
        return haystack
    return load_haystack(haystack)
