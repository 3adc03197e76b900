"""The Environment interface: four abstract members, everything else has a default."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from hylo.core.errors import HyloError
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance


class Environment(abc.ABC):
    """A simulator (or robot) the Kernel drives.

    - `reset(task)` brings the env to the placed episode and returns its first observation (with the actual
      instruction). It is an idempotent ensure-live: resetting to the same task again revives it, it never picks
      another episode.
    - `step(action)` advances by one control step and returns a `StepResult` with the new observation.
    - `observe()` is a pure read of the current observation; after the episode ended it returns the terminal frame.
    - `spec` describes the spaces and control rate.

    Raise `SimulationDiverged` when the simulator's state became invalid, `InvalidAction` for an action the env
    refuses as malformed (the agent's fault); any other exception is counted against the infrastructure.
    """

    @property
    @abc.abstractmethod
    def spec(self) -> EnvSpec: ...

    @abc.abstractmethod
    def reset(self, task: TaskInstance) -> Observation: ...

    @abc.abstractmethod
    def step(self, action: Action) -> StepResult: ...

    @abc.abstractmethod
    def observe(self) -> Observation: ...

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities()

    def hold_action(self) -> Action:
        """The action that keeps the system where it is (executed when the realtime queue runs dry)."""
        raise HyloError(f"environment {self.spec.name!r} declares no hold action")

    def privileged_state(self, name: str) -> Any:
        """Simulator state that only a benchmark's own expert may read (each read is traced)."""
        raise KeyError(f"environment {self.spec.name!r} exposes no privileged state {name!r}")

    def prologue(self) -> Sequence[Action]:
        """The actions the last `reset` executed before handing the episode over: a benchmark protocol's settle steps
        (LIBERO's ten no-ops). They are traced (`env.prologue`), never counted against the agent."""
        return ()

    def close(self) -> None:
        """Release the simulator. Called once per env, never per episode."""
        return None

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EnvWrapper(Environment):
    """An env around another (`env`) that forwards every member to it: a subclass overrides only what it changes
    (gymnasium's `Wrapper`). An optional member of the inner env (`render_images`) is forwarded where it has one."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return self.env.capabilities

    @property
    def render_images(self) -> bool:
        return bool(getattr(self.env, "render_images", False))

    @render_images.setter
    def render_images(self, on: bool) -> None:
        if hasattr(self.env, "render_images"):
            self.env.render_images = on

    def reset(self, task: TaskInstance) -> Observation:
        return self.env.reset(task)

    def step(self, action: Action) -> StepResult:
        return self.env.step(action)

    def observe(self) -> Observation:
        return self.env.observe()

    def hold_action(self) -> Action:
        return self.env.hold_action()

    def privileged_state(self, name: str) -> Any:
        return self.env.privileged_state(name)

    def prologue(self) -> Sequence[Action]:
        return self.env.prologue()

    def close(self) -> None:
        self.env.close()
