"""How policy time relates to robot time.

A timing is one of a tagged union, `Timing` = `SyncTiming | RefillTiming | ChunkedTiming`, frozen and validated when
it is made; `timing_from(timing, options)` makes it from a spec's `timing` and `timing_options` (the one place they
are checked: `hylo.eval.spec`, the command line, the protocols and the Kernel all build it).

- `SyncTiming` (default): the world waits for every `act`.
- `RealtimeTiming`, the realtime members' base: the world moves on while the policy thinks. A chunk requested at step
  s and merged at step t has its first t − s actions dropped (they are already in the past); an empty queue executes
  the env's hold action; after `max_hold_steps` consecutive holds the watchdog ends the episode as `failure`, reason
  `watchdog`. When a chunk is requested is the schedule's, and the schedule picks the member
  (`RealtimeTiming(**options)` makes the one `schedule` names):
  - `RefillTiming` (`schedule="refill"`, the default): when at most `refill_steps` actions remain. With
    `adaptive_refill` (its default) the request comes earlier when the latency seen lately is longer than
    `refill_steps`, so a steady policy never starves.
  - `ChunkedTiming` (`schedule="chunked"`), the chunked-execution protocol (real-time chunking's, Black et al. 2025):
    a chunk holds H actions; a new one is requested every s control steps (`execution_steps`, else each chunk's own
    `execution_steps`); while the policy computes for d control steps the current chunk keeps running; the new
    chunk's first d actions are dropped and the rest replaces the current plan. s ≤ H − d keeps the queue from
    running dry, s ≥ d keeps at most one request in flight (`check_horizon`). The first chunk of an episode has no
    plan to run beside it: the robot holds for its d steps. A request still in flight when the next is due (a
    jittered latency beyond s) delays the next one until it is merged. Adaptive refill is off.

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

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    PrivateAttr,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from hylo.core.errors import shown
from hylo.core.latency import MAX_LATENCY_S, FixedLatency, LatencyModel, check_latency_model


class Clock(StrEnum):
    VIRTUAL = "virtual"
    WALL = "wall"


class Schedule(StrEnum):
    REFILL = "refill"
    CHUNKED = "chunked"


class Strategy(StrEnum):
    NAIVE = "naive"
    ENSEMBLE = "ensemble"


MAX_STEPS = 10_000_000
"""The most control steps anything counts: a timing option's steps, an episode's step budget (hylo.eval.spec)."""
MAX_HORIZON = 10_000
"""The longest execution horizon s: no chunk is longer (hylo.core.agent.MAX_CHUNK)."""
MAX_ENSEMBLE_M = 100.0
"""The largest ensemble weight decay `ensemble_m`."""

TIMING_OPTIONS = (
    "refill_steps",
    "max_hold_steps",
    "latency_s",
    "clock",
    "adaptive_refill",
    "schedule",
    "execution_steps",
    "latency_steps",
    "latency_model",
    "strategy",
    "ensemble_m",
)
"""Realtime timing's options: the keys of a spec's `timing_options`, `RealtimeTiming`'s keyword arguments."""
CHUNKED_OPTIONS: dict[str, Any] = {"schedule": "chunked", "adaptive_refill": False, "clock": "virtual"}
"""What the chunked-execution protocol on the virtual clock fixes besides its latency and horizon: what a realtime
protocol, the chunked flags of `hylo eval` and every point of a sweep select."""

_COUNTS = {"refill_steps": (0, MAX_STEPS), "max_hold_steps": (1, MAX_STEPS),
           "execution_steps": (1, MAX_HORIZON), "latency_steps": (0, MAX_STEPS)}  # fmt: skip
_CHOICES: dict[str, type[StrEnum]] = {"clock": Clock, "schedule": Schedule, "strategy": Strategy}
_LATENCIES = ("latency_s", "latency_steps", "latency_model")


def _choice(kind: type[StrEnum], value: object, what: str) -> Any:
    try:
        return kind(value)  # type: ignore[arg-type]
    except ValueError:
        raise ValueError(f"unknown {what} {shown(value)}; choose one of {[c.value for c in kind]}") from None


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


def _number(value: object, name: str, maximum: float, what: str = "number") -> float:
    """`value` if it is a finite number in [0, maximum]; else ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value <= maximum):
        raise ValueError(f"{name} must be a finite {what} in [0, {maximum:g}], got {shown(value)}")
    return value


class SyncTiming(BaseModel):
    """The world waits for every `act`; it takes no options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @property
    def mode(self) -> str:
        return "sync"


