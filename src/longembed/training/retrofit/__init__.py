"""Retrofit bidirectional ALiBi onto a BERT you already use, by distillation (``longembed retrofit``).

    >>> retrofit_alibi("all-MiniLM-L6-v2", "minilm-alibi", data_dir="../shared/data", max_steps=2000)
    >>> load_encoder("minilm-alibi", method="native")      # reads 8k tokens, no extension method

Only the BERT's position table ties it to 512 tokens: the retrofit replaces it with Jina's ALiBi and
trains the copy to reproduce the original (the design, and why: docs/guides/training.md).  Modules:
``config`` (RetrofitConfig, plain data), ``student``, ``data``, ``targets`` (the teacher's, cached),
``pairs``, ``trainer``, ``folder``, ``fidelity``, ``pipeline`` (:func:`retrofit_alibi`: plan -> targets
-> train -> write).  Names are imported on first use, so ``--help`` reads ``config`` without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longembed.lazy import lazy_exports

if TYPE_CHECKING:
    from longembed.training.retrofit.config import RetrofitConfig
    from longembed.training.retrofit.pipeline import (
        RECORD_FILE,
        RetrofitResult,
        RetrofitSummary,
        retrofit_alibi,
    )
    from longembed.training.retrofit.student import (
        POSITION_TABLE,
        build_student,
        student_config,
        student_name,
        student_state,
    )
    from longembed.training.retrofit.trainer import distillation_loss

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
