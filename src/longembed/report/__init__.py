"""Reports over results: ``report.md`` and PNG plots of benchmark runs, and sweep tables.

    >>> from longembed.report.write import write_report
    >>> write_report(["runs/minilm-truncate", "runs/minilm-pi-4k", "runs/bm25"], "report")

A run is a folder holding the ``results.json`` written by ``longembed eval`` (or
:func:`longembed.evaluation.evaluate_model`). A folder without one is searched one level down, so a
sweep's parent folder can be passed as it is; a folder holding a ``sweep.json`` also gets its
``sweep.md`` and ``sweep.png`` (:func:`~longembed.report.sweep_report.write_sweep_report`).

Modules: ``tables`` (markdown, the run summary ``longembed eval`` prints), ``plots`` (PNGs), ``means``
(the means a report computes itself, with their intervals), ``formatting`` (numbers and intervals as
every table shows them), ``sweep_report`` (sweep reports), ``write`` (``write_report``, ``collect_runs``).
Scores are shown with their 95% intervals wherever the run kept per-query scores.  This package imports none of them,
so the summary table does not pull in matplotlib.
"""
