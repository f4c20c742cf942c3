"""Retrieval shared by eval, advise, index and search: the strategy, the ranking pipeline, BM25, fusion."""
