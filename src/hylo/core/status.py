"""Episode statuses and outcomes (004 §2.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, overload


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


_FIELDS = ("steps", "reason", "safety_interventions", "detail", "metrics")


@dataclass(frozen=True, slots=True, init=False)
class EpisodeOutcome:
    """The verdict of one episode.

    `reason` is short and stable (`success`, `max_steps`, `truncated`, `terminated`, `watchdog`, `timeout`, or
    what raised, e.g. `agent raised ValueError: ...`); `detail` holds the long form (a traceback) when there is one.
    `success` follows from the status. The older form `EpisodeOutcome(status, success, steps, reason, ...)` (or
    `success=` by keyword) is still accepted; a `success` that contradicts the status is refused.
    """

    status: EpisodeStatus
    steps: int
    reason: str
    safety_interventions: int = 0
    detail: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @overload
    def __init__(
        self,
        status: EpisodeStatus,
        steps: int,
        reason: str,
        safety_interventions: int = 0,
        detail: str | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        status: EpisodeStatus,
        success: bool,
        steps: int,
        reason: str,
        safety_interventions: int = 0,
        detail: str | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> None: ...

    def __init__(self, status: EpisodeStatus, *args: Any, success: bool | None = None, **named: Any) -> None:
        if args and isinstance(args[0], bool):  # the older form: `success` second
            success, args = args[0], args[1:]
        if len(args) > len(_FIELDS):
            raise TypeError(f"EpisodeOutcome takes at most {len(_FIELDS) + 1} positional arguments")
        unknown = sorted(set(named) - set(_FIELDS))
        if unknown:
            raise TypeError(f"EpisodeOutcome got unexpected keyword arguments {unknown}")
        values: dict[str, Any] = {"safety_interventions": 0, "detail": None, "metrics": None}
        for name, value in zip(_FIELDS, args, strict=False):
            if name in named:
                raise TypeError(f"EpisodeOutcome got multiple values for {name!r}")
            values[name] = value
        values.update(named)
        missing = [name for name in ("steps", "reason") if name not in values]
        if missing:
            raise TypeError(f"EpisodeOutcome is missing {missing}")
        if success is not None and bool(success) != (status is EpisodeStatus.SUCCESS):
            raise ValueError(f"success={success} contradicts status {EpisodeStatus(status).value!r}")
        setattr_ = object.__setattr__
        setattr_(self, "status", status)
        for name in _FIELDS:
            setattr_(self, name, values[name])
        if values["metrics"] is None:
            setattr_(self, "metrics", {})

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
        return cls(status, steps, reason, safety_interventions, detail, metrics)

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON-ready values (the status by name)."""
        from hylo.core.jsonable import jsonable

        return {
            "status": self.status.value,
            "success": self.success,
            "steps": self.steps,
            "reason": self.reason,
            "safety_interventions": self.safety_interventions,
            "detail": self.detail,
            "metrics": jsonable(self.metrics),
        }
