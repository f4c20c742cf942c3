"""TempScale candidates: one tau per side and an optional length decay, and how the best is chosen.

A candidate is a settings dict: ``{"temperature": 0.9}`` (one tau for queries and documents),
``{"query_temperature": 1.0, "document_temperature": 0.8}`` (separate taus, the length-collapse
paper's Appendix C.7), or a length-aware one ``{"temperature": 1.0, "temperature_decay": 0.5,
"temperature_reference": 512}`` (:func:`longembed.extension.scaling.length_temperature`).
:func:`choose` picks the best selection score; ties go to the least change from tau = 1, so a
temperature is adopted only when it beats "no change".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from longembed.config import check_temperature
from longembed.errors import UserError

#: Keys a candidate settings dict may have.
CANDIDATE_KEYS = (
    "temperature",
    "query_temperature",
    "document_temperature",
    "temperature_decay",
    "temperature_reference",
)
DEFAULT_REFERENCE = 512  # EncoderConfig.temperature_reference's default


# --------------------------------------------------------------------------- candidates
@dataclass(frozen=True)
class TemperatureCandidate:
    """One TempScale setting: a tau per side and an optional length decay (reference None if no decay)."""

    query_temperature: float = 1.0
    document_temperature: float = 1.0
    temperature_decay: float = 0.0
    temperature_reference: int | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> TemperatureCandidate:
        """Parse a settings dict (keys: :data:`CANDIDATE_KEYS`); unknown keys and bad values raise.

        ``temperature`` sets both sides; ``query_temperature``/``document_temperature`` override it
        per side. The reference is kept only when the decay is not 0 (otherwise it changes nothing).
        """
        unknown = sorted(set(settings) - set(CANDIDATE_KEYS))
        if unknown:
            raise UserError(f"unknown candidate setting(s) {unknown}; valid: {list(CANDIDATE_KEYS)}")
        both = check_temperature(settings.get("temperature", 1.0), "temperature")
        query = check_temperature(settings.get("query_temperature", both), "query_temperature")
        document = check_temperature(settings.get("document_temperature", both), "document_temperature")
        decay = settings.get("temperature_decay", 0.0)
        if isinstance(decay, bool) or not isinstance(decay, int | float) or not 0 <= decay <= 4:
            raise UserError(f"temperature_decay must be in [0, 4], got {decay!r}")
        reference = settings.get("temperature_reference", DEFAULT_REFERENCE)
        if isinstance(reference, bool) or not isinstance(reference, int) or reference < 2:
            raise UserError(f"temperature_reference must be an integer >= 2 (tokens), got {reference!r}")
        if decay == 0:
            return cls(query, document)
        return cls(query, document, float(decay), reference)

    @property
    def is_baseline(self) -> bool:
        """tau = 1 on both sides and no decay: the unmodified model."""
        return self.query_temperature == self.document_temperature == 1.0 and self.temperature_decay == 0

    @property
    def same_tau(self) -> bool:
        return self.query_temperature == self.document_temperature

    @property
    def encoder_key(self) -> tuple[float, int] | None:
        """What needs its own encoder: (decay, reference), or None for the shared constant-tau encoder."""
        if self.temperature_decay == 0:
            return None
        return (self.temperature_decay, int(self.temperature_reference or DEFAULT_REFERENCE))

    def settings(self) -> dict[str, Any]:
        """The full settings (every key explicit), as recorded in sweep.json."""
        return {
            "query_temperature": self.query_temperature,
            "document_temperature": self.document_temperature,
            "temperature_decay": self.temperature_decay,
            "temperature_reference": self.temperature_reference,
        }

    def encoder_options(self) -> dict[str, Any]:
        """EncoderConfig fields this candidate's encoder needs (empty: the shared encoder)."""
        key = self.encoder_key
        return {} if key is None else {"temperature_decay": key[0], "temperature_reference": key[1]}

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``tau=0.9``, ``q=1.0 d=0.8``, ``tau=1.0 decay=0.5 ref=512``."""
        if self.same_tau:
            text = f"tau={_num(self.query_temperature)}"
        else:
            text = f"q={_num(self.query_temperature)} d={_num(self.document_temperature)}"
        if self.temperature_decay:
            text += f" decay={_num(self.temperature_decay)} ref={self.temperature_reference}"
        return text

    @property
    def slug(self) -> str:
        """File-system name of the candidate's run folders, e.g. ``tau0.9``, ``q1.0-d0.8-decay0.5-ref512``."""
        return self.label.replace("=", "").replace(" ", "-")

    def change(self) -> tuple[bool, float, float]:
        """How far from the unmodified model (smaller = less change); the tie-break key."""
        deviation = abs(1.0 - self.query_temperature) + abs(1.0 - self.document_temperature)
        return (self.temperature_decay > 0, round(deviation, 9), self.temperature_decay)


BASELINE = TemperatureCandidate()


def _num(value: float) -> str:
    """1.0 -> "1.0", 0.85 -> "0.85" (shortest repr, always with a decimal point)."""
    return repr(float(value))


def parse_candidates(
    candidates: Sequence[Mapping[str, Any] | TemperatureCandidate], include_baseline: bool = True
) -> list[tuple[TemperatureCandidate, str]]:
    """Candidates in the given order, duplicates dropped, with the baseline added first if missing.

    Returns (candidate, source) pairs; source is "given" or "baseline (added)".
    """
    out: list[tuple[TemperatureCandidate, str]] = []
    seen: set[TemperatureCandidate] = set()
    for item in candidates:
        candidate = item if isinstance(item, TemperatureCandidate) else TemperatureCandidate.from_settings(item)
        if candidate not in seen:
            seen.add(candidate)
            out.append((candidate, "given"))
    if include_baseline and BASELINE not in seen:
        out.insert(0, (BASELINE, "baseline (added)"))
    if not out:
        raise UserError("no candidates to sweep")
    return out


def choose(
    scores: Sequence[tuple[TemperatureCandidate, float]], tie_tolerance: float = 0.0
) -> tuple[TemperatureCandidate, list[TemperatureCandidate]]:
    """The selected candidate and the candidates tied with the best score.

    The best selection score wins; candidates within ``tie_tolerance`` points of it are tied, and the
    tie goes to the least change from the unmodified model (:meth:`TemperatureCandidate.change`), then to the
    earliest given. So a temperature is only adopted when it beats "no change" on the selection task.
    """
    if not scores:
        raise UserError("no selection scores")
    if tie_tolerance < 0:
        raise UserError(f"tie_tolerance must be >= 0, got {tie_tolerance}")
    best = max(score for _, score in scores)
    tied = [(i, c) for i, (c, score) in enumerate(scores) if score >= best - tie_tolerance - 1e-9]
    winner = min(tied, key=lambda pair: (pair[1].change(), pair[0]))[1]
    return winner, [c for _, c in tied]