class TimingOptions(BaseModel):
    """Realtime timing's options, each checked on its own (its type and bounds), and the latency they give (at most
    one, none on the wall clock). `RealtimeTiming` adds how the schedule's options hold together; a spec's options
    that a protocol, `--timing realtime` or a sweep completes later are checked as `TimingOptions` until then."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    refill_steps: int = 0
    max_hold_steps: int = 20
    clock: Clock = Clock.VIRTUAL
    latency_s: float | None = None
    adaptive_refill: bool | None = None
    """None: on for the refill schedule, off for the chunked one (which refuses it)."""
    schedule: Schedule = Schedule.REFILL
    execution_steps: int | None = None
    latency_steps: int | None = None
    latency_model: dict[str, Any] | None = None
    """The JSON form of a latency model (hylo.core.latency.check_latency_model)."""
    strategy: Strategy = Strategy.NAIVE
    ensemble_m: float = 0.01

    @model_validator(mode="before")
    @classmethod
    def _known_options(cls, data: Any) -> Any:
        """Refuse an unknown option naming the valid ones; an `adaptive_refill` of None is the schedule's default."""
        if not isinstance(data, Mapping):
            return data
        unknown = sorted(str(key) for key in data if key not in TIMING_OPTIONS)
        if unknown:
            raise ValueError(f"unknown timing options {unknown}; choose from {list(TIMING_OPTIONS)}")
        return {key: value for key, value in data.items() if not (key == "adaptive_refill" and value is None)}

    @field_validator(*_CHOICES, mode="before")
    @classmethod
    def _one_of(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        return _choice(_CHOICES[name], value, name)

    @field_validator(*_COUNTS, mode="before")
    @classmethod
    def _count(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name or ""
        low, high = _COUNTS[name]
        if value is None and name in ("execution_steps", "latency_steps"):
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an int >= {low} and at most {high:,}, got {shown(value)}")
        return value

    @field_validator("adaptive_refill", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"adaptive_refill must be true or false, got {shown(value)}")
        return value

    @field_validator("latency_s", mode="before")
    @classmethod
    def _latency_s(cls, value: Any) -> Any:
        return None if value is None else _number(value, "latency_s", MAX_LATENCY_S, "number of seconds")

    @field_validator("ensemble_m", mode="before")
    @classmethod
    def _ensemble_m(cls, value: Any) -> Any:
        return _number(value, "ensemble_m", MAX_ENSEMBLE_M)

    @field_validator("latency_model", mode="before")
    @classmethod
    def _latency_model(cls, value: Any) -> Any:
        if value is not None:
            check_latency_model(value)
        return value

    @model_validator(mode="after")
    def _one_latency(self) -> Self:
        given = [name for name in _LATENCIES if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one latency, got {given}")
        if given and self.clock is Clock.WALL:
            raise ValueError(f"{given[0]} sets the virtual clock's latency; the wall clock measures it")
        return self


def _schedule_tag(value: Any) -> str:
    """Which member of `Timing` a value is or validates to: its `schedule` (realtime options without one: refill)."""
    if isinstance(value, SyncTiming):
        return "sync"
    schedule = value.get("schedule") if isinstance(value, Mapping) else getattr(value, "schedule", None)
    return Schedule.CHUNKED.value if schedule == Schedule.CHUNKED else Schedule.REFILL.value


class RealtimeTiming(TimingOptions):
    """The realtime members' base: `RealtimeTiming(**options)` makes `RefillTiming` or `ChunkedTiming`, the one
    `schedule` names; `model` is the virtual clock's latency model (None: measured)."""

    _model: LatencyModel | None = PrivateAttr(default=None)

    def __new__(cls, *args: Any, **options: Any) -> Self:
        if cls is RealtimeTiming:  # the member `schedule` names
            member = ChunkedTiming if _schedule_tag(options) == Schedule.CHUNKED else RefillTiming
            return super().__new__(member)  # type: ignore[return-value]
        return super().__new__(cls)

    @field_validator("latency_model", mode="before")
    @classmethod
    def _latency_model(cls, value: Any) -> Any:
        return value  # checked as it is parsed, once, when the timing is made (`_latency`)

    @model_validator(mode="after")
    def _latency(self) -> Self:
        if self.latency_s is not None:
            self._model = FixedLatency(seconds=float(self.latency_s))
        elif self.latency_steps is not None:
            self._model = FixedLatency(steps=self.latency_steps)
        elif self.latency_model is not None:
            self._model = check_latency_model(self.latency_model)
        return self

    @property
    def model(self) -> LatencyModel | None:
        """The virtual clock's latency model (from latency_s, latency_steps or latency_model); None: measured."""
        return self._model

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


class RefillTiming(RealtimeTiming):
    """The refill schedule: a chunk is requested when at most `refill_steps` actions remain (earlier with
    `adaptive_refill`, on by default, when the latency seen lately is longer)."""

    schedule: Literal[Schedule.REFILL] = Schedule.REFILL
    adaptive_refill: bool = True

    @field_validator("execution_steps")
    @classmethod
    def _no_horizon(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError("execution_steps sets the chunked schedule's horizon; add schedule='chunked'")
        return value


class ChunkedTiming(RealtimeTiming):
    """The chunked-execution protocol: a chunk every s = `execution_steps` control steps (None: each chunk's own),
    with no refill threshold and adaptive refill off."""

    schedule: Literal[Schedule.CHUNKED] = Schedule.CHUNKED
    adaptive_refill: bool = False

    @model_validator(mode="after")
    def _chunked(self) -> Self:
        if self.adaptive_refill or self.refill_steps:
            refill = "adaptive_refill=True" if self.adaptive_refill else f"refill_steps={self.refill_steps}"
            raise ValueError(
                "the chunked schedule requests a chunk every execution_steps steps: it takes no refill_steps and no "
                f"adaptive_refill, got {refill}"
            )
        if self.latency_steps is not None and self.execution_steps is not None:
            check_horizon(None, self.latency_steps, self.execution_steps)
        return self


Timing = Annotated[
    Annotated[SyncTiming, Tag("sync")]
    | Annotated[RefillTiming, Tag("refill")]
    | Annotated[ChunkedTiming, Tag("chunked")],
    Discriminator(_schedule_tag),
]
"""A timing: the tagged union of its three members. Realtime options validate to the member their `schedule` names."""

_TIMING: TypeAdapter[Timing] = TypeAdapter(Timing)
_TAGS = ("sync", "refill", "chunked")


def _said(error: ErrorDetails) -> str:
    """One validation error as a refusal says it: our own reasons as they are, pydantic's after the option."""
    message = str(error["msg"])
    if error["type"] == "value_error":
        return message.removeprefix("Value error, ")
    where = ".".join(str(part) for part in error["loc"] if part not in _TAGS)
    return f"{where}: {message}" if where else message


def _reason(exc: ValidationError) -> ValueError:
    return ValueError("; ".join(_said(error) for error in exc.errors()))


def timing_from(timing: str, options: Mapping[str, Any]) -> Timing:
    """The timing a spec's `timing` and `timing_options` make, validated: `SyncTiming()` for "sync", which takes no
    options; for "realtime", the member of `Timing` that `options["schedule"]` names. Raises ValueError stating the
    reason on one line."""
    if timing == "sync":
        if options:
            raise ValueError(f"timing options {sorted(options)} need --timing realtime")
        return SyncTiming()
    if timing != "realtime":
        raise ValueError(f"unknown timing {shown(timing)}; choose 'sync' or 'realtime'")
    try:
        return _TIMING.validate_python(dict(options))
    except ValidationError as exc:
        raise _reason(exc) from None


def check_timing_options(options: Mapping[str, Any]) -> None:
    """Refuse realtime timing options that no timing can take whatever completes them (a protocol, `--timing
    realtime`, a sweep): an unknown one, a value of the wrong type or out of bounds, two latencies. Raises ValueError
    stating the reason on one line."""
    try:
        TimingOptions.model_validate(dict(options))
    except ValidationError as exc:
        raise _reason(exc) from None


def parse_timing(value: SyncTiming | RealtimeTiming | str | None) -> Timing:
    """The Kernel's timing: a member of `Timing`, or "sync" / "realtime" (its defaults)."""
    if value is None or value == "sync":
        return SyncTiming()
    if value == "realtime":
        return RefillTiming()
    if isinstance(value, (SyncTiming, RefillTiming, ChunkedTiming)):
        return value
    raise ValueError(f"unknown timing {value!r}; choose 'sync', 'realtime', SyncTiming() or RealtimeTiming(...)")
