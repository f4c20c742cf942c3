"""Adapters that plug a :class:`~longembed.encoder.LongContextEncoder` into other libraries.

* :mod:`longembed.integrations.mteb`: an mteb model (mteb's encoder protocol), so ``mteb.evaluate``
  scores any model and extension method; plus an in-memory mteb retrieval task.
* :mod:`longembed.integrations.langchain`: a LangChain ``Embeddings``.

Both need the ``integrations`` extra (``pip install "longembed[integrations]"``); importing this
package does not import them.  Both embed queries with the model's "query" prompt and documents with
its "document" (or "passage") prompt, the same choice ``longembed eval`` makes, so a score from mteb
and one from longembed's own benchmark are comparable.
"""

from __future__ import annotations

from longembed.encoder_protocol import Encoder

#: How to install what the adapters need, quoted in their ImportErrors.
INSTALL_HINT = 'pip install "longembed[integrations]"'


def retrieval_prompts(encoder: Encoder) -> dict[str, str]:
    """The prefixes for ``{"query": ..., "document": ...}``: the encoder's own choice
    (:meth:`~longembed.encoder.LongContextEncoder.retrieval_prompts`: its prompts named "query" and
    "document", else "passage" as E5 names it; "" where the model has none)."""
    return encoder.retrieval_prompts()
