"""Search your own long documents as ``longembed eval`` scored them: build an index
(:func:`~longembed.search.build.build_index`, ``longembed index``), open it
(:func:`~longembed.search.index.open_index`) and search it (``longembed search``).

    >>> from longembed.search import open_index
    >>> index = open_index("my-index")
    >>> index.search("who founded Y Combinator?", k=10).to_dict()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.search.build import BuildReport, build_index
    from longembed.search.following import FollowingIndex
    from longembed.search.index import SearchIndex, SearchResponse, SearchResult, open_index
    from longembed.search.runfile import write_run
    from longembed.search.sources import Document, SourceOptions, read_sources

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
