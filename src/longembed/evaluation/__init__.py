"""Scoring retrieval: metrics, the BM25 baseline and the benchmark runner with its cache."""

from longembed.evaluation.bm25 import BM25Model
from longembed.evaluation.metrics import evaluate, evaluate_scores, rank
from longembed.evaluation.runner import evaluate_model, load_results

__all__ = ["BM25Model", "evaluate", "evaluate_model", "evaluate_scores", "load_results", "rank"]
