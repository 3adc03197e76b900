"""Realtime figures of an episode and of a run, derived from the `metrics["realtime"]` the Kernel records for each
episode under realtime timing (docs/evallog.md, Realtime metrics).

A run's figures pool its episodes: latency percentiles are over every act of every episode (not an average of each
episode's percentiles) and the rates are ratios of sums. Episodes without the record (sync timing) contribute
nothing; a run with none of them has no realtime figures at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hylo.evallog.rows import EpisodeRow

KEY = "realtime"
"""The key of an episode's `metrics` that holds its realtime record."""

WATCHDOG = "watchdog"
"""The reason of an episode the watchdog ended (the queue held for longer than `max_hold_steps`)."""

PERCENTILES = (50, 95, 99)

_COUNTS = ("steps", "executed", "holds", "dropped", "chunks")


@dataclass(frozen=True)
class RealtimeRecord:
    """One episode's `metrics["realtime"]`, checked: the control period `dt` (s), env `steps`, agent actions
    `executed`, hold steps `holds`, stale actions `dropped`, `chunks` requested, the latency of every act measured
    (`latency_s`) and charged on the virtual clock (`virtual_latency_s`, None under the wall clock), each chunk's
    delay in control steps (`delay_steps`), and whether the watchdog ended the episode."""

    dt: float
    steps: int
    executed: int
    holds: int
    dropped: int
    chunks: int
    latency_s: tuple[float, ...]
    virtual_latency_s: tuple[float, ...] | None
    delay_steps: tuple[int, ...]
    watchdog: bool = False


def _count(episode_id: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"episode {episode_id}: metrics.realtime.{name} must be a count (an integer >= 0), got {value!r}"
        )
    return value


def _seconds(episode_id: str, name: str, values: Any) -> tuple[float, ...]:
    if not isinstance(values, list):
        raise ValueError(f"episode {episode_id}: metrics.realtime.{name} must be a list of seconds, got {values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(
                f"episode {episode_id}: metrics.realtime.{name} holds {value!r}, not a latency in seconds (>= 0)"
            )
    return tuple(float(value) for value in values)


def realtime_record(episode_id: str, reason: str, raw: Any) -> RealtimeRecord:
    """The checked record of one episode from its `metrics["realtime"]` value; a ValueError names the bad field."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"episode {episode_id}: metrics.realtime must be an object, got {raw!r}")
    missing = [name for name in ("dt", *_COUNTS, "latency_s", "delay_steps") if name not in raw]
    if missing:
        raise ValueError(f"episode {episode_id}: metrics.realtime lacks {', '.join(missing)}")
    dt = raw["dt"]
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ValueError(
            f"episode {episode_id}: metrics.realtime.dt must be a control period in seconds > 0, got {dt!r}"
        )
    counts = {name: _count(episode_id, name, raw[name]) for name in _COUNTS}
    virtual = raw.get("virtual_latency_s")
    delays = raw["delay_steps"]
    if not isinstance(delays, list):
        raise ValueError(f"episode {episode_id}: metrics.realtime.delay_steps must be a list, got {delays!r}")
    return RealtimeRecord(
        dt=float(dt),
        **counts,
        latency_s=_seconds(episode_id, "latency_s", raw["latency_s"]),
        virtual_latency_s=None if virtual is None else _seconds(episode_id, "virtual_latency_s", virtual),
        delay_steps=tuple(_count(episode_id, "delay_steps[]", delay) for delay in delays),
        watchdog=reason == WATCHDOG,
    )


def row_record(row: EpisodeRow) -> RealtimeRecord | None:
    """The realtime record of an EvalLog row, or None for an episode that ran without realtime timing."""
    raw = row.metrics.get(KEY)
    return None if raw is None else realtime_record(row.episode_id, row.reason, raw)


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of `values` by linear interpolation between the closest ranks (numpy's
    default): rank q/100 · (n − 1) of the sorted values."""
    if not values:
        raise ValueError("the percentile of no values is undefined")
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile is between 0 and 100, got {q}")
    return float(np.percentile(values, q))


def percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """`{"p50", "p95", "p99"}` of `values`; None when there are none."""
    if not values:
        return None
    return {f"p{q}": percentile(values, q) for q in PERCENTILES}


@dataclass(frozen=True)
class RealtimeFigures:
    """The realtime figures of one episode or of a run's episodes pooled (docs/evallog.md gives each formula).

    Counts are sums over the episodes; `sim_time_s` = Σ steps · dt; `control_rate_hz` = executed / sim_time_s;
    `stale_ratio` = dropped / executed; `hold_ratio` = holds / steps; `mean_delay_steps` = Σ delay_steps / chunks
    delivered. A ratio whose denominator is zero is None, as are the percentiles of no acts."""

    episodes: int
    steps: int
    executed: int
    holds: int
    dropped: int
    chunks: int
    acts: int
    watchdog_ends: int
    sim_time_s: float
    latency_s: dict[str, float] | None
    virtual_latency_s: dict[str, float] | None
    control_rate_hz: float | None
    stale_ratio: float | None
    hold_ratio: float | None
    mean_delay_steps: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "steps": self.steps,
            "executed": self.executed,
            "holds": self.holds,
            "dropped": self.dropped,
            "chunks": self.chunks,
            "acts": self.acts,
            "watchdog_ends": self.watchdog_ends,
            "sim_time_s": self.sim_time_s,
            "latency_s": self.latency_s,
            "virtual_latency_s": self.virtual_latency_s,
            "control_rate_hz": self.control_rate_hz,
            "stale_ratio": self.stale_ratio,
            "hold_ratio": self.hold_ratio,
            "mean_delay_steps": self.mean_delay_steps,
        }


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def realtime_figures(records: Iterable[RealtimeRecord | None]) -> RealtimeFigures | None:
    """The figures of `records` pooled (None entries, the episodes of sync timing, are skipped); None when no
    record is left."""
    kept = [record for record in records if record is not None]
    if not kept:
        return None
    measured = [latency for record in kept for latency in record.latency_s]
    virtual = [
        latency for record in kept if record.virtual_latency_s is not None for latency in record.virtual_latency_s
    ]
    delays = [delay for record in kept for delay in record.delay_steps]
    executed = sum(record.executed for record in kept)
    steps = sum(record.steps for record in kept)
    sim_time = math.fsum(record.steps * record.dt for record in kept)
    return RealtimeFigures(
        episodes=len(kept),
        steps=steps,
        executed=executed,
        holds=sum(record.holds for record in kept),
        dropped=sum(record.dropped for record in kept),
        chunks=sum(record.chunks for record in kept),
        acts=len(measured),
        watchdog_ends=sum(record.watchdog for record in kept),
        sim_time_s=sim_time,
        latency_s=percentiles(measured),
        virtual_latency_s=percentiles(virtual) if any(r.virtual_latency_s is not None for r in kept) else None,
        control_rate_hz=_ratio(executed, sim_time),
        stale_ratio=_ratio(sum(record.dropped for record in kept), executed),
        hold_ratio=_ratio(sum(record.holds for record in kept), steps),
        mean_delay_steps=_ratio(sum(delays), len(delays)),
    )


def run_realtime(rows: Iterable[EpisodeRow]) -> RealtimeFigures | None:
    """A run's realtime figures from its final episodes; None for a run without realtime timing."""
    return realtime_figures(row_record(row) for row in rows)


def episode_realtime(row: EpisodeRow) -> dict[str, Any] | None:
    """One episode's realtime figures as JSON (what episode listings carry beside the row); None without them."""
    figures = realtime_figures([row_record(row)])
    return None if figures is None else figures.to_json()
