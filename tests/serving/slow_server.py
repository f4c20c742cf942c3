"""A real ``longembed`` server in its own process whose model sleeps before each batch, for the
shutdown test (run as a script: ``python slow_server.py FOLDER PORT SHUTDOWN_SECONDS BATCH_SECONDS``).

It runs the same server ``longembed serve`` runs (``build_server(...).run()`` in the main thread, so
uvicorn's own SIGTERM handling is what the test exercises); only the batcher's encode is wrapped.
"""

from __future__ import annotations

import sys
import time

from longembed import load_encoder
from longembed.serving import ServerSettings, build_server


def main() -> None:
    folder, port, shutdown_seconds, batch_seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    encoder = load_encoder(folder, "pi", max_length=1024)
    settings = ServerSettings(max_batch_tokens=1024, shutdown_seconds=shutdown_seconds)
    server = build_server(encoder, settings, port=port, log_level="info")
    batcher = server.config.app.state.service.batcher
    real_encode = batcher.encode

    def slow_encode(*args):
        time.sleep(batch_seconds)
        return real_encode(*args)

    batcher.encode = slow_encode
    server.run()


if __name__ == "__main__":
    main()
