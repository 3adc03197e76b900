"""What an agent receives at the start of each episode."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hylo.core.bus import EventBus
from hylo.core.events import AGENT_EVENT_KINDS, EVENT_TYPES, PrivilegedStateEvent
from hylo.core.jsonable import jsonable
from hylo.core.signals import ContainerSet
from hylo.core.timing import Clock
from hylo.core.types import EnvSpec, TaskInstance


@dataclass(slots=True)
class EpisodeContext:
    """The agent's handle on the episode.

    - `emit(kind, content)` writes an `agent.decision`, `memory.retrieval` or `memory.write` trace event
    - `seed` is the only source of the agent's randomness (`rng` is a generator seeded with it)
    - `env_spec` describes the spaces and control rate
    - `containers` holds the agent's state containers, cleared by lifecycle signals only
    - `privileged(name)` reads simulator state (for a benchmark's own expert); every read is traced
    - `clock` is the Kernel's clock: `virtual` (sync, or realtime on simulated time) or `wall`
    """

    seed: int
    env_spec: EnvSpec
    task: TaskInstance
    containers: ContainerSet = field(default_factory=ContainerSet)
    bus: EventBus = field(default_factory=EventBus)
    read_privileged: Callable[[str], Any] | None = None
    clock: Clock = Clock.VIRTUAL
    _rng: np.random.Generator | None = None

    @property
    def episode_id(self) -> str:
        return self.task.episode_id

    @property
    def run_id(self) -> str:
        return self.bus.run_id

    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

    def emit(self, kind: str, content: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Trace an agent event, e.g. `ctx.emit("agent.decision", {"subgoal": "open door"})`."""
        if kind not in AGENT_EVENT_KINDS:
            raise ValueError(f"an agent may emit {sorted(AGENT_EVENT_KINDS)}, not {kind!r}")
        if self.bus.active:
            merged = dict(content or {}, **fields)
            self.bus.emit(EVENT_TYPES[kind], content=jsonable(merged))

    def privileged(self, name: str) -> Any:
        """Read privileged simulator state; traced as `privileged.state`."""
        if self.read_privileged is None:
            raise KeyError(f"no privileged state {name!r}: the environment exposes none")
        value = self.read_privileged(name)
        if self.bus.active:
            self.bus.emit_trusted(PrivilegedStateEvent, name=name, value=jsonable(value))
        return value
