"""``--dtype auto`` on the command line: resolved once, before the model loads, to the dtype the run uses and
recorded as such, the reason printed in one line (:func:`longembed.precision.resolve_dtype`).
"""

from __future__ import annotations

import argparse

from longembed.config import DTYPE_AUTO
from longembed.precision import Precision, resolve_dtype


def resolve_dtype_flag(args: argparse.Namespace, default: str = DTYPE_AUTO) -> Precision:
    """Set ``args.dtype`` to the dtype the run uses (``--dtype``, else ``default``; auto resolved for
    ``args.device``), print why, and return the decision."""
    precision = resolve_dtype(getattr(args, "dtype", default), args.device, getattr(args, "quantization", None))
    args.dtype = precision.dtype
    print(f"dtype {precision.reason}", flush=True)
    return precision


def resolve_auto_flag(args: argparse.Namespace) -> Precision | None:
    """For commands whose default is float32 (eval, advise): ``--dtype auto``, when given, resolved as
    :func:`resolve_dtype_flag` does, so that a run records the dtype it ran in, not "auto"."""
    return resolve_dtype_flag(args) if getattr(args, "dtype", None) == DTYPE_AUTO else None
