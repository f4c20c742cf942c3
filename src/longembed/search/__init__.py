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

if TYPE_CHECKING:  # imported on first use: a BM25-only search never imports torch or LanceDB
    from longembed.search.build import BuildReport, build_index
    from longembed.search.cold_query import load_query_program
    from longembed.search.following import FollowingIndex
    from longembed.search.index import SearchIndex, SearchResponse, SearchResult, open_index
    from longembed.search.index_dtype import recorded_dtype
    from longembed.search.object_files import S3Objects
    from longembed.search.query_encoder import load_query_encoder
    from longembed.search.runfile import RUN_DEPTH, write_run
    from longembed.search.sources import Document, SourceOptions, read_sources
    from longembed.search.store import IndexStore
    from longembed.search.table_snapshot import open_ann, read_table_snapshot, save_snapshot

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
