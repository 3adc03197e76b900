"""An episode's timeline: its trace events (as `EvalLog.iter_trace` reads them back) made into one row per env step,
for the episode viewer. Which step an event belongs to is `hylo.evallog.steps`' cut, the Rerun export's too.

A row holds the step's action (flattened to numbers, one value per action dimension), whether it was the env's hold,
its reward and end flags, the shield's review of it and the range of sequence numbers of the trace events that belong
to it; beside the rows, every chunk the agent returned (when it was asked for, the step it was merged at, its size,
latency and the stale actions dropped) and how the episode ended. A review that aborted the episode executed no
action: it gets a row of its own, `executed` false.

The answer is bounded whatever the trace: at most `MAX_STEPS` rows from `first_step` on, and `MAX_DIMS` action
dimensions; `total_steps` and `total_dims` say what was cut. Pure: events in (read once, none kept), a `Timeline`
out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hylo.evallog.steps import STEP_KINDS, Placed, place_events

MAX_STEPS = 2000
"""The most steps one timeline holds."""

MAX_DIMS = 32
"""The most action dimensions one timeline holds (the first ones)."""


@dataclass(frozen=True)
class Review:
    """The shield's review of one action: approved (false: it aborted the episode), modified (clipped: an
    intervention), its reasons and the guard that refused it."""

    approved: bool
    modified: bool
    reasons: list[str]
    guard: str | None

    @property
    def intervention(self) -> bool:
        return self.modified or not self.approved


@dataclass
class StepRow:
    """One env step: what was executed, what came of it, what the shield said and its events' sequence numbers
    (`seq_first`..`seq_last`, inclusive). `action` is None when the action is not numbers (a digest of a large
    array, text)."""

    step: int
    executed: bool = False
    action: list[float | None] | None = None
    hold: bool = False
    reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    review: Review | None = None
    seq_first: int = 0
    seq_last: int = 0


@dataclass(frozen=True)
class ChunkRow:
    """One chunk the agent returned: asked for at step `requested_at`, merged at `start_step` (`delay_steps` later,
    its first `dropped` actions stale by then), `size` actions of which `execution_steps` are meant to run."""

    seq: int
    requested_at: int
    start_step: int
    size: int
    execution_steps: int
    latency_s: float | None
    virtual_latency_s: float | None
    dropped: int
    delay_steps: int


@dataclass(frozen=True)
class EpisodeEnd:
    """How the episode ended, as its `episode.end` event says."""

    status: str
    reason: str
    success: bool
    steps: int
    safety_interventions: int


@dataclass
class Timeline:
    """An episode's steps from `first_step` (at most `MAX_STEPS` of its `total_steps`), its action dimensions (at most
    `MAX_DIMS` of `total_dims`, named `dim_names`), its chunks merged at those steps, the control period `dt` (s; None
    when the trace does not tell) and how it ended (None: no `episode.end`, the episode was cut off). `cut` says in
    words what was left out, None when nothing was."""

    first_step: int
    total_steps: int
    total_dims: int
    dim_names: list[str]
    dt: float | None
    steps: list[StepRow] = field(default_factory=list)
    chunks: list[ChunkRow] = field(default_factory=list)
    end: EpisodeEnd | None = None
    cut: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def timeline(events: Iterable[Mapping[str, Any]], first_step: int = 0) -> Timeline:
    """The timeline of an episode's trace events, its rows from `first_step` on. The events are read once, in order,
    and not kept: a lazily read trace (`EvalLog.iter_trace`) is never held whole."""
    if first_step < 0:
        raise ValueError(f"first_step must be at least 0, got {first_step}")
    fold = _Fold(first_step)
    for placed in place_events(events):
        fold.add(placed)
    return fold.finished()


class _Fold:
    """A timeline made one placed event at a time, keeping only the rows and chunks in its window of steps."""

    def __init__(self, first_step: int) -> None:
        self.first_step = first_step
        self.rows: list[StepRow] = []  # the steps from `first_step` on, at most MAX_STEPS
        self.chunks: list[ChunkRow] = []
        self.names: list[str] = []  # the action dimensions' names, from the action with the most of them
        self.steps = 0  # the steps seen
        self.stepped = False  # whether any step ran or was refused
        self.dt: float | None = None
        self.end: EpisodeEnd | None = None

    def add(self, placed: Placed) -> None:
        """Count `placed` in its step, and keep what the timeline shows of it."""
        event = placed.event
        kind = event.get("event")
        self.steps = max(self.steps, placed.step + 1)
        self.stepped = self.stepped or kind in STEP_KINDS
        row = self._row(placed.step, placed.seq)
        if kind == "safety.review":
            if row is not None:
                row.review = _review(event)
        elif kind == "action":
            self._action(row, event)
        elif kind == "step.result":
            if row is not None:
                _result(row, event)
            if self.dt is None:
                self.dt = _control_period(event)
        elif kind == "agent.chunk":
            chunk = _chunk(event)
            if self.first_step <= chunk.start_step < self.first_step + MAX_STEPS:
                self.chunks.append(chunk)
        elif kind == "episode.end":
            self.end = _end(event)

    def _row(self, step: int, seq: int) -> StepRow | None:
        """The row of `step` when it is in the window (made when new), its sequence range stretched to `seq`."""
        at = step - self.first_step
        if not 0 <= at < MAX_STEPS:
            return None
        rows = self.rows
        while len(rows) <= at:
            rows.append(StepRow(step=self.first_step + len(rows), seq_first=seq, seq_last=seq))
        row = rows[at]
        row.seq_first, row.seq_last = min(row.seq_first, seq), max(row.seq_last, seq)
        return row

    def _action(self, row: StepRow | None, event: Mapping[str, Any]) -> None:
        value = event.get("action")
        names = _names(value)
        if names is not None and len(names) > len(self.names):
            self.names = names
        if row is not None:
            row.executed = True
            numbers = _numbers(value)
            row.action = None if numbers is None else numbers[:MAX_DIMS]
            row.hold = bool(event.get("hold", False))

    def finished(self) -> Timeline:
        """The timeline of the events added."""
        total_steps = self.steps if self.stepped else 0
        shown = self.rows if self.stepped else []
        return Timeline(
            first_step=self.first_step,
            total_steps=total_steps,
            total_dims=len(self.names),
            dim_names=self.names[:MAX_DIMS],
            dt=self.dt,
            steps=shown,
            chunks=self.chunks,
            end=self.end,
            cut=_cut(self.first_step, len(shown), total_steps, len(self.names)),
        )


def _cut(first_step: int, shown: int, total_steps: int, dims: int) -> str | None:
    """What the timeline left out, in words."""
    parts = []
    if shown < total_steps:
        parts.append(f"steps {first_step}–{first_step + shown - 1} of {total_steps}" if shown else "no step")
    if dims > MAX_DIMS:
        parts.append(f"the first {MAX_DIMS} of {dims} action dimensions")
    return "showing " + " and ".join(parts) if parts else None


def _result(row: StepRow, event: Mapping[str, Any]) -> None:
    row.executed = True
    row.reward = _float(event.get("reward"))
    row.terminated = bool(event.get("terminated", False))
    row.truncated = bool(event.get("truncated", False))
    row.success = bool(event.get("success", False))


def _review(event: Mapping[str, Any]) -> Review:
    reasons = event.get("reasons")
    guard = event.get("guard")
    return Review(
        approved=bool(event.get("approved", True)),
        modified=bool(event.get("modified", False)),
        reasons=[str(reason) for reason in reasons] if isinstance(reasons, list) else [],
        guard=guard if isinstance(guard, str) else None,
    )


def _chunk(event: Mapping[str, Any]) -> ChunkRow:
    requested_at = _int(event.get("requested_at"), 0)
    delay = _int(event.get("delay_steps"), 0)
    return ChunkRow(
        seq=_int(event.get("seq"), 0),
        requested_at=requested_at,
        start_step=requested_at + delay,
        size=_int(event.get("size"), 0),
        execution_steps=_int(event.get("execution_steps"), 0),
        latency_s=_float(event.get("latency_s")),
        virtual_latency_s=_float(event.get("virtual_latency_s")),
        dropped=_int(event.get("dropped"), 0),
        delay_steps=delay,
    )


def _end(event: Mapping[str, Any]) -> EpisodeEnd:
    return EpisodeEnd(
        status=str(event.get("status", "")),
        reason=str(event.get("reason", "")),
        success=bool(event.get("success", False)),
        steps=_int(event.get("steps"), 0),
        safety_interventions=_int(event.get("safety_interventions"), 0),
    )


def _control_period(event: Mapping[str, Any]) -> float | None:
    """The env's control period, from a step result: its simulated time over the steps done by then."""
    done = _int(event.get("step"), -1) + 1
    sim_time = _float(event.get("sim_time"))
    return sim_time / done if done > 0 and sim_time is not None and sim_time > 0 else None


