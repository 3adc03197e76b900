"""How policy time relates to robot time (004 §2.2–2.3).

- `SyncTiming` (default): the world waits for every `act`.
- `RealtimeTiming`: the world moves on while the policy thinks. A chunk requested at step s and merged at step t has
  its first t − s actions dropped (they are already in the past); an empty queue executes the env's hold action;
  after `max_hold_steps` consecutive holds the watchdog ends the episode as `failure`, reason `watchdog`. When a chunk
  is requested is the schedule's:
  - `refill` (default): when at most `refill_steps` actions remain. With `adaptive_refill` (its default) the request
    comes earlier when the latency seen lately is longer than `refill_steps`, so a steady policy never starves.
  - `chunked`, the chunked-execution protocol (real-time chunking's, Black et al. 2025): a chunk holds H actions; a
    new one is requested every s control steps (`execution_steps`, else each chunk's own `execution_steps`); while
    the policy computes for d control steps the current chunk keeps running; the new chunk's first d actions are
    dropped and the rest replaces the current plan. s ≤ H − d keeps the queue from running dry, s ≥ d keeps at most
    one request in flight (`check_horizon`). The first chunk of an episode has no plan to run beside it: the robot
    holds for its d steps. A request still in flight when the next is due (a jittered latency beyond s) delays the
    next one until it is merged. Adaptive refill is off.

  `strategy` says how a chunk merges into the plan: `naive` replaces it; `ensemble` keeps every prediction made for a
  control step and executes their average, weighted exp(−m·i) with i = 0 the oldest (ACT's temporal ensembling, Zhao
  et al. 2023, made right for chunks that arrive late and every s steps).

Realtime clocks: `virtual` runs `act` inline and charges its latency in control steps: fixed (`latency_s` or
`latency_steps`), drawn from a seeded model per episode (`latency_model`, hylo.core.latency), or measured; `wall`
runs `act` in a worker thread while the loop is paced at the env's control rate (an env that is `self_paced` paces
itself and is never slept for). A measured latency varies from run to run, so only a modelled one makes realtime
runs repeatable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hylo.core.latency import FixedLatency, LatencyModel, parse_latency_model


class Clock(StrEnum):
    VIRTUAL = "virtual"
    WALL = "wall"


class Schedule(StrEnum):
    REFILL = "refill"
    CHUNKED = "chunked"


class Strategy(StrEnum):
    NAIVE = "naive"
    ENSEMBLE = "ensemble"


def _choice(kind: type[StrEnum], value: object, what: str) -> Any:
    try:
        return kind(value)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; choose one of {[c.value for c in kind]}") from None


def parse_clock(value: Clock | str) -> Clock:
    return _choice(Clock, value, "clock")  # type: ignore[no-any-return]


def check_horizon(chunk_size: int | None, latency_steps: int, execution_steps: int) -> None:
    """Refuse an execution horizon s the chunked-execution protocol cannot run: max(1, d) ≤ s ≤ H − d."""
    low = max(1, latency_steps)
    high = None if chunk_size is None else chunk_size - latency_steps
    if execution_steps < low or (high is not None and execution_steps > high):
        shown_h = "" if chunk_size is None else f" (H={chunk_size})"
        raise ValueError(
            f"execution horizon s={execution_steps} with latency d={latency_steps} steps breaks max(1, d) <= s <= H - d"
            f"{shown_h}: s < d would keep more than one request in flight, s > H - d runs the chunk dry before the"
            " next one arrives"
        )


@dataclass(frozen=True, slots=True)
class SyncTiming:
    @property
    def mode(self) -> str:
        return "sync"


def _int(value: object, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


@dataclass(frozen=True, slots=True)
class RealtimeTiming:
    refill_steps: int = 0
    max_hold_steps: int = 20
    clock: Clock | str = Clock.VIRTUAL
    latency_s: float | None = None
    adaptive_refill: bool | None = None
    """None: on for the refill schedule, off for the chunked one (which refuses it)."""
    schedule: Schedule | str = Schedule.REFILL
    execution_steps: int | None = None
    latency_steps: int | None = None
    latency_model: Mapping[str, Any] | None = None
    strategy: Strategy | str = Strategy.NAIVE
    ensemble_m: float = 0.01
    model: LatencyModel | None = field(default=None, init=False, compare=False, repr=False)
    """The virtual clock's latency model (from latency_s, latency_steps or latency_model); None: measured."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock", parse_clock(self.clock))
        object.__setattr__(self, "schedule", _choice(Schedule, self.schedule, "schedule"))
        object.__setattr__(self, "strategy", _choice(Strategy, self.strategy, "strategy"))
        _int(self.refill_steps, "refill_steps", 0)
        _int(self.max_hold_steps, "max_hold_steps", 1)
        chunked = self.schedule is Schedule.CHUNKED
        if self.adaptive_refill is None:
            object.__setattr__(self, "adaptive_refill", not chunked)
        elif not isinstance(self.adaptive_refill, bool):
            raise ValueError(f"adaptive_refill must be true or false, got {self.adaptive_refill!r}")
        if chunked and (self.adaptive_refill or self.refill_steps):
            refill = (
                f"adaptive_refill={self.adaptive_refill}"
                if self.adaptive_refill
                else f"refill_steps={self.refill_steps}"
            )
            raise ValueError(
                "the chunked schedule requests a chunk every execution_steps steps: it takes no refill_steps and no "
                f"adaptive_refill, got {refill}"
            )
        if self.execution_steps is not None:
            if not chunked:
                raise ValueError("execution_steps sets the chunked schedule's horizon; add schedule='chunked'")
            _int(self.execution_steps, "execution_steps", 1)
        m = self.ensemble_m
        if isinstance(m, bool) or not (isinstance(m, (int, float)) and math.isfinite(m) and m >= 0):
            raise ValueError(f"ensemble_m must be a finite number >= 0, got {self.ensemble_m!r}")
        given = [name for name in ("latency_s", "latency_steps", "latency_model") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one latency, got {given}")
        if given and self.clock is Clock.WALL:
            raise ValueError(f"{given[0]} sets the virtual clock's latency; the wall clock measures it")
        model: LatencyModel | None = None
        if self.latency_s is not None:
            if isinstance(self.latency_s, bool) or not isinstance(self.latency_s, (int, float)):
                raise ValueError(f"latency_s must be a finite number >= 0, got {self.latency_s!r}")
            if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
                raise ValueError(f"latency_s must be a finite number >= 0, got {self.latency_s}")
            model = FixedLatency(seconds=float(self.latency_s))
        elif self.latency_steps is not None:
            model = FixedLatency(steps=self.latency_steps)
        elif self.latency_model is not None:
            model = parse_latency_model(self.latency_model)
        object.__setattr__(self, "model", model)
        if isinstance(model, FixedLatency) and model.steps is not None and self.execution_steps is not None:
            check_horizon(None, model.steps, self.execution_steps)

    @property
    def mode(self) -> str:
        return f"realtime/{Clock(self.clock).value}"

    @property
    def chunked(self) -> bool:
        return self.schedule is Schedule.CHUNKED

    def nominal_latency_steps(self, dt: float) -> int | None:
        """d: the fixed latency, or the median of a distribution, in control steps; None when it is measured."""
        return None if self.model is None else self.model.nominal_steps(dt)

    def check_bind(self, dt: float, chunk_size: int | None) -> None:
        """Refuse, before any episode runs, a chunked horizon the env's control rate and the agent's declared
        chunk size (`chunk_size`, H) make impossible."""
        d = self.nominal_latency_steps(dt)
        if self.chunked and self.execution_steps is not None and d is not None:
            check_horizon(chunk_size, d, self.execution_steps)


Timing = SyncTiming | RealtimeTiming


def parse_timing(value: Timing | str | None) -> Timing:
    if value is None or value == "sync":
        return SyncTiming()
    if value == "realtime":
        return RealtimeTiming()
    if isinstance(value, (SyncTiming, RealtimeTiming)):
        return value
    raise ValueError(f"unknown timing {value!r}; choose 'sync', 'realtime', SyncTiming() or RealtimeTiming(...)")
