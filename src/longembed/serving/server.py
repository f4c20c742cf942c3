"""Run the app with uvicorn: bind, serve, and on SIGINT/SIGTERM keep the shutdown promise.

The promise (``--shutdown-seconds``, S): the whole shutdown takes at most S seconds; accepted work that
can finish by then finishes; the rest is answered 503 with a JSON error and Retry-After, never a 500.
uvicorn alone cannot keep it: it waits up to its own graceful timeout for the requests in flight
(120 s by default) and only then runs the app's lifespan shutdown, which drained the batcher for S
more seconds (measured: 142 s with S = 30); when its timeout expired, it cancelled the request tasks,
and a client got a bare 500 with an ASGI traceback in the log.  So :class:`DrainingServer` starts the
batcher's drain the moment uvicorn's shutdown starts, with a deadline a little before S (room to
write the last answers), and gives uvicorn S as its graceful timeout: by then every request has its
answer, and the lifespan shutdown has nothing left to wait for.
"""

from __future__ import annotations

import socket

import uvicorn

from longembed.encoder import LongContextEncoder
from longembed.serving.app import ServerSettings, create_app
from longembed.serving.batcher import DynamicBatcher
from longembed.serving.search_route import SearchableIndex, add_search_routes

#: The part of --shutdown-seconds kept for writing the last answers after the batcher's deadline
#: (at most ANSWER_SECONDS); uvicorn gets at least MIN_GRACEFUL_SECONDS to write them, even with S = 0.
ANSWER_SHARE, ANSWER_SECONDS, MIN_GRACEFUL_SECONDS = 0.2, 2.0, 0.5


def work_seconds(shutdown_seconds: float) -> float:
    """Of a shutdown of ``shutdown_seconds``, the seconds the batcher may keep computing."""
    return shutdown_seconds - min(ANSWER_SECONDS, ANSWER_SHARE * shutdown_seconds)


class DrainingServer(uvicorn.Server):
    """uvicorn's server whose shutdown starts the batcher's bounded drain at once (module docstring)."""

    def __init__(self, config: uvicorn.Config, batcher: DynamicBatcher, shutdown_seconds: float):
        super().__init__(config)
        self.batcher, self.shutdown_seconds = batcher, shutdown_seconds

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.batcher.begin_close(work_seconds(self.shutdown_seconds))  # returns at once
        await super().shutdown(sockets)


def build_server(
    encoder: LongContextEncoder,
    settings: ServerSettings | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_level: str = "info",
    index: SearchableIndex | None = None,
) -> DrainingServer:
    """A uvicorn server for ``encoder`` (``server.run()`` blocks; ``server.should_exit = True`` stops it).

    On shutdown it stops accepting connections, finishes what can finish within
    ``settings.shutdown_seconds`` and answers the rest 503 (see the module docstring).
    With an ``index`` (``serve --index``) the app also searches it (:mod:`longembed.serving.search_route`).
    """
    settings = settings or ServerSettings()
    app = create_app(encoder, settings, bound_host=None if host in ("0.0.0.0", "::", "") else host)
    if index is not None:
        add_search_routes(app, index)
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=max(settings.shutdown_seconds, MIN_GRACEFUL_SECONDS),
        lifespan="on",
    )
    return DrainingServer(config, app.state.service.batcher, settings.shutdown_seconds)


def bound_port(server: uvicorn.Server) -> int:
    """The port a started server listens on (useful with ``port=0``)."""
    if not server.started or not server.servers:
        raise RuntimeError("the server has not started yet")
    return server.servers[0].sockets[0].getsockname()[1]
