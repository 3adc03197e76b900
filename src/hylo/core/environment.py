"""The Environment interface: four abstract members, everything else has a default."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from hylo.core.errors import HyloError
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance


class VideoCamera(Protocol):
    """Renders a frame of an env's first camera for a video alone (`video_frame`), at the size asked ((width,
    height); None: the camera's own), outside any observation, without changing the env's state."""

    def video_frame(self, size: tuple[int, int] | None) -> np.ndarray[Any, Any]: ...


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

    Every other member has a default, so a caller uses it without asking whether the env has it: `capabilities`,
    `hold_action`, `privileged_state`, `prologue`, `close`, and the camera members `render_images` (whether camera
    frames are rendered into the observations) and `video_camera` (what renders frames for a video alone).
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

    @property
    def render_images(self) -> bool:
        """Whether the observations carry camera frames (`images`) the env renders. The default: False.

        Setting it is a request, never an error: an env that can render switches its rendering on or off (a change
        may take effect at the next `reset`); one that cannot ignores it and keeps reporting what it does, so read it
        back to know. An env that renders overrides both (a property, or a plain `render_images: bool` attribute
        declared on its class: one assigned in `__init__` alone would go to this setter and be ignored)."""
        return False

    @render_images.setter
    def render_images(self, on: bool) -> None:
        return None

    @property
    def video_camera(self) -> VideoCamera | None:
        """What renders this env's frames for a video alone (often the env itself), None when nothing does (the
        default): a recorder then takes its frames from the observations."""
        return None

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
    (gymnasium's `Wrapper`)."""

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
        return self.env.render_images

    @render_images.setter
    def render_images(self, on: bool) -> None:
        self.env.render_images = on

    @property
    def video_camera(self) -> VideoCamera | None:
        return self.env.video_camera

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