def _names(value: Any, prefix: str = "") -> list[str] | None:
    """The names of the numbers in an action, in the order `_numbers` flattens them; None when it is not numbers."""
    if isinstance(value, bool | int | float) or value is None:
        return [prefix or "0"]
    if isinstance(value, list):
        names: list[str] = []
        for i, item in enumerate(value):
            inner = _names(item, f"{prefix}[{i}]" if prefix else str(i))
            if inner is None:
                return None
            names += inner
        return names
    if isinstance(value, dict) and not _is_digest(value):
        names = []
        for key, item in value.items():
            inner = _names(item, f"{prefix}.{key}" if prefix else str(key))
            if inner is None:
                return None
            names += inner
        return names
    return None


def _numbers(value: Any) -> list[float | None] | None:
    """An action's numbers, flattened (None for a NaN written as null); None when it is not numbers."""
    if isinstance(value, bool | int | float) or value is None:
        return [_float(value)]
    if isinstance(value, list | dict) and not (isinstance(value, dict) and _is_digest(value)):
        flat: list[float | None] = []
        for item in value.values() if isinstance(value, dict) else value:
            inner = _numbers(item)
            if inner is None:
                return None
            flat += inner
        return flat
    return None


def _is_digest(value: Mapping[str, Any]) -> bool:
    """A large array recorded by its digest (`{"digest", "shape", "dtype"}`), not its values."""
    return "digest" in value and "shape" in value


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
