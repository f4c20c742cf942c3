"""longembed: embed and search documents far longer than an embedding model's context window.

>>> from longembed import load_encoder
>>> enc = load_encoder("all-MiniLM-L6-v2-folder", method="pi", max_length=4096)
>>> vectors = enc.encode(long_texts, batch_size=8, show_progress_bar=True)
>>> queries = enc.encode_query(["what does the essay say about startups?"])   # the model's query prompt
>>> documents = enc.encode_document(long_texts)                             # its document prompt

The names below are imported on first use (``longembed.lazy``), so ``import longembed`` and the
command line's ``--help`` do not pay for torch and transformers; ``from longembed import
load_encoder`` works as usual.  Importing the package changes no other library's logging: the
command line filters a few known library messages (``longembed.noise``), a program may do the same
with ``longembed.noise.silence_known_library_noise()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from longembed.config import EncoderConfig
    from longembed.encoder import EncodeStats, LongContextEncoder, load_encoder
    from longembed.encoder_protocol import Encoder, EncoderMetadata
    from longembed.errors import UserError
    from longembed.extension.methods import METHODS

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__, also=("__version__",))
