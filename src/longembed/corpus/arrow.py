"""pyarrow, imported once for the corpus package: the parquet files it reads and writes.

pyarrow is part of the ``ray`` extra, not of the core install.  Without it this module still
imports (so ``longembed embed`` on a .txt or .jsonl file works), and corpus work raises an
ImportError that says what to install.
"""

from __future__ import annotations

from longembed.errors import MissingExtraError

try:  # the ``ray`` extra
    import pyarrow as pa
    import pyarrow.parquet as pq

    ARROW_IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    ARROW_IMPORT_ERROR = exc
    pa = pq = None  # type: ignore[assignment]

INSTALL_HINT = "pip install 'longembed[ray]'"


def require_arrow() -> None:
    """Raise a clear ImportError when pyarrow (the ``ray`` extra) is missing."""
    if ARROW_IMPORT_ERROR is not None:
        raise MissingExtraError(
            f"embedding a corpus into parquet files needs pyarrow ({ARROW_IMPORT_ERROR}): {INSTALL_HINT}"
        )
