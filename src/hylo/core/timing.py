"""How policy time relates to robot time (004 §2.2–2.3).

- `SyncTiming` (default): the world waits for every `act`.
- `RealtimeTiming`: the world moves on while the policy thinks. A chunk is requested when at most `refill_steps`
  actions remain; a chunk requested at step s and merged at step t has its first t − s actions dropped (they are
  already in the past); an empty queue executes the env's hold action; after `max_hold_steps` consecutive holds the
  watchdog ends the episode as `failure`, reason `watchdog`. With `adaptive_refill` (default) the request comes
  earlier when the latency seen lately is longer than `refill_steps`, so a steady policy never starves the queue.

Realtime clocks: `virtual` runs `act` inline and charges its latency (fixed by `latency_s`, or measured) in steps;
`wall` runs `act` in a worker thread while the loop is paced at the env's
control rate (an env that is `self_paced` paces itself and is never slept for). A measured latency varies from run
to run, so only a fixed `latency_s` makes realtime runs repeatable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Clock(StrEnum):
    VIRTUAL = "virtual"
    WALL = "wall"


def parse_clock(value: Clock | str) -> Clock:
    try:
        return Clock(value)
    except ValueError:
        raise ValueError(f"unknown clock {value!r}; choose one of {[c.value for c in Clock]}") from None


@dataclass(frozen=True, slots=True)
class SyncTiming:
    @property
    def mode(self) -> str:
        return "sync"


@dataclass(frozen=True, slots=True)
class RealtimeTiming:
    refill_steps: int = 0
    max_hold_steps: int = 20
    clock: Clock | str = Clock.VIRTUAL
    latency_s: float | None = None
    adaptive_refill: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock", parse_clock(self.clock))
        for name in ("refill_steps", "max_hold_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if self.refill_steps < 0:
            raise ValueError(f"refill_steps must be >= 0, got {self.refill_steps}")
        if self.max_hold_steps < 1:
            raise ValueError(f"max_hold_steps must be >= 1, got {self.max_hold_steps}")
        if self.latency_s is not None:
            if self.clock is Clock.WALL:
                raise ValueError("latency_s fixes the virtual clock's latency; the wall clock measures it")
            if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
                raise ValueError(f"latency_s must be a finite number >= 0, got {self.latency_s}")

    @property
    def mode(self) -> str:
        return f"realtime/{Clock(self.clock).value}"

    def latency_steps(self, measured_s: float, dt: float) -> int:
        """Control steps that pass while the policy computes (virtual clock)."""
        latency = measured_s if self.latency_s is None else self.latency_s
        return max(0, math.ceil(latency / dt - 1e-9))


Timing = SyncTiming | RealtimeTiming


def parse_timing(value: Timing | str | None) -> Timing:
    if value is None or value == "sync":
        return SyncTiming()
    if value == "realtime":
        return RealtimeTiming()
    if isinstance(value, (SyncTiming, RealtimeTiming)):
        return value
    raise ValueError(f"unknown timing {value!r}; choose 'sync', 'realtime', SyncTiming() or RealtimeTiming(...)")
