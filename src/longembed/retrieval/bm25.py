"""BM25 baseline (LongEmbed Appendix D, Table 7) on top of the ``bm25s`` library.

Tokenization is bm25s's (lower-cased ``\\w\\w+`` tokens, scikit-learn style) with its English
stopword list, plus the Snowball English stemmer when PyStemmer is installed (``pip install
PyStemmer``; without it tokens are not stemmed, and :attr:`BM25Model.stemmer_name` is None). This is
the setup of mteb's BM25 baseline. Scoring is Lucene's BM25 variant with k1 = 1.5, b = 0.75.

:meth:`BM25Model.score` indexes the corpus and returns the full (queries x documents) score matrix,
which :func:`longembed.evaluation.metrics.rank` then ranks like any embedding model's similarities.
That is fine for the LongEmbed corpora (at most a few thousand documents).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from longembed.encoder_protocol import ScorerMetadata
from longembed.errors import UserError

#: bm25s's token pattern (``bm25s.tokenize``'s default), for :meth:`BM25Model.terms`
_TOKEN = re.compile(r"(?u)\b\w\w+\b")

#: the Snowball stems :meth:`BM25Model.terms` has met (a search stems each word of its passages' pieces once), at
#: most this many kept (the English stemmer's, the only one BM25Model uses)
_STEMS: dict[str, str] = {}
_STEMS_KEPT = 1_000_000

#: the file beside a saved index that records the settings it was built with (:meth:`BM25Model.save_index`)
SETTINGS_FILE = "longembed-bm25.json"

# bm25s sets its own logger to DEBUG when imported, which prints "Building index ..." for every index
# built: its import resets a level set here, so longembed.noise filters those lines instead.


def _version(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _bm25s() -> ModuleType:
    """bm25s, imported when BM25 first scores: it brings scipy.sparse, a tenth of a second that a
    cached embedding rerun (which imports this module but never scores BM25) should not pay."""
    import bm25s

    return bm25s


def _default_stemmer() -> Any | None:
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


class BM25Model:
    """Lexical scorer with the interface of a retrieval model: ``score(queries, corpus) -> matrix``."""

    name = "bm25"

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | list[str] | None = "en",
        stem: bool = True,
    ) -> None:
        self.k1 = k1
        self.b = b
        self.method = method
        self.stopwords = stopwords
        self.stemmer = _default_stemmer() if stem else None
        self.stemmer_name = "snowball-english" if self.stemmer is not None else None

    @property
    def metadata(self) -> ScorerMetadata:
        """What a run records of BM25: its settings and the bm25s / PyStemmer versions
        (:class:`~longembed.encoder_protocol.TextScorer`)."""
        config = {"model": "bm25", "k1": self.k1, "b": self.b, "variant": self.method, "stopwords": self.stopwords,
                  "stemmer": self.stemmer_name}
        provenance = {"name": "bm25", "bm25s": _version("bm25s"), "PyStemmer": _version("PyStemmer")}
        return ScorerMetadata(config=config, provenance=provenance, display_name="BM25")

    def _tokenize(self, texts: Sequence[str], return_ids: bool) -> Any:
        return _bm25s().tokenize(
            list(texts),
            stopwords=self.stopwords,
            stemmer=self.stemmer,
            return_ids=return_ids,
            show_progress=False,
        )

    def terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms as :meth:`score` reads them (bm25s's rules: lower case, ``\\w\\w+`` tokens, the
        stopwords left out, then stemmed), without building an index: a passage's windows are scored from
        their pieces' term counts (:meth:`count_scores`), each piece tokenized once."""
        stop = _stopwords(self.stopwords if isinstance(self.stopwords, str | None) else tuple(self.stopwords))
        tokens = [[t for t in _TOKEN.findall(text.lower()) if t not in stop] for text in texts]
        if self.stemmer is None:
            return tokens
        if len(_STEMS) > _STEMS_KEPT:
            _STEMS.clear()
        new = sorted({t for ts in tokens for t in ts if t not in _STEMS})
        _STEMS.update(zip(new, self.stemmer.stemWords(new), strict=True))
        return [[_STEMS[t] for t in ts] for ts in tokens]

    def count_scores(self, counts: np.ndarray, lengths: np.ndarray, query_counts: np.ndarray) -> np.ndarray:
        """Lucene BM25 of documents given as counts, as :meth:`score` computes it: ``counts[d, t]`` is how
        often the query's term ``t`` is in document ``d`` (``query_counts[t]`` times in the query), ``lengths[d]``
        its terms; the documents are the whole collection (their number and mean length)."""
        if self.method != "lucene":
            raise UserError(f"BM25 from counts is the lucene variant only, not {self.method!r}")
        counts = np.asarray(counts, dtype=np.float64)
        lengths = np.asarray(lengths, dtype=np.float64)
        if not len(lengths) or lengths.mean() == 0:
            return np.zeros(len(lengths))
        n, df = len(lengths), (counts > 0).sum(axis=0)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        norm = self.k1 * ((1 - self.b) + self.b * lengths / lengths.mean())
        return (counts / (counts + norm[:, None]) * idf * np.asarray(query_counts, dtype=np.float64)).sum(axis=1)

    def score(self, queries: Sequence[str], corpus: Sequence[str]) -> np.ndarray:
        """BM25 scores of every query against every document: a float32 array (len(queries), len(corpus))."""
        retriever = self.index(corpus)
        out = np.zeros((len(queries), len(corpus)), dtype=np.float32)
        for i, tokens in enumerate(self._tokenize(queries, return_ids=False)):
            out[i] = _scores(retriever, tokens, len(corpus))
        return out

    def index(self, corpus: Sequence[str]) -> Any:
        """A bm25s index of ``corpus`` (what :meth:`score` scores against; ``longembed advise`` times it
        and measures its size with :func:`index_bytes`)."""
        if not corpus:
            raise UserError("empty corpus")
        retriever = _bm25s().BM25(k1=self.k1, b=self.b, method=self.method)
        retriever.index(self._tokenize(corpus, return_ids=True), show_progress=False)
        return retriever

    def query_scores(self, index: Any, query: str) -> np.ndarray:
        """One query's scores against an :meth:`index`: float32, one per document."""
        (tokens,) = self._tokenize([query], return_ids=False)
        return _scores(index, tokens, int(index.scores["num_docs"]))


    def _settings(self) -> dict[str, Any]:
        """What a saved index must share with this model to score as it does: settings and versions."""
        metadata = self.metadata
        return {**metadata.config, "bm25s": metadata.provenance["bm25s"], "PyStemmer": metadata.provenance["PyStemmer"]}

    def save_index(self, index: Any, folder: str | Path) -> None:
        """Write an :meth:`index` to ``folder`` (bm25s's files) with these settings, so that
        :meth:`load_index` gives back the same scores, bit for bit, without tokenizing the corpus again."""
        index.save(str(folder), show_progress=False)
        (Path(folder) / SETTINGS_FILE).write_text(json.dumps(self._settings(), sort_keys=True), encoding="utf-8")

    def load_index(self, folder: str | Path) -> Any | None:
        """The index :meth:`save_index` wrote to ``folder``, its score matrix memory-mapped (read-only);
        None when it was saved with other settings than this model's (another stemmer, k1, b...): its
        scores would not be this model's."""
        settings = Path(folder) / SETTINGS_FILE
        if not settings.is_file() or json.loads(settings.read_text(encoding="utf-8")) != self._settings():
            return None
        return _bm25s().BM25.load(str(folder), mmap=True, show_progress=False, verbosity=0)


@functools.cache
def _stopwords(stopwords: str | tuple[str, ...] | None) -> frozenset[str]:
    """The stopword set bm25s removes for ``stopwords`` (English for "en"/"english", none for None)."""
    if not stopwords:
        return frozenset()
    if isinstance(stopwords, str):
        if stopwords not in ("en", "english"):
            raise UserError(f"BM25 terms know English stopwords only, not {stopwords!r}")
        return frozenset(_bm25s().stopwords.STOPWORDS_EN)
    return frozenset(stopwords)


def _scores(retriever: Any, tokens: list[str], n_documents: int) -> np.ndarray:
    """A tokenized query's scores (all 0 when no token is left: bm25s yields [""] for such a query)."""
    tokens = [t for t in tokens if t]
    if not tokens:
        return np.zeros(n_documents, dtype=np.float32)
    return np.asarray(retriever.get_scores(tokens), dtype=np.float32)


def index_bytes(index: Any) -> int:
    """The bytes of a bm25s index's score matrix (its sparse arrays: data, indices, indptr)."""
    return int(sum(np.asarray(index.scores[key]).nbytes for key in ("data", "indices", "indptr")))
