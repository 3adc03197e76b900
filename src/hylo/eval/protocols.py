"""Named evaluation protocols: the timing a run is scored under, fixed once and named (docs/protocols.md).

A `Protocol` fixes the timing (sync or realtime), the clock, the latency model, the execution horizon s (or leaves it
to the agent's own `execution_steps`), the chunk size H it requires (or none), the watchdog's hold limit and the
merge strategy (or leaves it open); `families` names the benchmarks it is meant for (empty: any). A realtime protocol
runs the chunked-execution schedule on the virtual clock with adaptive refill off, so its runs repeat exactly.

`hylo eval BENCH --protocol NAME` (a spec's `protocol`) runs under one: planning fills the spec's `timing` and
`timing_options` from it, so the options it resolves to are in the run's digest. Built-ins first, then the
entry-point group `hylo.protocols`, whose entry points name a `Protocol` or a zero-argument callable returning one:
`[project.entry-points."hylo.protocols"] libero-realtime-30ms = "mypkg.protocols:LIBERO_30MS"`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hylo.core.agent import MAX_CHUNK
from hylo.core.errors import shown
from hylo.core.latency import steps_for
from hylo.core.registry import Registry, RegistryError
from hylo.core.timing import CHUNKED_OPTIONS, check_horizon, timing_from
from hylo.eval.spec import MAX_NAME

ENTRY_POINT_GROUP = "hylo.protocols"

MAX_DESCRIPTION = 2000
"""The longest description a protocol may carry."""


class ProtocolError(RegistryError):
    """A protocol that cannot be loaded or is not a valid `Protocol`; the message names it."""


class Protocol(BaseModel):
    """A named, documented way to time an evaluation (docs/protocols.md). Exactly one of `latency_steps`,
    `latency_s`, `latency_model` for a realtime protocol, none for a sync one. `execution_steps` None: each chunk's
    own (the agent's `execution_steps`); `strategy` None: the run chooses (`--strategy`, default naive)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION)
    timing: Literal["sync", "realtime"]
    clock: Literal["virtual"] | None = None
    """The realtime clock: always the virtual one (a fixed or seeded latency makes runs repeatable); None for sync."""
    latency_steps: int | None = None
    latency_s: float | None = None
    latency_model: dict[str, Any] | None = None
    execution_steps: int | None = None
    chunk_size: int | None = Field(default=None, ge=1, le=MAX_CHUNK)
    """The chunk size H an agent must declare to run under it (None: any)."""
    max_hold_steps: int | None = None
    strategy: Literal["naive", "ensemble"] | None = None
    families: tuple[str, ...] = ()
    """The benchmarks it is meant for (empty: any); a run on another is refused."""

    @model_validator(mode="after")
    def _consistent(self) -> Protocol:
        """What a protocol fixes besides the timing it makes (`timing_from` validates that): the virtual clock and
        exactly one latency for a realtime one, no realtime field for a sync one, s within the rule for its H."""
        latencies = [key for key in ("latency_steps", "latency_s", "latency_model") if getattr(self, key) is not None]
        if self.timing == "sync":
            fields = ("clock", "execution_steps", "max_hold_steps", "strategy")
            realtime = [*latencies, *(key for key in fields if getattr(self, key) is not None)]
            if realtime:
                raise ValueError(f"sync protocol {self.name!r} cannot set {realtime}: they are realtime timing's")
            return self
        if self.clock != "virtual":
            raise ValueError(f"realtime protocol {self.name!r} runs on the virtual clock: set clock='virtual'")
        if len(latencies) != 1:
            raise ValueError(
                f"realtime protocol {self.name!r} sets exactly one of latency_steps, latency_s, latency_model; "
                f"got {latencies or 'none'}"
            )
        try:
            timing_from(*self.fixed_timing())
            if self.execution_steps is not None and self.latency_steps is not None:
                check_horizon(self.chunk_size, self.latency_steps, self.execution_steps)
        except ValueError as exc:
            raise ValueError(f"protocol {self.name!r}: {exc}") from None
        return self

    def fixed_timing(self) -> tuple[Literal["sync", "realtime"], dict[str, Any]]:
        """The spec's `timing` and `timing_options` this protocol fixes."""
        if self.timing == "sync":
            return "sync", {}
        options: dict[str, Any] = dict(CHUNKED_OPTIONS)
        for key in ("latency_steps", "latency_s", "latency_model", "execution_steps", "max_hold_steps", "strategy"):
            value = getattr(self, key)
            if value is not None:
                options[key] = value
        return "realtime", options

    def open_options(self) -> tuple[str, ...]:
        """The timing options a realtime run under this protocol may still set: s when it leaves s to the agent, the
        strategy and its weight when it leaves the strategy open, the weight when it fixes the ensemble. A sync
        protocol leaves none (sync timing takes no options)."""
        if self.timing == "sync":
            return ()
        opened: list[str] = []
        if self.execution_steps is None:
            opened.append("execution_steps")
        if self.strategy is None:
            opened.append("strategy")
        if self.strategy != "naive":
            opened.append("ensemble_m")
        return tuple(opened)

    def latency_text(self) -> str:
        """Its latency as a listing shows it: `2 steps`, `0.05 s`, `lognormal median 0.05 s sigma 0.25`, `none`."""
        if self.latency_steps is not None:
            return f"{self.latency_steps} step{'s' if self.latency_steps != 1 else ''}"
        if self.latency_s is not None:
            return f"{self.latency_s:g} s"
        model = self.latency_model
        if model is None:
            return "none"
        if model["kind"] == "lognormal":
            return f"lognormal median {model['median_s']:g} s sigma {model['sigma']:g}"
        return f"empirical ({len(model['samples_s'])} samples)"

    def fits(self, benchmark: str) -> bool:
        """Whether a run on `benchmark` may use it."""
        return not self.families or benchmark in self.families


SYNC = Protocol(
    name="sync",
    description="The world waits for every act: no latency, every action the policy returns is executed in order.",
    timing="sync",
)


def realtime_steps(d: int) -> Protocol:
    """`realtime-d<d>`: d control steps of latency on the virtual clock, s the agent's own, on any benchmark."""
    return Protocol(
        name=f"realtime-d{d}",
        description=(
            f"Chunked execution with {d} control step{'s' if d != 1 else ''} of latency on the virtual clock: a new "
            f"chunk every s steps (the agent's execution_steps), its first {d} actions dropped as stale."
        ),
        timing="realtime",
        clock="virtual",
        latency_steps=d,
        max_hold_steps=20,
    )


REALTIME_D1 = realtime_steps(1)
REALTIME_D2 = realtime_steps(2)
REALTIME_D4 = realtime_steps(4)


def jittered(family: str, label: str, rate_hz: float, median_s: float, sigma: float = 0.25) -> Protocol:
    """`<family>-realtime-<ms>ms`: a lognormal policy latency around `median_s`, seeded per episode on the virtual
    clock, on the benchmark `family` (its control rate `rate_hz`, stated in the description); s the agent's own."""
    dt = 1 / rate_hz
    steps = steps_for(median_s, dt)
    return Protocol(
        name=f"{family}-realtime-{round(median_s * 1000)}ms",
        description=(
            f"{label} ({rate_hz:g} Hz, dt {dt:g} s) with a jittered policy latency: lognormal, median {median_s:g} s "
            f"({steps} control steps), sigma {sigma:g}, seeded per episode on the virtual clock; chunked execution, "
            "s the agent's own."
        ),
        timing="realtime",
        clock="virtual",
        latency_model={"kind": "lognormal", "median_s": median_s, "sigma": sigma},
        max_hold_steps=20,
        families=(family,),
    )


METAWORLD_REALTIME_50MS = jittered("metaworld", "Meta-World", 80.0, 0.05)
LIBERO_REALTIME_100MS = jittered("libero", "LIBERO", 20.0, 0.1)

_BUILTIN: dict[str, str] = {
    "sync": "hylo.eval.protocols:SYNC",
    "realtime-d1": "hylo.eval.protocols:REALTIME_D1",
    "realtime-d2": "hylo.eval.protocols:REALTIME_D2",
    "realtime-d4": "hylo.eval.protocols:REALTIME_D4",
    "metaworld-realtime-50ms": "hylo.eval.protocols:METAWORLD_REALTIME_50MS",
    "libero-realtime-100ms": "hylo.eval.protocols:LIBERO_REALTIME_100MS",
}


def _protocol(target: str, value: Any) -> Protocol:
    if not isinstance(value, Protocol) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise ProtocolError(f"protocol {target!r} failed to build: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, Protocol):
        raise ProtocolError(f"protocol {target!r} is not a Protocol or a callable returning one: {shown(value)}")
    return value


PROTOCOL_REGISTRY: Registry[Protocol] = Registry(
    "protocol", ENTRY_POINT_GROUP, _BUILTIN, _protocol, error=ProtocolError
)


def registered_protocols() -> dict[str, str]:
    """Protocol name → `module:attr`: the built-ins, then the `hylo.protocols` entry points (sorted)."""
    return PROTOCOL_REGISTRY.entries()


def get_protocol(name: str) -> Protocol:
    """The protocol registered as `name`; `UnknownChoice` listing the known ones, `ProtocolError` when what it
    names is not a protocol or carries another name."""
    protocol = PROTOCOL_REGISTRY.get(name)
    if protocol.name != name:
        raise ProtocolError(f"protocol registered as {name!r} names itself {protocol.name!r}")
    return protocol


class ProtocolInfo(BaseModel):
    """A protocol as `hylo list protocols --json` and `GET /api/protocols` show it: its fields, its latency in words
    and the `timing_options` a run under it resolves to."""

    name: str
    description: str
    timing: Literal["sync", "realtime"]
    clock: str | None
    latency: str = Field(description="`2 steps`, `0.05 s`, `lognormal median 0.05 s sigma 0.25` or `none`")
    latency_steps: int | None
    latency_s: float | None
    latency_model: dict[str, Any] | None
    execution_steps: int | None = Field(description="s; null: the agent's own execution_steps")
    chunk_size: int | None = Field(description="the H an agent must declare; null: any")
    max_hold_steps: int | None
    strategy: str | None = Field(description="null: the run chooses (--strategy, default naive)")
    families: list[str] = Field(description="the benchmarks it is for; empty: any")
    timing_options: dict[str, Any]


def describe_protocol(protocol: Protocol) -> ProtocolInfo:
    """`protocol` as `hylo list protocols` and `GET /api/protocols` show it."""
    return ProtocolInfo(
        **protocol.model_dump(exclude={"families"}),
        latency=protocol.latency_text(),
        families=list(protocol.families),
        timing_options=protocol.fixed_timing()[1],
    )
