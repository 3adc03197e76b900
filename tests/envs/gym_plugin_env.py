"""A third-party gymnasium env, for `gym:gym_plugin_env:PluginEnv-v0`: importing this module registers it.

LineWorld: a point on cells 0..7 must reach the cell its mission names; actions 0 = left, 1 = stay, 2 = right.
The observation is a Dict with a `mission` string; `info["is_success"]` says whether the point is on the goal.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium
import gymnasium.spaces as spaces
import numpy as np

SIZE = 8
ENV_ID = "PluginEnv-v0"
MAX_STEPS = 30


class LineWorld(gymnasium.Env[dict[str, Any], np.int64]):
    metadata = {"render_modes": []}

    def __init__(self) -> None:  # no render_mode parameter: hylo must not pass one when it does not render
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(0.0, SIZE - 1.0, (1,), np.float32),
                "mission": spaces.Text(32, charset=string.printable),
            }
        )
        self.action_space = spaces.Discrete(3)
        self._pos = 0
        self._goal = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._pos, self._goal = (int(v) for v in self.np_random.choice(SIZE, size=2, replace=False))
        return self._obs(), {}

    def step(self, action: np.int64) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._pos = int(np.clip(self._pos + int(action) - 1, 0, SIZE - 1))
        reached = self._pos == self._goal
        info = {"is_success": reached, "distance": abs(self._goal - self._pos), "trace": np.zeros(100)}
        return self._obs(), float(reached), reached, False, info

    def _obs(self) -> dict[str, Any]:
        return {"position": np.array([self._pos], np.float32), "mission": f"reach cell {self._goal}"}


gymnasium.register(ENV_ID, entry_point=f"{__name__}:LineWorld", max_episode_steps=MAX_STEPS)
