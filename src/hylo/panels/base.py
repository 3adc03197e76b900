"""The env-panel contract: a small declarative control surface for the out-of-loop env knobs.

A panel lists `fields` (inputs) and `actions` (buttons) and answers four async hooks: `on_load` (a `PanelState`: status
and the values the runner reads, `step_budget` among them), `on_field_change`, `on_action` and `on_options` (each a
`PanelReply`). Hooks never do things: their answer names an intent (`SideEffect`), which the framework carries out. A
hook refuses what it is asked by raising `PanelRefused`, naming the bad value. A panel imports no runner or executor.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, get_args

from hylo.core.errors import HyloError
from hylo.core.types import NodesetMode


class SideEffect(StrEnum):
    """What a hook's answer asks the framework to do (`carry_out` does it): start, pause, stop or step the execution,
    deliver a lifecycle signal, or nothing."""

    RUN_START = "run_start"
    RUN_PAUSE = "run_pause"
    RUN_STOP = "run_stop"
    RUN_STEP = "run_step"
    SIGNAL = "signal"
    NONE = "none"


SideEffectName = Literal["run_start", "run_pause", "run_stop", "run_step", "signal", "none"]
"""A side effect as a panel may write it, a plain string (`SideEffect`'s values)."""

SIDE_EFFECTS: tuple[str, ...] = get_args(SideEffectName)
FieldKind = Literal["select", "number", "text", "slider"]
EnabledWhen = Literal["idle", "running", "paused", "not_running", "active", "always"]
"""When an action is enabled: `running` (an execution is advancing), `paused`, `idle` (no execution), `not_running`
(idle or paused), `active` (running or paused), `always`."""


@dataclass(frozen=True, slots=True)
class EnvPanelField:
    """One input of a panel. `options` for a fixed select; `dynamic` when `on_options(name)` supplies them.
    `moves_episode`: changing it places another episode, so it is refused while an execution is running."""

    name: str
    kind: FieldKind
    label: str
    options: Sequence[Any] | None = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    dynamic: bool = False
    help: str = ""
    moves_episode: bool = True

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["options"] = None if self.options is None else list(self.options)
        return data


@dataclass(frozen=True, slots=True)
class EnvPanelAction:
    """One button of a panel: what it asks the framework to do (`side_effect`) and when it is enabled."""

    name: str
    label: str
    side_effect: SideEffect | SideEffectName
    enabled_when: EnabledWhen = "always"
    signal_name: str | None = None

    def __post_init__(self) -> None:
        if self.side_effect not in SIDE_EFFECTS:
            raise ValueError(f"side_effect must be one of {SIDE_EFFECTS}, got {self.side_effect!r}")
        object.__setattr__(self, "side_effect", SideEffect(self.side_effect))
        if self.side_effect is SideEffect.SIGNAL and not self.signal_name:
            raise ValueError(f"action {self.name!r} has side_effect 'signal' but no signal_name")

    @property
    def effect(self) -> SideEffect:
        """`side_effect`, typed."""
        return SideEffect(self.side_effect)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["side_effect"] = str(self.side_effect)
        return data


class PanelRefused(HyloError):
    """A hook refused what it was asked: an unknown field or action, a value the panel does not take. The message
    names the bad value (and, where there is a choice, what would do); nothing changed."""


class UnknownIntent(HyloError):
    """A hook answered a `side_effect` that is not one of `SideEffect`'s."""


@dataclass(frozen=True, slots=True)
class PanelReply:
    """A hook's answer: the intent the framework carries out (`carry_out`) and what the hook reports.

    - `effect`: what to do (`SideEffect`; a plain name is taken and checked)
    - `signal`, `signal_payload`: the lifecycle signal a `signal` intent delivers (e.g. `episode_reset`, with the
      placement it moved to); set exactly when `effect` is `signal`
    - `options`: a field's options (`on_options`)
    - `values`: anything else the hook reports
    """

    effect: SideEffect = SideEffect.NONE
    signal: str | None = None
    signal_payload: Mapping[str, Any] = field(default_factory=dict)
    options: tuple[Any, ...] | None = None
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "effect", side_effect(self.effect))
        if self.effect is SideEffect.SIGNAL and not self.signal:
            raise ValueError("a signal intent names the signal it delivers")
        if self.effect is not SideEffect.SIGNAL and self.signal is not None:
            raise ValueError(f"a {self.effect} intent delivers no signal, got {self.signal!r}")
        if self.options is not None:
            object.__setattr__(self, "options", tuple(self.options))

    def to_json(self) -> dict[str, Any]:
        """The answer as the HTTP API shows it: `{"ok": true, "side_effect", ...values}`, with `options` and
        `signal_name` / `signal_payload` where set."""
        data: dict[str, Any] = {"ok": True, "side_effect": str(self.effect)}
        if self.options is not None:
            data["options"] = list(self.options)
        data.update(self.values)
        if self.signal is not None:
            data["signal_name"] = self.signal
            data["signal_payload"] = dict(self.signal_payload)
        return data


