"""An open index that follows its builds: a server moves to each new complete version without a
restart, and never to a half-built one (``longembed serve --index ... --follow-seconds N``, or SIGHUP).

:class:`FollowingIndex` answers from one :class:`~longembed.search.index.SearchIndex` at a time.
Between searches, at most every ``check_every`` seconds (or on :meth:`~FollowingIndex.request_check`,
which the server calls on SIGHUP), it reads which version the index's ``complete`` tag names; a
build moves that tag only once its last row is written, so a newer tag is a whole build; and the pointer
to the version's saved files (:mod:`longembed.search.version_files`), which names the version a search
opens and tells a ``--rebuild``'s table apart from an older one of the same version number.  The newer
version is then opened beside the current one (an S3 index's files downloaded first), with the same
encoder, by the one search that noticed it (the others keep answering from the current one meanwhile),
and replaces it in one assignment: every
search is answered by exactly one complete version.  A new version that cannot be served (another
model, a damaged table) is not taken: the server keeps its version and says why once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.errors import UserError
from longembed.search.index import SearchIndex, SearchResponse, SearchResult, open_index
from longembed.search.store import IndexStore, complete_version, index_errors
from longembed.search.version_files import pointed_name

#: how often, at most, a served index checks for a new complete version (seconds)
FOLLOW_SECONDS = 10.0


class FollowingIndex:
    """The index at ``path``, at its newest complete version as of the last check (module docstring).

    ``check_every``: seconds between checks (0: before every search; None: only on request);
    ``log``: where a switch (or a refused one) is reported."""

    def __init__(self, path: str | Path, device: str | None = None,
                 embed_queries: Callable[[list[str]], np.ndarray] | None = None,
                 check_every: float | None = FOLLOW_SECONDS, log: Callable[[str], None] | None = print,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if check_every is not None and check_every < 0:
            raise UserError(f"the seconds between checks for a new version must be 0 or more, got {check_every}")
        self.path = str(path)
        self.current: SearchIndex = open_index(path, device, embed_queries)
        self.check_every = check_every
        self._device = device
        self._embed_queries = embed_queries
        self._log = log or (lambda _: None)
        self._clock = clock
        self._checked_at = clock()
        self._requested = False
        self._refused: tuple[int, str | None] | None = None  # a version refused (said once), or seen as the served one
        self._opening = threading.Lock()

    # the server's view of the index: the current version's
    @property
    def version(self) -> int:
        return self.current.version

    @property
    def encoder(self) -> Any:
        return self.current.encoder

    @property
    def prompts(self) -> dict[str, str]:
        return self.current.prompts

    @property
    def embed_queries(self) -> Callable[[list[str]], np.ndarray]:
        return self.current.embed_queries

    @property
    def strategy(self) -> Any:
        return self.current.strategy

    @property
    def name(self) -> str:
        return self.current.name

    def facts(self) -> dict[str, Any]:
        return {**self.current.facts(), "version": self.current.version}

    def document_file(self, doc_id: str) -> Path | None:
        return self.current.document_file(doc_id)

    def search(self, query: str, k: int = 10, ids: Sequence[str] | None = None,
               path_prefix: str | None = None, exact: bool = False, passages: str = "query") -> SearchResponse:
        return self._due_index().search(query, k, ids, path_prefix, exact, passages)

    def search_many(self, queries: Sequence[str], k: int = 10, ids: Sequence[str] | None = None,
                    path_prefix: str | None = None, exact: bool = False,
                    passages: str = "query") -> list[list[SearchResult]]:
        return self._due_index().search_many(queries, k, ids, path_prefix, exact, passages)

    # following
    def request_check(self) -> None:
        """Check for a new version before the next search (what SIGHUP does); safe in a signal handler."""
        self._requested = True

    def refresh(self) -> bool:
        """Move to the newest complete version now, if it is newer and can be served; whether it moved."""
        with self._opening:
            self._requested = False
            self._checked_at = self._clock()
            try:
                latest = self._complete_version(), pointed_name(self.path)
            except UserError as exc:  # the store did not answer: keep serving, check again later
                self._log(f"{self.path}: could not check for a new version ({exc}); version "
                          f"{self.current.version} is still served")
                return False
            if latest[0] is None or latest == self._served() or latest == self._refused:
                return False
            try:
                newer = SearchIndex(self.path, self._device, self._embed_queries, encoder=self.current.encoder)
            except UserError as exc:
                self._refused = latest
                self._log(f"{self.path}: version {latest[0]} is not served, version {self.current.version} still is: "
                          f"{exc}")
                return False
            if (newer.version, newer.saved_name) == self._served():  # the tag moved, the pointer not (yet)
                self._refused = latest  # not opened again until one of them moves
                return False
            before, self.current = self.current.version, newer
            self._log(f"{self.path}: now searching version {newer.version} (was {before})")
            return True

    def _due_index(self) -> SearchIndex:
        """The index this search reads: the current one, after a check if one is due (only one search
        checks at a time; the others read the current version meanwhile)."""
        due = self._requested or (self.check_every is not None
                                  and self._clock() - self._checked_at >= self.check_every)
        if due and not self._opening.locked():
            self.refresh()
        return self.current

    def _served(self) -> tuple[int, str | None]:
        """The version served now: its number and the name of its saved files (None: read from the table)."""
        return self.current.version, self.current.saved_name

    def _complete_version(self) -> int | None:
        with index_errors(self.path):
            store = IndexStore(self.path)
            return complete_version(store.table()) if store.has_table() else None
