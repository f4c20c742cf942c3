"""A server started with ``longembed serve --index DIR`` searches that index: ``POST /search``,
``GET /search/index`` (the index's facts and how it makes its vectors), ``GET /search/file/<id>`` (a PDF hit's original file) and
the search page ``GET /`` (with its own ``/page/`` files).

``POST /search`` answers exactly what ``longembed search --json`` prints (``SearchResponse.to_dict()``
of :mod:`longembed.search`), plus ``file`` (that route) on each result whose PDF the index recorded and
is still on disk (:mod:`longembed.search.document_files`: no other file is reachable), behind the same API key, body limit and metrics as the other routes
(``longembed_requests{route="search"}``, ``longembed_request_seconds{route="search"}``), with errors in
OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``, ``param`` naming the field).

One queue for every model call: a search's query is embedded by the server's batcher, as one input of
an embedding request is (:meth:`EmbeddingService.run <longembed.serving.service.EmbeddingService.run>`):
tokenized once with the index's query prompt, queued under the token budget and the scheduling policy,
refused early with 429 or 503 and Retry-After (a full queue, ``--queue-seconds`` or the request's
``X-Longembed-Queue-Seconds``), cancelled when its client leaves, and run or refused 503 at shutdown
within ``--shutdown-seconds``; it is counted under ``route="search"`` in ``longembed_inputs`` and
``longembed_tokens``.  The query runs in a model call of its own (the batcher's ``alone``), so its
vector is bit-for-bit the one the index computes itself.  Then the index's own ``search`` (the
command line's code path, so the answers are the same) ranks with that vector in a worker thread:
``serve --index`` opens the index with :func:`queued_query_vectors` as its ``embed_queries``, which
hands it the vector the route awaited.  Scoring (a matrix product, BM25, fusion: no model) has no
limit of its own: it starts only once the batcher delivers the query's vector, and a BM25-only index,
which embeds nothing, is scored as ``/tokenize`` tokenizes, in the server's thread pool.

A query longer than the served model's window (Lt under ``--overflow extend``, else Lo: a search never
cuts its query), counted with the index's query prompt, is a 413 naming ``query``.  ``serve --index``
serves the index's own encoder (one model in memory for both the embedding routes and the search), so
the window is the index model's; a BM25-only index is searched under the served model's window.

The page is static (HTML, CSS and JS files of this package, nothing from elsewhere: no CDN, no font):
it tells nothing about the index until ``GET /search/index`` answers, which needs the API key when the
server has one; the page then asks for the key and keeps it in the tab's ``sessionStorage``.  Its
``Content-Security-Policy`` lets it load and call this server only.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from longembed.errors import UserError
from longembed.inputs import TokenizedInput
from longembed.retrieval.strategy import Strategy
from longembed.serving.app import respond
from longembed.serving.index_facts import served_facts
from longembed.serving.overflow_planner import PlannedInput
from longembed.serving.search_request import SearchRequest, search_request
from longembed.serving.service import EmbeddingService
from longembed.serving.validation import ApiError, openai_error, read_json

#: The page's files (``src/longembed/serving/page``) and their media types.
PAGE_FILES = {"index.html": "text/html; charset=utf-8", "search.css": "text/css; charset=utf-8",
              "search.js": "text/javascript; charset=utf-8"}
#: The page may load and call this server only (and inline nothing).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class SearchableIndex(Protocol):
    """What the server needs of an index (:class:`longembed.search.SearchIndex` meets it): its facts,
    its search, its prompts (``"query"``: the prefix its queries are embedded with), its encoder (None:
    its queries are not embedded, BM25 only), the ``embed_queries`` its search gets vectors from and its
    ``strategy`` (what ``GET /search/index`` describes: :mod:`longembed.serving.index_facts`)."""

    prompts: dict[str, str]
    strategy: Strategy
    encoder: Any
    embed_queries: Callable[[list[str]], np.ndarray]

    def facts(self) -> dict[str, Any]: ...

    def document_file(self, doc_id: str) -> Path | None: ...

    def search(self, query: str, k: int = 10, ids: list[str] | None = None,
               path_prefix: str | None = None, passages: str = "query") -> Any: ...  # a SearchResponse: .to_dict()


#: The query vectors the batcher gave the search running in this context: (its queries, their vectors),
#: set by :meth:`SearchWork.search` in the worker thread around the index's ``search``.
_QUEUED_VECTORS: ContextVar[tuple[list[str], np.ndarray] | None] = ContextVar("longembed_queued_vectors",
                                                                               default=None)


def queued_query_vectors(queries: list[str]) -> np.ndarray:
    """The ``embed_queries`` of an index a server searches (``serve --index`` opens it with this): the
    vectors of ``queries`` that ``POST /search`` got from the server's batcher before it ran the index's
    search.  Anywhere else a RuntimeError: such an index never runs the model beside the batcher."""
    queued = _QUEUED_VECTORS.get()
    if queued is None or queued[0] != list(queries):
        raise RuntimeError("this index embeds its queries in a server's queue (POST /search): open it without "
                           "embed_queries to search it directly")
    return queued[1]


@dataclass
class SearchWork:
    """One index behind the routes: checks the query's length, embeds it through the batcher, then
    runs the index's search in a worker thread."""

    index: SearchableIndex
    service: EmbeddingService

    @property
    def query_limit(self) -> int:
        """Tokens a query may have: Lt when the server extends, else Lo (a search never cuts a query)."""
        encoder = self.service.encoder
        return encoder.max_length if self.service.settings.overflow == "extend" else encoder.original_length

    @property
    def query_prompt(self) -> str:
        return self.index.prompts.get("query", "")

    async def check_query_length(self, query: str) -> TokenizedInput:
        """The query's tokens (query prompt and special tokens included), or a 413 naming ``query`` when
        it has more than :attr:`query_limit`; tokenizing stops a little past the limit, whatever the
        query's size."""
        limit = self.query_limit
        tokens = (await run_in_threadpool(self.service.planner.tokenize_up_to, [query], self.query_prompt, limit))[0]
        if tokens.complete and tokens.n_tokens <= limit:
            return tokens
        self.service.metrics.over_window.inc()
        self.service.metrics.refused.inc()
        size = f"{tokens.n_tokens} tokens" if tokens.complete else f"more than {limit} tokens"
        raise ApiError(413, f"'query' has {size} (prompt and special tokens included), more than the "
                       f"{limit} this server embeds: shorten the question", "query", "context_length_exceeded")

    async def search(self, checked: SearchRequest, request: Request | None = None) -> dict[str, Any]:
        """The index's answer (``to_dict()``): the query embedded by the batcher (when the index embeds
        its queries), then the index searched in a worker thread with that vector."""
        tokens = await self.check_query_length(checked.query)
        vectors = None if self.index.encoder is None else await self.query_vectors(checked.query, tokens, request)
        response = (await run_in_threadpool(self._search_with, checked, vectors)).to_dict()
        for result in response["results"]:
            if await run_in_threadpool(self.index.document_file, result["id"]) is not None:
                result["file"] = file_route(result["id"])
        return response

    async def query_vectors(self, query: str, tokens: TokenizedInput, request: Request | None) -> np.ndarray:
        """The query's (1, dim) vector, from the batcher as an embedding request's (see the module
        docstring), normalised, in a model call of its own."""
        try:
            vectors = await self.service.run([tokens], [tokens.n_tokens], request, self.query_prompt, normalize=True,
                                             alone=True)
        except ApiError as error:
            if error.code == "request_too_large":  # the whole queue holds fewer tokens than this query
                error.param = "query"
            raise
        self.service.count("search", [PlannedInput(tokens, query)])
        return vectors

    def _search_with(self, checked: SearchRequest, vectors: np.ndarray | None) -> Any:
        """The index's search (in a worker thread), its ``embed_queries`` answered with ``vectors``."""
        token = _QUEUED_VECTORS.set(None if vectors is None else ([checked.query], vectors))
        try:
            return self.index.search(checked.query, k=checked.k, ids=checked.ids, path_prefix=checked.path_prefix,
                                     passages=checked.passages)
        finally:
            _QUEUED_VECTORS.reset(token)