def intent(
    name: SideEffect | SideEffectName = "none",
    *,
    signal_name: str | None = None,
    signal_payload: Mapping[str, Any] | None = None,
    options: Sequence[Any] | None = None,
    **values: Any,
) -> PanelReply:
    """A hook's answer (`PanelReply`), written as the intent's name and what it reports."""
    payload = dict(signal_payload or {})
    return PanelReply(side_effect(name), signal_name, payload, None if options is None else tuple(options), values)


def side_effect(name: SideEffect | str) -> SideEffect:
    """The `SideEffect` named `name`; raises `UnknownIntent` for a name that is not one."""
    try:
        return SideEffect(name)
    except ValueError:
        raise UnknownIntent(f"unknown side_effect {name!r}; choose from: {list(SIDE_EFFECTS)}") from None


@dataclass(frozen=True, slots=True)
class PanelState:
    """A panel's `on_load`: its status and current values.

    - `available`, `status`: whether its benchmark can run here, and why not (or `ready`)
    - `step_budget`: the per-episode step budget of what it places (None: it knows none)
    - `values`: each field's current value, and anything else it reports (`episode_id`)
    """

    available: bool = True
    status: str = "ready"
    step_budget: int | None = None
    values: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The state as the HTTP API shows it: `available`, `status`, `step_budget`, then the values."""
        return {"available": self.available, "status": self.status, "step_budget": self.step_budget, **self.values}


@dataclass
class PanelContext:
    """Stamped on a panel by its registry: where it runs, so it can word its status."""

    mode: NodesetMode = NodesetMode.LOCAL
    server_url: str | None = None
    nodeset_name: str | None = None


class BaseEnvPanel(abc.ABC):
    """Subclasses declare `name`, `display_name`, `fields`, `actions` and implement `on_load`."""

    name: str = ""
    display_name: str = ""
    fields: Sequence[EnvPanelField] = ()
    actions: Sequence[EnvPanelAction] = ()

    def __init__(self) -> None:
        self._context = PanelContext()

    @abc.abstractmethod
    async def on_load(self) -> PanelState:
        """Status and current values: `available`, `step_budget` (per episode) and each field's value."""

    async def on_field_change(self, name: str, value: Any) -> PanelReply:
        return PanelReply()

    async def on_action(self, name: str) -> PanelReply:
        """By default an action's declared side_effect is the intent."""
        action = self.action(name)
        if action is None:
            raise PanelRefused(f"unknown action {name!r}; choose from: {self.action_names()}")
        return PanelReply(action.effect, action.signal_name)

    async def on_options(self, name: str) -> PanelReply:
        spec = self.field(name)
        if spec is None:
            raise self.unknown_field(name)
        return PanelReply(options=tuple(spec.options or ()))

    def unknown_field(self, name: str) -> PanelRefused:
        """The refusal of a field the panel does not have."""
        return PanelRefused(f"unknown field {name!r}; choose from: {[f.name for f in self.fields]}")

    def field(self, name: str) -> EnvPanelField | None:
        return next((f for f in self.fields if f.name == name), None)

    def action(self, name: str) -> EnvPanelAction | None:
        return next((a for a in self.actions if a.name == name), None)

    def action_names(self) -> list[str]:
        return [a.name for a in self.actions]

    def info(self) -> dict[str, Any]:
        """The panel's declaration, serialised for the frontend."""
        return {
            "name": self.name,
            "display_name": self.display_name,
            "fields": [f.to_json() for f in self.fields],
            "actions": [a.to_json() for a in self.actions],
            "context": asdict(self._context),
        }


PLAYBACK_ACTIONS: tuple[EnvPanelAction, ...] = (
    EnvPanelAction("play", "Play", "run_start", enabled_when="not_running"),
    EnvPanelAction("pause", "Pause", "run_pause", enabled_when="running"),
    EnvPanelAction("step", "Step", "run_step", enabled_when="not_running"),
    EnvPanelAction("stop", "Stop", "run_stop", enabled_when="active"),
)
"""Play / Pause / Step / Stop: the buttons every benchmark panel has."""


@dataclass
class Placement:
    """The values a benchmark panel places an episode with."""

    benchmark: str
    split: str
    task: str
    episode_index: int = 0
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
