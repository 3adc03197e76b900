"""What a session is at any moment (`SessionState`), what it runs (`SessionSetup`) and what it refuses
(`SessionConflict`, `SessionGone`): the words the session, its manager and the HTTP API share."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hylo.core.errors import HyloError
from hylo.envs.benchmark import Benchmark
from hylo.graph.compile import Plan


class SessionState(enum.StrEnum):
    STARTING = "starting"
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


class SessionConflict(HyloError):
    """The request does not fit the session's state (a field change that moves the episode while an execution runs,
    Pause while idle); HTTP 409. The message says what the state is and what would work."""


class SessionGone(HyloError):
    """The session is closed (or failed to start); its message says why."""


ENABLED: dict[str, frozenset[SessionState]] = {
    "idle": frozenset({SessionState.IDLE}),
    "running": frozenset({SessionState.RUNNING}),
    "paused": frozenset({SessionState.PAUSED}),
    "not_running": frozenset({SessionState.IDLE, SessionState.PAUSED}),
    "active": frozenset({SessionState.RUNNING, SessionState.PAUSED}),
}
"""The states in which an action is enabled, by its `enabled_when` (`always`: any)."""


@dataclass(frozen=True)
class SessionSetup:
    """What a session runs: a compiled graph on a benchmark, with the knobs of a run."""

    plan: Plan
    benchmark: Benchmark
    agent: str | None = None
    step_budget: int | None = None
    shield: bool = True
    render: bool = True
    act_timeout_s: float | None = None
