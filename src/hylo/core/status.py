"""Episode statuses and outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hylo.core.jsonable import jsonable


class EpisodeStatus(StrEnum):
    """How an episode ended. Only `success`, `failure` and `safety_abort` are scored; the others abstain."""

    SUCCESS = "success"
    FAILURE = "failure"
    ERROR = "error"
    INFRA_INVALID = "infra_invalid"
    SAFETY_ABORT = "safety_abort"

    @property
    def scored(self) -> bool:
        """Whether the episode counts in the success rate's denominator."""
        return self in _SCORED

    @property
    def score(self) -> int | None:
        """1 for success, 0 for failure and safety_abort, None (abstain) for error and infra_invalid."""
        if self is EpisodeStatus.SUCCESS:
            return 1
        return 0 if self in _SCORED else None


_SCORED = frozenset({EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE, EpisodeStatus.SAFETY_ABORT})


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    """The verdict of one episode.

    `reason` is short and stable (`success`, `max_steps`, `truncated`, `terminated`, `watchdog`, `timeout`, or
    what raised, e.g. `agent raised ValueError: ...`); `detail` holds the long form (a traceback) when there is one.
    `success` follows from the status.
    """

    status: EpisodeStatus
    steps: int
    reason: str
    safety_interventions: int = field(default=0, kw_only=True)
    detail: str | None = field(default=None, kw_only=True)
    metrics: dict[str, Any] = field(default_factory=dict, kw_only=True)

    @property
    def success(self) -> bool:
        """Whether the episode succeeded: its status is `success`."""
        return self.status is EpisodeStatus.SUCCESS

    @classmethod
    def ended(
        cls,
        status: EpisodeStatus,
        steps: int,
        reason: str,
        *,
        safety_interventions: int = 0,
        detail: str | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> EpisodeOutcome:
        """The outcome of an episode that ended with `status`."""
        return cls(
            status, steps, reason, safety_interventions=safety_interventions, detail=detail, metrics=metrics or {}
        )

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON-ready values (the status by name)."""
        return {
            "status": self.status.value,
            "success": self.success,
            "steps": self.steps,
            "reason": self.reason,
            "safety_interventions": self.safety_interventions,
            "detail": self.detail,
            "metrics": jsonable(self.metrics),
        }
