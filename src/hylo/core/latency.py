"""Latency models for the virtual clock: how long each `act` takes, simulated, so a realtime run repeats exactly.

- `FixedLatency`: every call takes the same time (`seconds`) or the same number of control steps (`steps`).
- `LognormalLatency`: a lognormal with a median and a spread (`sigma`, the standard deviation of the log), the usual
  shape of a policy server's response times.
- `EmpiricalLatency`: latencies measured from a real policy server, drawn uniformly with replacement.

A model draws from a generator seeded per episode (`episode_rng`), from the episode's seed alone, so jitter is the
same for the same episode whatever the worker, backend or batch. `to_json` / `parse_latency_model` give the JSON form;
`check_latency_model` is the one a timing's `latency_model` (a spec's `timing_options["latency_model"]`) takes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hylo.core.errors import shown

MAX_SAMPLES = 100_000
"""The most measured latencies an empirical model holds."""

MAX_LATENCY_S = 86_400.0
"""The longest latency a model may be given: one day."""
MAX_SIGMA = 5.0
"""The widest lognormal spread (a factor of e^5, ~150, per standard deviation)."""

_STREAM = 0x1A7E_C7
"""Keeps the latency stream of an episode apart from every other stream drawn from its seed."""


def episode_rng(seed: int) -> np.random.Generator:
    """The generator an episode's latencies are drawn from."""
    return np.random.default_rng([seed, _STREAM])


def steps_for(latency_s: float, dt: float) -> int:
    """Control steps that pass while a call of `latency_s` runs: ceil(latency / dt), 0 for no latency."""
    return max(0, math.ceil(latency_s / dt - 1e-9))


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value <= MAX_LATENCY_S):
        raise ValueError(f"{name} must be a finite number of seconds in [0, {MAX_LATENCY_S:g}], got {shown(value)}")
    return float(value)


@dataclass(frozen=True, slots=True)
class FixedLatency:
    """Every call takes `seconds`, or `steps` control steps (exactly one of them)."""

    seconds: float | None = None
    steps: int | None = None

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.steps is None):
            raise ValueError("a fixed latency is given in seconds or in steps, exactly one of them")
        if self.seconds is not None:
            _seconds(self.seconds, "latency_s")
        steps = self.steps
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
            raise ValueError(f"latency_steps must be an int >= 0, got {self.steps!r}")

    def draw(self, rng: np.random.Generator, dt: float) -> tuple[float, int]:
        """(latency in seconds, in control steps) of the next call."""
        if self.steps is not None:
            return self.steps * dt, self.steps
        assert self.seconds is not None
        return self.seconds, steps_for(self.seconds, dt)

    def nominal_steps(self, dt: float) -> int:
        return self.steps if self.steps is not None else steps_for(self.seconds or 0.0, dt)

    def to_json(self) -> dict[str, Any]:
        if self.steps is not None:
            return {"kind": "fixed", "steps": self.steps}
        return {"kind": "fixed", "seconds": self.seconds}


@dataclass(frozen=True, slots=True)
class LognormalLatency:
    """log(latency) is normal around log(median_s) with standard deviation `sigma`."""

    median_s: float
    sigma: float

    def __post_init__(self) -> None:
        if not 0 < _seconds(self.median_s, "median_s") <= MAX_LATENCY_S:
            raise ValueError(f"median_s must be > 0 and at most {MAX_LATENCY_S:g} s, got {self.median_s!r}")
        if not _seconds(self.sigma, "sigma") <= MAX_SIGMA:
            raise ValueError(f"sigma must be at most {MAX_SIGMA:g}, got {self.sigma!r}")

    def draw(self, rng: np.random.Generator, dt: float) -> tuple[float, int]:
        latency = float(rng.lognormal(math.log(self.median_s), self.sigma))
        return latency, steps_for(latency, dt)

    def nominal_steps(self, dt: float) -> int:
        return steps_for(self.median_s, dt)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "lognormal", "median_s": self.median_s, "sigma": self.sigma}


@dataclass(frozen=True, slots=True)
class EmpiricalLatency:
    """Measured latencies, drawn uniformly with replacement."""

    samples_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.samples_s) <= MAX_SAMPLES:
            count = len(self.samples_s)
            raise ValueError(f"an empirical latency model holds 1 to {MAX_SAMPLES:,} samples, got {count}")
        object.__setattr__(self, "samples_s", tuple(_seconds(s, "a latency sample") for s in self.samples_s))

    def draw(self, rng: np.random.Generator, dt: float) -> tuple[float, int]:
        latency = self.samples_s[int(rng.integers(len(self.samples_s)))]
        return latency, steps_for(latency, dt)

    def nominal_steps(self, dt: float) -> int:
        return steps_for(float(np.median(self.samples_s)), dt)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "empirical", "samples_s": list(self.samples_s)}


LatencyModel = FixedLatency | LognormalLatency | EmpiricalLatency

_KEYS = {"fixed": ({"seconds", "steps"}, set()), "lognormal": ({"median_s", "sigma"}, {"median_s", "sigma"})}


def parse_latency_model(value: LatencyModel | Mapping[str, Any]) -> LatencyModel:
    """A latency model from its JSON form: {"kind": "lognormal", "median_s", "sigma"}, {"kind": "empirical",
    "samples_s": [...]} or {"kind": "fixed", "seconds" | "steps"}. Raises ValueError naming what is wrong."""
    if isinstance(value, (FixedLatency, LognormalLatency, EmpiricalLatency)):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"a latency model is an object with a 'kind', got {value!r}")
    kind = value.get("kind")
    fields = {k: v for k, v in value.items() if k != "kind"}
    if kind == "empirical":
        if set(fields) != {"samples_s"}:
            raise ValueError(f"an empirical latency model takes samples_s alone, got {sorted(fields)}")
        samples = fields["samples_s"]
        if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence):
            raise ValueError(f"samples_s must be a list of seconds, got {type(samples).__name__}")
        return EmpiricalLatency(tuple(samples))
    if kind not in _KEYS:
        raise ValueError(f"unknown latency model kind {kind!r}; choose 'fixed', 'lognormal' or 'empirical'")
    allowed, required = _KEYS[kind]
    unknown, missing = sorted(set(fields) - allowed), sorted(required - set(fields))
    if unknown or missing:
        raise ValueError(f"a {kind} latency model takes {sorted(allowed)}; unknown {unknown}, missing {missing}")
    if kind == "fixed":
        return FixedLatency(**fields)
    return LognormalLatency(**fields)


def check_latency_model(value: object) -> LatencyModel:
    """The latency model of the JSON form a timing's `latency_model` takes: `{"kind": "lognormal", "median_s": M,
    "sigma": S}` (0 < M <= one day, 0 <= S <= 5) or `{"kind": "empirical", "samples_s": [...]}` (1 to 100,000
    latencies in [0, one day] s); a fixed latency is `latency_s` or `latency_steps`. Raises ValueError naming what is
    wrong."""
    if not isinstance(value, Mapping):
        raise ValueError(f"latency_model is an object with a kind (lognormal or empirical), got {shown(value)}")
    if value.get("kind") not in ("lognormal", "empirical"):
        raise ValueError(f"latency_model kind must be 'lognormal' or 'empirical', got {shown(value.get('kind'))}")
    return parse_latency_model(value)
