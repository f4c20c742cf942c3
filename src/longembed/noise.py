"""Known library messages that say nothing to a longembed user, filtered by their exact text.

Installed once, by the command line (``longembed.cli.main``; never as a side effect of ``import
longembed``: a library leaves other libraries' logging alone), as filters on the loggers that emit
them, so every command's stderr starts with what longembed has to say.  A program that wants the same
calls :func:`silence_known_library_noise` itself.  Each filter matches one message of one
library and nothing else: every other warning of the same logger still shows.

- torchao, when installed (the ``quantization`` extra; transformers imports it too), tries to load its
  CUDA kernels (``_C_mxfp8``, ``_C_cutlass_90a``...) at import and logs "Failed to load ...: Could not
  load this library" for each on a machine without CUDA.  Those kernels cannot run there anyway; with
  CUDA available the message is kept (a failed load then is a real problem).
- torchao logs "Detected no triton, on systems without Triton certain kernels will not work" when it
  is imported without Triton, a GPU compiler; kept when CUDA is available.
- torch (2.13) logs, for each Enum that torchao registers with pytree, "<enum ...> is an Enum subclass
  and is now natively supported by torch.compile ... deprecated": advice for torchao's developers.
- bm25s sets its logger to DEBUG when it is imported (after any level set before) and logs "Building
  index from IDs objects" (and "... from tokens", ...) for every index built: one line per BM25 run.

And for the command line only (:func:`show_longembed_warnings_plainly`, installed by ``longembed.cli.main``):
a warning longembed raises about the user's input (truncated documents, empty lines skipped, a scale
factor beyond the papers') prints as one line, ``warning: <message>``, instead of Python's default
``path/to/longembed/x.py:123: UserWarning: <message>`` followed by that line of longembed's own source,
which says nothing to someone running a command.  Other libraries' warnings keep Python's format.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from pathlib import Path
from typing import Any, TextIO

#: longembed's own package folder: a warning attributed to a file under it is one of longembed's.
_PACKAGE_DIR = Path(__file__).resolve().parent

#: torchao's CUDA-only kernel libraries, named in its "Failed to load" message
_TORCHAO_KERNEL_LOAD = re.compile(r"Failed to load \S*torchao[/\\]_C\S*\.so: Could not load this library")
_PYTREE_ENUM_DEPRECATION = "is an Enum subclass and is now natively supported by torch.compile"


def _cuda_available() -> bool:
    """Whether torch (already imported by whoever logs) sees a CUDA device; False without torch."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:  # a half-imported torch: say no CUDA rather than fail inside logging
        return False


def keep_torchao_record(record: logging.LogRecord) -> bool:
    """False for torchao's failed load of a CUDA kernel library on a machine without CUDA."""
    return not (_TORCHAO_KERNEL_LOAD.search(record.getMessage()) and not _cuda_available())


def keep_torchao_triton_record(record: logging.LogRecord) -> bool:
    """False for torchao's "Detected no triton" on a machine without CUDA (Triton kernels are GPU-only)."""
    return not ("Detected no triton" in record.getMessage() and not _cuda_available())


def keep_pytree_record(record: logging.LogRecord) -> bool:
    """False for torch's Enum-registration deprecation notice (meant for torchao's developers)."""
    return _PYTREE_ENUM_DEPRECATION not in str(record.msg)


def keep_bm25s_record(record: logging.LogRecord) -> bool:
    """False for bm25s's debug line "Building index from ..." (one per index built)."""
    return not (record.levelno < logging.INFO and str(record.msg).startswith("Building index from"))


#: logger name -> the filter for its known noise
FILTERS = {
    "torchao": keep_torchao_record,
    "torchao.kernel.intmm": keep_torchao_triton_record,
    "torch.utils._pytree": keep_pytree_record,
    "bm25s": keep_bm25s_record,
}


def silence_known_library_noise() -> None:
    """Attach each filter to its logger (once; before the library is imported, or after)."""
    for name, keep in FILTERS.items():
        logger = logging.getLogger(name)
        if keep not in logger.filters:
            logger.addFilter(keep)


def is_longembed_file(filename: str) -> bool:
    """Whether ``filename`` (a warning's attributed file) is one of longembed's own modules."""
    try:
        return Path(filename).resolve().is_relative_to(_PACKAGE_DIR)
    except (OSError, ValueError):
        return False


def show_longembed_warnings_plainly() -> None:
    """Print longembed's own warnings as ``warning: <message>``, one line without a source line (module
    docstring); every other warning goes to the handler that was installed before.  Installed once."""
    previous = warnings.showwarning
    if getattr(previous, "longembed_plain", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if not is_longembed_file(filename):
            previous(message, category, filename, lineno, file, line)
            return
        stream: Any = file if file is not None else sys.stderr
        with contextlib.suppress(OSError):  # a closed stderr: a warning is not worth failing for
            stream.write(f"warning: {message}\n")

    show.longembed_plain = True  # type: ignore[attr-defined]
    warnings.showwarning = show
