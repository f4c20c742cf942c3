"""What a benchmark run can score: one vector per document, or a document's best chunk; and what a
dense ranking can be fused with (the retrieval layer's :data:`~longembed.retrieval.fusion.FUSE_SOURCES`
and :data:`~longembed.retrieval.fusion.FUSE_METHODS`).

Apart from the modules that use them so that the command line can list them (``--help``) without
importing the scoring stack.
"""

from longembed.retrieval.fusion import FUSE_METHODS, FUSE_SOURCES

#: document: one vector per document; chunks: a document scores its best chunk (MaxSim).
GRANULARITIES = ("document", "chunks")

__all__ = ["FUSE_METHODS", "FUSE_SOURCES", "GRANULARITIES"]
