"""What a benchmark run can score: one vector per document, or a document's best chunk; and what a
dense ranking can be fused with.

Apart from the modules that use them so that the command line can list them (``--help``) without
importing the scoring stack.
"""

#: document: one vector per document; chunks: a document scores its best chunk (MaxSim).
GRANULARITIES = ("document", "chunks")

#: what a dense ranking can be fused with (``--fuse``), and how (``--fuse-method``).
FUSE_SOURCES = ("bm25",)
FUSE_METHODS = ("rrf", "linear")
