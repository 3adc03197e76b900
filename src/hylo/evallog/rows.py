"""What the EvalLog stores and gives back: one row per episode attempt (`EpisodeRow`) and the run's row with its
progress (`RunInfo`).

Apart from the EvalLog's SQLite (`hylo.evallog.store`) because workers make rows, and reports read them, without a
database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import TaskInstance
from hylo.evallog.run_status import RunStatus
from hylo.stats.success import EpisodeRecord, wilson_interval

WALL_TIME_METRICS = ("wall_s",)
"""The metrics that are wall time, which no run repeats (the measured `realtime.latency_s` too)."""


def repeatable_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """An episode's metrics less its wall-time figures: what the same episode, agent, protocol and seed give again,
    whatever the worker count, backend or batch size (under a modelled latency on the virtual clock)."""
    kept = {k: v for k, v in metrics.items() if k not in WALL_TIME_METRICS}
    realtime = kept.get("realtime")
    if isinstance(realtime, Mapping):
        kept["realtime"] = {k: v for k, v in realtime.items() if k != "latency_s"}
    return kept


@dataclass(frozen=True, slots=True)
class EpisodeRow:
    """One attempt of one episode, as the EvalLog stores it."""

    episode_id: str
    task: str
    split: str
    index: int
    base_seed: int
    seed: int
    status: EpisodeStatus
    reason: str
    success: bool
    steps: int
    safety_interventions: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float = 0.0
    attempt: int = 1
    detail: str | None = None
    worker: str | None = None
    video: str | None = None

    @classmethod
    def of(
        cls,
        task: TaskInstance,
        outcome: EpisodeOutcome,
        *,
        started_at: float,
        ended_at: float,
        metrics: dict[str, Any],
        attempt: int = 1,
        worker: str | None = None,
        video: str | None = None,
    ) -> EpisodeRow:
        """The row of one attempt of `task` that ended with `outcome`."""
        return cls(
            episode_id=task.episode_id,
            task=task.task,
            split=task.split,
            index=task.index,
            base_seed=task.base_seed,
            seed=task.seed,
            status=outcome.status,
            reason=outcome.reason,
            success=outcome.success,
            steps=outcome.steps,
            safety_interventions=outcome.safety_interventions,
            metrics=metrics,
            started_at=started_at,
            ended_at=ended_at,
            attempt=attempt,
            detail=outcome.detail,
            worker=worker,
            video=video,
        )

    def record(self) -> EpisodeRecord:
        value = self.metrics.get("return")
        episode_return = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return EpisodeRecord(
            self.episode_id,
            self.task,
            self.index,
            self.seed,
            self.status,
            self.reason,
            self.steps,
            self.success,
            episode_return=episode_return,
            success_signal=self.metrics.get("success_signal") is not False,
            base_seed=self.base_seed,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


class RunHealth(StrEnum):
    """How many of a run's final episodes abstained (`error` or `infra_invalid`: what the agent's success rate
    leaves out), so that a run whose episodes mostly crashed never passes for a plain `complete` one.

    - `ok`: none (or no episode yet)
    - `some_errors`: fewer than half
    - `mostly_errors`: half or more, not all
    - `all_errors`: every one
    """

    OK = "ok"
    SOME_ERRORS = "some_errors"
    MOSTLY_ERRORS = "mostly_errors"
    ALL_ERRORS = "all_errors"

    @classmethod
    def of(cls, abstained: int, n: int) -> RunHealth:
        if not abstained:
            return cls.OK
        if abstained >= n:
            return cls.ALL_ERRORS
        return cls.MOSTLY_ERRORS if 2 * abstained >= n else cls.SOME_ERRORS


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run row plus progress, and the tally of its final episodes by status (`status_counts`, every status,
    zeros included) with what follows from it: `scored`, `successes`, `success_rate` (None when nothing is scored)
    and its 95% Wilson interval `success_ci`, the `abstained` episodes and the run's `health`."""

    run_id: str
    status: RunStatus
    mode: str
    benchmark: str
    split: str | None
    agent: str
    digest: str
    spec: dict[str, Any]
    n_planned: int
    n_done: int
    created_at: float
    updated_at: float
    versions: dict[str, Any]
    git_commit: str | None
    message: str | None
    path: Path
    status_counts: dict[str, int] = field(default_factory=lambda: {status.value: 0 for status in EpisodeStatus})

    @property
    def scored(self) -> int:
        return sum(self.status_counts.get(status.value, 0) for status in EpisodeStatus if status.scored)

    @property
    def successes(self) -> int:
        return self.status_counts.get(EpisodeStatus.SUCCESS.value, 0)

    @property
    def abstained(self) -> int:
        return sum(self.status_counts.get(status.value, 0) for status in EpisodeStatus if not status.scored)

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.scored if self.scored else None

    @property
    def success_ci(self) -> tuple[float, float] | None:
        return wilson_interval(self.successes, self.scored) if self.scored else None

    @property
    def health(self) -> RunHealth:
        return RunHealth.of(self.abstained, sum(self.status_counts.values()))

    @property
    def agent_args(self) -> dict[str, Any]:
        """The agent's arguments (`-A key=value`), as its spec records them."""
        args = self.spec.get("agent_args")
        return dict(args) if isinstance(args, Mapping) else {}

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["status"] = self.status.value
        ci = self.success_ci
        data |= {
            "scored": self.scored,
            "successes": self.successes,
            "abstained": self.abstained,
            "success_rate": self.success_rate,
            "success_ci": None if ci is None else list(ci),
            "health": self.health.value,
        }
        return data


def records(rows: Iterable[EpisodeRow]) -> list[EpisodeRecord]:
    return [row.record() for row in rows]
