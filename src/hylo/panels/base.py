"""The env-panel contract (001): a small declarative control surface for the out-of-loop env knobs.

A panel lists `fields` (inputs) and `actions` (buttons) and answers four async hooks: `on_load` (status and the
values the runner reads, `step_budget` among them), `on_field_change`, `on_action` and `on_options`. Hooks never do
things: they return intents (`side_effect`), which the framework carries out. A panel imports no runner or executor.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, get_args

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


def intent(
    side_effect: SideEffect | SideEffectName = "none",
    *,
    ok: bool = True,
    error: str | None = None,
    signal_name: str | None = None,
    signal_payload: dict[str, Any] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """A hook's answer: `{"ok", "side_effect", ...}` plus `error`, `signal_name`, `signal_payload` when set."""
    result: dict[str, Any] = {"ok": ok, "side_effect": str(side_effect), **values}
    if error is not None:
        result["error"] = error
    if signal_name is not None:
        result["signal_name"] = signal_name
        result["signal_payload"] = signal_payload or {}
    return result


@dataclass
class PanelContext:
    """Stamped on a panel by its registry: where it runs, so it can word its status (001 §4)."""

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
    async def on_load(self) -> dict[str, Any]:
        """Status and current values: `available`, `step_budget` (per episode) and each field's value."""

    async def on_field_change(self, name: str, value: Any) -> dict[str, Any]:
        return intent()

    async def on_action(self, name: str) -> dict[str, Any]:
        """By default an action's declared side_effect is the intent."""
        action = self.action(name)
        if action is None:
            return intent(ok=False, error=f"unknown action {name!r}; choose from: {self.action_names()}")
        return intent(action.side_effect, signal_name=action.signal_name)

    async def on_options(self, name: str) -> dict[str, Any]:
        spec = self.field(name)
        if spec is None:
            return intent(ok=False, error=f"unknown field {name!r}; choose from: {[f.name for f in self.fields]}")
        return intent(options=list(spec.options or ()))

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
