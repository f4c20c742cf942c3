"""longembed: embed and search documents far longer than an embedding model's context window.

>>> from longembed import load_encoder
>>> enc = load_encoder("all-MiniLM-L6-v2-folder", method="pi", max_length=4096)
>>> vectors = enc.encode(long_texts, batch_size=8, show_progress_bar=True)
"""

from longembed.config import EncoderConfig
from longembed.encoder import EncodeStats, LongContextEncoder, load_encoder
from longembed.extension.methods import METHODS

__version__ = "0.1.0"

__all__ = ["METHODS", "EncodeStats", "EncoderConfig", "LongContextEncoder", "load_encoder", "__version__"]
