"""A null environment: the cheapest possible step, for measuring what the harness itself costs."""

from __future__ import annotations

from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.environment import Environment
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance


class NullEnv(Environment):
    """A 7-D action, a constant 7-D state, no end but the step budget (or success at step `success_at`)."""

    def __init__(
        self,
        dim: int = 7,
        max_episode_steps: int = 1000,
        success_at: int | None = None,
        control_rate_hz: float = 50.0,
    ) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"state": spaces.Box(-1.0, 1.0, (dim,), np.float32)}),
            action_space=spaces.Box(-1.0, 1.0, (dim,), np.float32),
            control_rate_hz=control_rate_hz,
            max_episode_steps=max_episode_steps,
            name="null",
        )
        self.success_at = success_at
        self._obs = Observation(state=np.zeros(dim, np.float32))
        self._hold = np.zeros(dim, np.float32)
        self._t = 0

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        self._t = 0
        self._obs = Observation(state=np.zeros(self._hold.shape, np.float32))
        return self._obs

    def step(self, action: Any) -> StepResult:
        self._t += 1
        obs = self._obs
        return StepResult(obs, 0.0, False, False, self._t == self.success_at)

    def observe(self) -> Observation:
        return self._obs

    def hold_action(self) -> Any:
        return self._hold
