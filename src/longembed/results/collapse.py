"""A length-collapse measurement's results, typed: what ``longembed collapse`` writes.

For every TempScale temperature, one :class:`BucketStats` per length bucket: the embedding
statistics of the paper's Figure 1 (mean pairwise cosine, spread, norms) and sigma_a of the last
layer's attention (Figure 7).  ``complete`` is False until every temperature and bucket is done, so
a killed or failed run is never mistaken for a finished one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longembed.errors import UserError
from longembed.results.files import read_json, write_json

COLLAPSE_FORMAT = "longembed-collapse/1"
COLLAPSE_FILE = "collapse.json"


@dataclass
class BucketStats:
    """One bucket's texts under one encoder.

    ``length`` is in tokens seen by the model (special tokens included); for span buckets the mean.
    """

    kind: str  # "prefix" (same documents cut to length) or "span" (short spans of an interval)
    length: float
    n_texts: int
    n_documents: int
    content_tokens: int | None = None  # prefix buckets
    content_token_range: list[int] | None = None  # span buckets: [lower, upper)
    mean_content_tokens: float | None = None  # span buckets
    encode_seconds: float | None = None
    mean_norm: float | None = None
    std_norm: float | None = None
    mean_pairwise_cosine: float | None = None
    std_pairwise_cosine: float | None = None
    min_pairwise_cosine: float | None = None
    max_pairwise_cosine: float | None = None
    spread: float | None = None
    centroid_norm: float | None = None
    effective_dim: float | None = None
    sigma_a: float | None = None
    sigma_a_std: float | None = None
    sigma_a_min: float | None = None
    sigma_a_max: float | None = None
    sigma_a_n_texts: int | None = None
    sigma_a_seconds: float | None = None

    def metric(self, name: str) -> float | None:
        """A statistic by name (None when it was not measured)."""
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass
class CollapseResults:
    """Every temperature's buckets, the configuration, and whether the run finished."""

    config: dict[str, Any]
    temperatures: dict[str, list[BucketStats]] = field(default_factory=dict)  # str(tau) -> buckets
    complete: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": COLLAPSE_FORMAT,
            "complete": self.complete,
            "config": self.config,
            "temperatures": {
                tau: {"buckets": [b.to_dict() for b in buckets]} for tau, buckets in self.temperatures.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CollapseResults:
        fields = {f.name for f in dataclasses.fields(BucketStats)}
        return cls(
            config=data["config"],
            temperatures={
                tau: [BucketStats(**{k: v for k, v in b.items() if k in fields}) for b in entry["buckets"]]
                for tau, entry in data["temperatures"].items()
            },
            # files written before the marker existed got config.elapsed_seconds only when finished
            complete=data.get("complete", "elapsed_seconds" in data["config"]),
        )

    @classmethod
    def load(cls, path: str | Path) -> CollapseResults:
        """Read ``collapse.json`` (or the folder holding it)."""
        path = Path(path)
        if path.is_dir():
            path = path / COLLAPSE_FILE
        data = read_json(path, "longembed collapse file")
        if not isinstance(data, dict) or "temperatures" not in data or data.get("format", COLLAPSE_FORMAT) != (
            COLLAPSE_FORMAT
        ):
            raise UserError(f"{path} is not a longembed collapse file")
        return cls.from_dict(data)

    def save(self, path: str | Path) -> Path:
        return write_json(Path(path), self.to_dict())
