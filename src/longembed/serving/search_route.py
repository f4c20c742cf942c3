"""A server started with ``longembed serve --index DIR`` searches that index: ``POST /search``,
``GET /search/index`` (the index's facts) and the search page ``GET /`` (with its own ``/page/`` files).

``POST /search`` answers exactly what ``longembed search --json`` prints (``SearchResponse.to_dict()``
of :mod:`longembed.search`), behind the same API key, body limit and metrics as the other routes
(``longembed_requests{route="search"}``, ``longembed_request_seconds{route="search"}``), with errors in
OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``, ``param`` naming the field).

A search runs the index's own ``search`` (the code path of the command line, so the answers are the
same) in a worker thread, so the event loop keeps serving while it embeds the query and scores the
index; at most :data:`SEARCH_THREADS` run at once (the machine's cores are the model's), and a search
arriving while :data:`MAX_SEARCHES_IN_FLIGHT` are running or waiting is a 429, as a full embedding queue
is.  The query is not sent
through the embedding batcher: it is one short input, and a second code path for the query vector
could make the server's results drift from the command line's.

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

import asyncio
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from longembed.serving.app import respond
from longembed.serving.search_request import SearchRequest, search_request
from longembed.serving.service import EmbeddingService
from longembed.serving.validation import ApiError, openai_error, read_json

#: Searches running at once, each in a worker thread.
SEARCH_THREADS = 2
#: Searches in flight (running, or waiting for a thread) before more are refused (429).
MAX_SEARCHES_IN_FLIGHT = 64
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
    its search, and its prompts (``"query"``: the prefix its queries are embedded with)."""

    prompts: dict[str, str]

    def facts(self) -> dict[str, Any]: ...

    def search(self, query: str, k: int = 10, ids: list[str] | None = None,
               path_prefix: str | None = None) -> Any: ...  # a SearchResponse: .to_dict()


@dataclass
class SearchWork:
    """One index behind the routes: checks the query's length, then runs the search in a worker thread."""

    index: SearchableIndex
    service: EmbeddingService
    running: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SEARCH_THREADS))
    in_flight: int = 0

    @property
    def query_limit(self) -> int:
        """Tokens a query may have: Lt when the server extends, else Lo (a search never cuts a query)."""
        encoder = self.service.encoder
        return encoder.max_length if self.service.settings.overflow == "extend" else encoder.original_length

    async def check_query_length(self, query: str) -> None:
        """A 413 naming ``query`` when it has more tokens (query prompt and special tokens included) than
        :attr:`query_limit`; tokenizing stops a little past the limit, whatever the query's size."""
        limit = self.query_limit
        prefix = self.index.prompts.get("query", "")
        tokens = (await run_in_threadpool(self.service.planner.tokenize_up_to, [query], prefix, limit))[0]
        if tokens.complete and tokens.n_tokens <= limit:
            return
        self.service.metrics.over_window.inc()
        self.service.metrics.refused.inc()
        size = f"{tokens.n_tokens} tokens" if tokens.complete else f"more than {limit} tokens"
        raise ApiError(413, f"'query' has {size} (prompt and special tokens included), more than the "
                       f"{limit} this server embeds: shorten the question", "query", "context_length_exceeded")

    async def search(self, checked: SearchRequest) -> dict[str, Any]:
        """The index's answer (``to_dict()``), searched in a worker thread once one is free."""
        if self.in_flight >= MAX_SEARCHES_IN_FLIGHT:
            raise ApiError(429, f"{MAX_SEARCHES_IN_FLIGHT} searches are already running or waiting: retry shortly",
                           code="queue_full")
        await self.check_query_length(checked.query)
        self.in_flight += 1
        try:
            async with self.running:
                response = await run_in_threadpool(
                    self.index.search, checked.query, k=checked.k, ids=checked.ids, path_prefix=checked.path_prefix
                )
        finally:
            self.in_flight -= 1
        return response.to_dict()


def page_file(name: str) -> bytes:
    """One of the page's files, read from the package."""
    return resources.files("longembed.serving").joinpath("page", name).read_bytes()


def add_search_routes(app: FastAPI, index: SearchableIndex) -> None:
    """``POST /search``, ``GET /search/index``, the page ``GET /`` and its ``/page/`` files, on an app
    made by :func:`longembed.serving.create_app` (its service gives the key, limits and metrics)."""
    service: EmbeddingService = app.state.service
    work = SearchWork(index, service)
    app.state.search = work
    pages = {name: page_file(name) for name in PAGE_FILES}

    @app.post("/search")
    async def search(request: Request) -> Response:
        async def handle() -> Response:
            checked = search_request(await read_json(request, service.settings.max_body_bytes))
            return JSONResponse(await work.search(checked))

        return await respond(service, "search", handle, openai_error, request)

    @app.get("/search/index")
    async def index_facts(request: Request) -> Response:
        async def handle() -> Response:
            return JSONResponse(index.facts())

        return await respond(service, "search_index", handle, openai_error, request)

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
