"""What the EvalLog stores and gives back: one row per episode attempt (`EpisodeRow`) and the run's row with its
progress (`RunInfo`).

Apart from the EvalLog's SQLite (`hylo.eval.store`) because workers make rows, and reports read them, without a
database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import TaskInstance
from hylo.eval.run_status import RunStatus
from hylo.eval.stats import EpisodeRecord

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


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run row plus progress."""

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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["status"] = self.status.value
        return data


def records(rows: Iterable[EpisodeRow]) -> list[EpisodeRecord]:
    return [row.record() for row in rows]
