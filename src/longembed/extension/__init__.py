"""Context-window extension methods: position maps (APE), rotary variants (RoPE), ALiBi, PCW,
and the attention function that applies them per document in linear memory.

A new method subclasses :class:`ExtensionMethod`.
"""

from longembed.extension.methods import (
    METHODS,
    POSITION_SCHEMES,
    ExtensionMethod,
    check_method,
    detect_position_scheme,
)

__all__ = ["METHODS", "POSITION_SCHEMES", "ExtensionMethod", "check_method", "detect_position_scheme"]
