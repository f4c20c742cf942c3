"""``longembed serve``: an embedding server with OpenAI's and TEI's routes and an overflow policy.

The web part needs the ``serving`` extra (``pip install "longembed[serving]"``: FastAPI, uvicorn,
prometheus-client); without it this package still imports (the settings and the overflow policy
need nothing), and :func:`require_serving_extra` says what to install.  :func:`create_app` builds the
ASGI app for any encoder; :func:`build_server` wraps it in uvicorn.  The modules: ``overflow``
(extend / truncate / error), ``batcher`` (dynamic batching under a token budget), ``metrics``
(Prometheus), ``app`` (routes), ``server`` (uvicorn), ``settings``.
"""

from __future__ import annotations

from longembed.serving.batcher import DynamicBatcher
from longembed.serving.overflow import OVERFLOW_POLICIES, OverflowPlanner
from longembed.serving.settings import ServerSettings

try:  # the ``serving`` extra
    from longembed.serving.app import ApiError, EmbeddingService, create_app
    from longembed.serving.server import bound_port, build_server

    SERVING_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    SERVING_IMPORT_ERROR = exc


def require_serving_extra() -> None:
    """An ImportError naming the extra when FastAPI, uvicorn or prometheus-client is missing."""
    if SERVING_IMPORT_ERROR is not None:
        raise ImportError(
            f"longembed serve needs the serving extra ({SERVING_IMPORT_ERROR.name} is missing): "
            'pip install "longembed[serving]"'
        ) from SERVING_IMPORT_ERROR


__all__ = [
    "OVERFLOW_POLICIES",
    "ApiError",
    "DynamicBatcher",
    "EmbeddingService",
    "OverflowPlanner",
    "ServerSettings",
    "bound_port",
    "build_server",
    "create_app",
    "require_serving_extra",
]
