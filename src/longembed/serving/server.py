"""Run the app with uvicorn: bind, serve, and on SIGINT/SIGTERM finish every accepted request."""

from __future__ import annotations

import uvicorn

from longembed.encoder import LongContextEncoder
from longembed.serving.app import ServerSettings, create_app
from longembed.serving.search_route import SearchableIndex, add_search_routes


def build_server(
    encoder: LongContextEncoder,
    settings: ServerSettings | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    graceful_seconds: float | None = 120.0,
    log_level: str = "info",
    index: SearchableIndex | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``encoder`` (``server.run()`` blocks; ``server.should_exit = True`` stops it).

    On shutdown uvicorn stops accepting connections and waits (up to ``graceful_seconds``) for the
    requests in flight; the app's lifespan then drains the batcher, so no accepted input is lost.
    With an ``index`` (``serve --index``) the app also searches it (:mod:`longembed.serving.search_route`).
    """
    app = create_app(encoder, settings, bound_host=None if host in ("0.0.0.0", "::", "") else host)
    if index is not None:
        add_search_routes(app, index)
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=graceful_seconds,
        lifespan="on",
    )
    return uvicorn.Server(config)


def bound_port(server: uvicorn.Server) -> int:
    """The port a started server listens on (useful with ``port=0``)."""
    if not server.started or not server.servers:
        raise RuntimeError("the server has not started yet")
    return server.servers[0].sockets[0].getsockname()[1]