#: where a served index hands out a document's original file (``/search/file/<id>``)
FILE_ROUTE = "/search/file/"


def file_route(doc_id: str) -> str:
    """The address of ``doc_id``'s file (each character of the id that a path cannot hold escaped)."""
    return FILE_ROUTE + quote(doc_id, safe="/")


def page_file(name: str) -> bytes:
    """One of the page's files, read from the package."""
    return resources.files("longembed.serving").joinpath("page", name).read_bytes()


def add_search_routes(app: FastAPI, index: SearchableIndex) -> None:
    """``POST /search``, ``GET /search/index``, the page ``GET /`` and its ``/page/`` files, on an app
    made by :func:`longembed.serving.create_app` (its service gives the key, limits, queue and metrics).

    An index that embeds its queries must have been opened with ``embed_queries=``
    :func:`queued_query_vectors` (a UserError otherwise): its query encodes then wait in the server's
    queue instead of running the model beside it."""
    if index.encoder is not None and index.embed_queries is not queued_query_vectors:
        raise UserError("an index served by the search routes must embed its queries through the server's queue: "
                        "open it with open_index(path, embed_queries=longembed.serving.search_route."
                        "queued_query_vectors)")
    service: EmbeddingService = app.state.service
    work = SearchWork(index, service)
    app.state.search = work
    pages = {name: page_file(name) for name in PAGE_FILES}

    @app.post("/search")
    async def search(request: Request) -> Response:
        async def handle() -> Response:
            checked = search_request(await read_json(request, service.settings.max_body_bytes))
            return JSONResponse(await work.search(checked, request))

        return await respond(service, "search", handle, openai_error, request)

    @app.get("/search/index")
    async def index_facts(request: Request) -> Response:
        async def handle() -> Response:
            return JSONResponse(served_facts(index))

        return await respond(service, "search_index", handle, openai_error, request)

    @app.get(FILE_ROUTE + "{doc_id:path}", include_in_schema=False)
    async def document_file(doc_id: str, request: Request) -> Response:
        async def handle() -> Response:
            path = await run_in_threadpool(index.document_file, doc_id)
            if path is None:
                raise ApiError(404, f"no file to show for document {doc_id!r} (the index holds its file only for "
                               "a PDF read from a folder, while that file is still where it was)", "id", "not_found")
            return FileResponse(path, media_type="application/pdf", content_disposition_type="inline",
                                filename=path.name, headers={"X-Content-Type-Options": "nosniff",
                                                             "Cache-Control": "no-cache"})

        return await respond(service, "search_file", handle, openai_error, request)

    def static(name: str) -> Response:
        return Response(pages[name], media_type=PAGE_FILES[name], headers=PAGE_HEADERS)

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return static("index.html")

    @app.get("/page/{name}", include_in_schema=False)
    async def page_asset(name: str) -> Response:
        if name not in pages or name == "index.html":
            return JSONResponse({"error": f"no page file {name!r}"}, status_code=404)
        return static(name)
