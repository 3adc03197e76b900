"""An episode's timeline: its trace events (as `EvalLog.trace` reads them back) made into one row per env step, for
the episode viewer.

A row holds the step's action (flattened to numbers, one value per action dimension), whether it was the env's hold,
its reward and end flags, the shield's review of it and the range of sequence numbers of the trace events that belong
to it; beside the rows, every chunk the agent returned (when it was asked for, the step it was merged at, its size,
latency and the stale actions dropped) and how the episode ended. A review that aborted the episode executed no
action: it gets a row of its own, `executed` false.

The answer is bounded whatever the trace: at most `MAX_STEPS` rows from `first_step` on, and `MAX_DIMS` action
dimensions; `total_steps` and `total_dims` say what was cut. Pure: events in, a `Timeline` out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_STEPS = 2000
"""The most steps one timeline holds."""

MAX_DIMS = 32
"""The most action dimensions one timeline holds (the first ones)."""

_STEP_TAIL = frozenset({"observation", "container.checkpoint"})
"""Kinds that, right after a step's result, still belong to that step (its observation, a graph's checkpoint)."""


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


def timeline(events: Sequence[Mapping[str, Any]], first_step: int = 0) -> Timeline:
    """The timeline of an episode's trace events, its rows from `first_step` on."""
    if first_step < 0:
        raise ValueError(f"first_step must be at least 0, got {first_step}")
    rows = _step_rows(events)
    chunks = [_chunk(event) for event in events if event.get("event") == "agent.chunk"]
    names = _dim_names(events)
    total_steps = len(rows)
    shown = rows[first_step : first_step + MAX_STEPS]
    for row in shown:
        if row.action is not None:
            row.action = row.action[:MAX_DIMS]
    return Timeline(
        first_step=first_step,
        total_steps=total_steps,
        total_dims=len(names),
        dim_names=names[:MAX_DIMS],
        dt=_control_period(events),
        steps=shown,
        chunks=[chunk for chunk in chunks if first_step <= chunk.start_step < first_step + MAX_STEPS],
        end=_end(events),
        cut=_cut(first_step, len(shown), total_steps, len(names)),
    )


def _cut(first_step: int, shown: int, total_steps: int, dims: int) -> str | None:
    """What the timeline left out, in words."""
    parts = []
    if shown < total_steps:
        parts.append(f"steps {first_step}–{first_step + shown - 1} of {total_steps}" if shown else "no step")
    if dims > MAX_DIMS:
        parts.append(f"the first {MAX_DIMS} of {dims} action dimensions")
    return "showing " + " and ".join(parts) if parts else None


def _step_rows(events: Sequence[Mapping[str, Any]]) -> list[StepRow]:
    """One row per step, every event counted in one: events before the first step join step 0, those after the
    last step's result join the last step."""
    rows: list[StepRow] = []
    open_step = 0  # the step the next action is for
    closing = False  # just after a step's result: its observation and step_end still belong to it
    for index, event in enumerate(events):
        kind = event.get("event")
        seq = _int(event.get("seq"), index)
        if closing and (kind in _STEP_TAIL or _is_step_end(event)):
            _row(rows, open_step - 1, seq)
            continue
        closing = False
        row = _row(rows, open_step, seq)
        if kind == "safety.review":
            row.review = _review(event)
        elif kind == "action":
            row.executed = True
            row.action = _numbers(event.get("action"))
            row.hold = bool(event.get("hold", False))
        elif kind == "step.result":
            row.executed = True
            row.reward = _float(event.get("reward"))
            row.terminated = bool(event.get("terminated", False))
            row.truncated = bool(event.get("truncated", False))
            row.success = bool(event.get("success", False))
            open_step, closing = row.step + 1, True
    if rows and not rows[-1].executed and rows[-1].review is None:
        tail = rows.pop()  # the episode's closing events, after the last step: the last step's
        if rows:
            rows[-1].seq_last = tail.seq_last
        else:
            rows.append(tail)
    return rows if any(row.executed or row.review is not None for row in rows) else []


def _row(rows: list[StepRow], step: int, seq: int) -> StepRow:
    """The row of `step` (made, with the rows before it, when new), its sequence range stretched to `seq`."""
    while len(rows) <= step:
        rows.append(StepRow(step=len(rows), seq_first=seq, seq_last=seq))
    row = rows[step]
    row.seq_last = max(row.seq_last, seq)
    return row


def _is_step_end(event: Mapping[str, Any]) -> bool:
    return event.get("event") == "signal" and event.get("signal") == "step_end"


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


def _end(events: Sequence[Mapping[str, Any]]) -> EpisodeEnd | None:
    for event in reversed(events):
        if event.get("event") == "episode.end":
            return EpisodeEnd(
                status=str(event.get("status", "")),
                reason=str(event.get("reason", "")),
                success=bool(event.get("success", False)),
                steps=_int(event.get("steps"), 0),
                safety_interventions=_int(event.get("safety_interventions"), 0),
            )
    return None


def _control_period(events: Sequence[Mapping[str, Any]]) -> float | None:
    """The env's control period: a step result's simulated time over the steps done by then."""
    for event in events:
        if event.get("event") == "step.result":
            done = _int(event.get("step"), -1) + 1
            sim_time = _float(event.get("sim_time"))
            if done > 0 and sim_time is not None and sim_time > 0:
                return sim_time / done
    return None


def _dim_names(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the action's dimensions (`0`, `1`, … for a vector; `arm[0]`, `gripper` for a dict of arrays), from the
    executed action with the most of them."""
    best: list[str] = []
    for event in events:
        if event.get("event") == "action":
            names = _names(event.get("action"))
            if names is not None and len(names) > len(best):
                best = names
    return best


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
