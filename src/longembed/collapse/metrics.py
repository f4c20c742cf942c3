"""Statistics of a set of embeddings that show length collapse.

Length collapse (the paper's Figure 1b/1c): embeddings of longer texts crowd together.  It
shows as a higher mean pairwise cosine similarity, a smaller spread of the normalized
embeddings around their centroid, and fewer effective directions.
"""

from __future__ import annotations

import numpy as np

from longembed.errors import UserError

__all__ = ["embedding_statistics"]

_EPS = 1e-12


def embedding_statistics(raw_embeddings: np.ndarray) -> dict[str, float]:
    """Collapse statistics of ``(n, d)`` embeddings taken *before* L2 normalization.

    Returns a dict of floats:

    * ``n``: number of embeddings;
    * ``mean_pairwise_cosine``: mean over pairs ``i < j`` of the cosine similarity (the
      paper's Figure 1c); ``std_pairwise_cosine``, ``min_pairwise_cosine`` and
      ``max_pairwise_cosine`` describe the same distribution;
    * ``spread``: mean Euclidean distance of the L2-normalized embeddings to their centroid
      (0 when all point the same way); ``centroid_norm``: norm of that centroid (1 when
      collapsed, near 0 for directions spread evenly);
    * ``effective_dim``: participation ratio ``(sum l)^2 / sum l^2`` of the eigenvalues ``l``
      of the covariance of the normalized embeddings (how many directions they really use);
    * ``mean_norm`` and ``std_norm``: norms before normalization.

    Pairwise values need at least two embeddings (NaN otherwise).  Zero vectors count as
    cosine 0 with everything.
    """
    x = np.asarray(raw_embeddings, dtype=np.float64)
    if x.ndim != 2:
        raise UserError(f"expected (n, d) embeddings, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise UserError("embeddings contain NaN or inf")
    n = x.shape[0]
    norms = np.linalg.norm(x, axis=1)
    unit = x / np.maximum(norms, _EPS)[:, None]
    nan = float("nan")
    stats: dict[str, float] = {
        "n": float(n),
        "mean_norm": float(norms.mean()) if n else nan,
        "std_norm": float(norms.std()) if n else nan,
    }
    if n >= 2:
        cos = unit @ unit.T
        pairs = cos[np.triu_indices(n, k=1)]
        stats.update(
            mean_pairwise_cosine=float(pairs.mean()),
            std_pairwise_cosine=float(pairs.std()),
            min_pairwise_cosine=float(pairs.min()),
            max_pairwise_cosine=float(pairs.max()),
        )
    else:
        stats.update(
            mean_pairwise_cosine=nan,
            std_pairwise_cosine=nan,
            min_pairwise_cosine=nan,
            max_pairwise_cosine=nan,
        )
    if n >= 1:
        centroid = unit.mean(axis=0)
        stats["spread"] = float(np.linalg.norm(unit - centroid, axis=1).mean())
        stats["centroid_norm"] = float(np.linalg.norm(centroid))
    else:
        stats["spread"] = stats["centroid_norm"] = nan
    if n >= 2:
        centred = unit - unit.mean(axis=0)
        # eigenvalues of the covariance = squared singular values of the centred data / n
        sv2 = np.linalg.svd(centred, compute_uv=False) ** 2
        total = sv2.sum()
        stats["effective_dim"] = float(total**2 / (sv2**2).sum()) if total > _EPS else 0.0
    else:
        stats["effective_dim"] = nan
    return stats
