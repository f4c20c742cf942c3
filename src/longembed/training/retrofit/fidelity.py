"""Short-text fidelity of a retrofit: does the student still embed short texts as the teacher does?

Scored on SQuAD articles the retrofit never trained on (``RetrofitConfig.held_out_articles``, kept out of
its texts and pairs): every paragraph and answerable question of those articles is embedded by the
teacher (as the benchmark opens it: its own window) and by the student (``method="native"``).

- **cosine**: cos(student's vector, teacher's) per text, over the texts of at most Lo tokens (longer
  paragraphs are counted, not scored: the teacher cuts them, the student does not); mean, min and
  5th percentile.  1 means the student is the teacher on short text.
- **retrieval**: question -> its paragraph among all the held-out paragraphs, nDCG@10 (and MRR@10,
  recall@10, accuracy@1) for teacher and student (``training.jina.held_out.HeldOutTask``), and
  the student's minus the teacher's.  Each model embeds every held-out text once; the cosine and the
  retrieval scores come from the same vectors.  The issue's target: within 2 nDCG@10 points.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from longembed.encoder import load_encoder
from longembed.errors import UserError
from longembed.training.data import TrainingPair, squad_pairs
from longembed.training.jina.held_out import HeldOutTask


def held_out_squad_pairs(data_dir: Path | str, titles: Sequence[str]) -> list[TrainingPair]:
    """The answerable SQuAD questions and paragraphs of the articles named ``titles``."""
    groups = {f"squad:{title}" for title in titles}
    return [pair for pair in squad_pairs(data_dir).pairs if pair.group in groups]


def short_text_fidelity(
    student: Path | str,
    teacher: Path | str,
    data_dir: Path | str,
    titles: Sequence[str],
    device: str | None = None,
    batch_size: int = 32,
    student_method: str | None = "native",
) -> dict[str, Any]:
    """The cosine and retrieval fidelity of ``student`` to ``teacher`` on the SQuAD articles ``titles``
    (module docstring); a ValueError when the titles hold no answerable question.  ``student_method``: how
    the student opens ("native" for a retrofit; None: as ``load_encoder`` opens the folder, e.g. a
    ``longembed train contextual`` folder with the method it was trained under)."""
    pairs = held_out_squad_pairs(data_dir, titles)
    if not pairs:
        raise UserError(f"no answerable SQuAD questions in the held-out articles {list(titles)}")
    task = HeldOutTask.from_pairs(pairs)
    teacher_encoder = load_encoder(teacher, method="truncate", device=device)
    student_encoder = load_encoder(student, method=student_method, device=device)
    texts = task.texts
    t = np.asarray(teacher_encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True))
    s = np.asarray(student_encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True))
    lengths = [len(ids) for ids in teacher_encoder.tokenizer(texts)["input_ids"]]
    short = np.asarray(lengths) <= teacher_encoder.max_length
    cosines = (t * s).sum(axis=1)[short]
    teacher_scores = task.score(dict(zip(texts, t, strict=True)))
    student_scores = task.score(dict(zip(texts, s, strict=True)))
    return {
        "articles": list(titles),
        "texts": int(short.sum()),
        "longer_than_lo": len(texts) - int(short.sum()),
        "cosine_mean": round(float(cosines.mean()), 4),
        "cosine_min": round(float(cosines.min()), 4),
        "cosine_p05": round(float(np.percentile(cosines, 5)), 4),
        "teacher": teacher_scores,
        "student": student_scores,
        "ndcg@10_difference": round(student_scores["ndcg@10"] - teacher_scores["ndcg@10"], 2),
    }
