"""``longembed serve``: an embedding server with OpenAI's and TEI's routes and an overflow policy.

The web part needs the ``serving`` extra (``pip install "longembed[serving]"``: FastAPI, uvicorn,
prometheus-client); without it this package still imports (the settings and the overflow policy
need nothing), and :func:`require_serving_extra` says what to install.  :func:`create_app` builds the
ASGI app for any encoder; :func:`build_server` wraps it in uvicorn.  The modules: ``overflow_planner``
(extend / truncate / error), ``batcher`` (dynamic batching under a token budget), ``metrics``
(Prometheus), ``scheduling`` (which inputs run next: fair or fifo), ``throughput`` (measured
tokens/s, for Retry-After), ``validation`` and ``token_validation`` (request checks and error shapes), ``service``
(plan, queue, count), ``chunks`` (late and naive chunks, token states, token lists), ``responses``
(bodies), ``app`` (routes), ``server`` (uvicorn), ``settings``; with ``--index``, ``search_route`` and
``search_request`` (``POST /search`` and the search page, whose files are in ``page/``).  Names are imported on first use
(``longembed.lazy``), so the command line's ``--help`` reads the choices without the web stack.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from longembed.errors import MissingExtraError
from longembed.lazy import lazy_exports

#: The packages of the ``serving`` extra, by import name.
SERVING_PACKAGES = ("fastapi", "uvicorn", "prometheus_client")

if TYPE_CHECKING:
    from longembed.serving.app import create_app
    from longembed.serving.batcher import DynamicBatcher
    from longembed.serving.overflow_planner import OverflowPlanner
    from longembed.serving.search_route import add_search_routes, queued_query_vectors
    from longembed.serving.server import bound_port, build_server
    from longembed.serving.service import EmbeddingService
    from longembed.serving.settings import OVERFLOW_POLICIES, ServerSettings
    from longembed.serving.validation import ApiError

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__, also=("SERVING_PACKAGES", "require_serving_extra"))


def require_serving_extra() -> None:
    """An ImportError naming the extra when FastAPI, uvicorn or prometheus-client is missing."""
    missing = [name for name in SERVING_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"longembed serve needs the serving extra ({', '.join(missing)} missing): "
            'pip install "longembed[serving]"'
        )
