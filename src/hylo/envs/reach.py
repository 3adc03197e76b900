"""PointReach: a small language-conditioned reaching task that runs anywhere in microseconds per step.

A point moves in the unit square among three coloured markers; the instruction names the one to reach
("reach the red marker"). The state holds the point's and the markers' positions, but not which one is meant:
an agent has to read the instruction. `render=True` adds a top-down RGB camera.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field

from hylo.core.agent import MAX_CHUNK, AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 180, 60),
    "blue": (50, 80, 230),
}
STEP_SIZE = 0.05
SUCCESS_RADIUS = 0.04


class PointReach(Environment):
    def __init__(self, max_episode_steps: int = 60, render: bool = False, image_size: int = 64) -> None:
        obs_spaces: dict[str, spaces.Space[Any]] = {
            "state": spaces.Box(0.0, 1.0, (8,), np.float32),
            "instruction": spaces.Text(64, charset=string.printable),
        }
        if render:
            obs_spaces["images"] = spaces.Dict({"top": spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)})
        self._spec = EnvSpec(
            observation_space=spaces.Dict(obs_spaces),
            action_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
            control_rate_hz=10.0,
            max_episode_steps=max_episode_steps,
            name="point_reach",
        )
        self.render = render
        self.image_size = image_size
        self._pos: np.ndarray[Any, Any] = np.zeros(2)
        self._markers: np.ndarray[Any, Any] = np.zeros((3, 2))
        self._target = 0
        self._instruction = ""
        self._done = False
        self._obs: Observation | None = None
        self._task: TaskInstance | None = None

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True, privileged_state=True)

    def reset(self, task: TaskInstance) -> Observation:
        rng = np.random.default_rng(task.seed)
        while True:  # markers far enough apart that "reach X" is unambiguous
            markers = rng.uniform(0.1, 0.9, size=(3, 2))
            gaps = [np.linalg.norm(markers[i] - markers[j]) for i in range(3) for j in range(i + 1, 3)]
            if min(gaps) > 0.25:
                break
        self._markers = markers
        self._pos = rng.uniform(0.1, 0.9, size=2)
        names = list(COLORS)
        wanted = task.params.get("color")
        self._target = names.index(wanted) if wanted in names else int(rng.integers(3))
        self._instruction = f"reach the {names[self._target]} marker"
        self._done = False
        self._task = task
        self._obs = self._observation()
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._done or self._obs is None:
            raise RuntimeError("step after the episode ended; reset first")
        move = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0) * STEP_SIZE
        self._pos = np.clip(self._pos + move, 0.0, 1.0)
        distance = float(np.linalg.norm(self._pos - self._markers[self._target]))
        success = distance < SUCCESS_RADIUS
        self._done = success
        self._obs = self._observation()
        return StepResult(self._obs, -distance, success, False, success, {"distance": distance})

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def hold_action(self) -> Any:
        return np.zeros(2, np.float32)

    def privileged_state(self, name: str) -> Any:
        if name == "target":
            return self._markers[self._target].copy()
        raise KeyError(f"point_reach exposes privileged state 'target', not {name!r}")

    def _observation(self) -> Observation:
        state = np.concatenate([self._pos, self._markers.ravel()]).astype(np.float32)
        obs = Observation(state=state, instruction=self._instruction)
        if self.render:
            obs["images"] = {"top": self._draw()}
        return obs

    def _draw(self) -> np.ndarray[Any, Any]:
        n = self.image_size
        image = np.full((n, n, 3), 245, np.uint8)
        yy, xx = np.mgrid[0:n, 0:n]

        def disc(center: np.ndarray[Any, Any], radius: float, color: tuple[int, int, int]) -> None:
            cx, cy = center * (n - 1)
            image[(xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2] = color

        for marker, color in zip(self._markers, COLORS.values(), strict=True):
            disc(marker, n * 0.06, color)
        disc(self._pos, n * 0.035, (20, 20, 20))
        return image


class PointReachExpert(AgentBase):
    """Reads the instruction, finds the named marker in the state, and moves straight to it."""

    name = "point_reach_expert"
    requirements = AgentRequirements(observation_keys=("state", "instruction"), needs_images=False)

    class Args(AgentArgs):
        chunk: int = Field(default=1, ge=1, le=MAX_CHUNK, description="actions per act")

    def __init__(self, chunk: int = 1) -> None:
        self.chunk = chunk

    def act(self, obs: Observation) -> ActionChunk:
        state = np.asarray(obs["state"], dtype=np.float64)
        words = str(obs["instruction"]).split()
        color = next(w for w in words if w in COLORS)
        target = state[2:].reshape(3, 2)[list(COLORS).index(color)]
        actions = []
        pos = state[:2].copy()
        for _ in range(self.chunk):
            delta = target - pos
            step = np.clip(delta / STEP_SIZE, -1.0, 1.0)
            actions.append(step.astype(np.float32))
            pos = pos + step * STEP_SIZE
        return ActionChunk(actions)

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
