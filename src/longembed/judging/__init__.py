"""Judging pooled search results (``longembed judge``): every candidate strategy's top k for a question,
merged and shuffled (:mod:`.pool`), graded on a page (:mod:`.app`) into a task folder that ``eval`` and
``advise`` read (:mod:`longembed.tasks.judgment_log`)."""
