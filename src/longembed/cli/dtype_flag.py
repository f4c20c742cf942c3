"""``--dtype`` of the commands whose default is ``auto`` (embed, serve): resolved once, before the model loads,
to the dtype the run uses, and the reason printed in one line (:func:`longembed.precision.resolve_dtype`).
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
