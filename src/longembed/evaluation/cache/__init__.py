"""The embedding cache: :class:`CachedEncoder` wraps any encoder, so a killed run resumes and a finished
one reruns in seconds.

``wrapper`` holds the encoder wrapper and its encode loop, ``storage`` the files on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.evaluation.cache.wrapper import CachedEncoder

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
