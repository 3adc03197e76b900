"""GridGoal: a discrete navigation task on a small grid with walls, in the spirit of BabyAI's GoTo levels.

Actions: 0 up, 1 right, 2 down, 3 left. The observation carries the symbolic grid (0 floor, 1 wall, 2 goal,
3 agent), the agent's position, and the instruction. The expert plans a shortest path with breadth-first search
over privileged simulator state (each read traced).
"""

from __future__ import annotations

import string
from collections import deque
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.types import EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance

MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))
FLOOR, WALL, GOAL, AGENT = 0, 1, 2, 3


class GridGoal(Environment):
    def __init__(self, size: int = 9, walls: int = 14, max_episode_steps: int = 50) -> None:
        if size < 4:
            raise ValueError(f"grid size must be >= 4, got {size}")
        self.size = size
        self.walls = walls
        self._spec = EnvSpec(
            observation_space=spaces.Dict(
                {
                    "grid": spaces.Box(0, 3, (size, size), np.int8),
                    "state": spaces.Box(0, size - 1, (2,), np.int64),
                    "instruction": spaces.Text(64, charset=string.printable),
                }
            ),
            action_space=spaces.Discrete(4),
            control_rate_hz=5.0,
            max_episode_steps=max_episode_steps,
            name="grid_goal",
        )
        self._grid = np.zeros((size, size), np.int8)
        self._pos = (0, 0)
        self._goal = (0, 0)
        self._done = False
        self._obs: Observation | None = None

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(privileged_state=True)

    def reset(self, task: TaskInstance) -> Observation:
        rng = np.random.default_rng(task.seed)
        n = self.size
        while True:
            grid = np.zeros((n, n), np.int8)
            grid[0, :] = grid[-1, :] = grid[:, 0] = grid[:, -1] = WALL
            inner = [(r, c) for r in range(1, n - 1) for c in range(1, n - 1)]
            picks = rng.choice(len(inner), size=self.walls + 2, replace=False)
            for i in picks[: self.walls]:
                grid[inner[i]] = WALL
            start, goal = inner[picks[-2]], inner[picks[-1]]
            if shortest_path(grid, start, goal) is not None:
                break
        self._grid, self._pos, self._goal = grid, start, goal
        self._done = False
        self._obs = self._observation()
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._done or self._obs is None:
            raise RuntimeError("step after the episode ended; reset first")
        dr, dc = MOVES[int(action)]
        r, c = self._pos[0] + dr, self._pos[1] + dc
        if self._grid[r, c] != WALL:
            self._pos = (r, c)
        success = self._pos == self._goal
        self._done = success
        self._obs = self._observation()
        return StepResult(self._obs, 1.0 if success else 0.0, success, False, success)

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("observe before the first reset")
        return self._obs

    def privileged_state(self, name: str) -> Any:
        if name == "walls":
            return (self._grid == WALL).copy()
        if name == "goal":
            return self._goal
        raise KeyError(f"grid_goal exposes privileged state 'walls' and 'goal', not {name!r}")

    def _observation(self) -> Observation:
        grid = self._grid.copy()
        grid[self._goal] = GOAL
        grid[self._pos] = AGENT
        return Observation(
            grid=grid,
            state=np.array(self._pos, np.int64),
            instruction=f"go to the goal at row {self._goal[0]}, column {self._goal[1]}",
        )


def shortest_path(walls: np.ndarray[Any, Any], start: tuple[int, int], goal: tuple[int, int]) -> list[int] | None:
    """Actions of a shortest path from start to goal, or None when unreachable."""
    previous: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            actions: list[int] = []
            while (link := previous[cell]) is not None:
                cell, move = link
                actions.append(move)
            return actions[::-1]
        for move, (dr, dc) in enumerate(MOVES):
            nxt = (cell[0] + dr, cell[1] + dc)
            if walls[nxt] != WALL and nxt not in previous:
                previous[nxt] = (cell, move)
                queue.append(nxt)
    return None


class GridGoalExpert(AgentBase):
    """Plans the whole shortest path once per episode from privileged state and returns it as one chunk."""

    name = "grid_goal_expert"
    requirements = AgentRequirements(
        observation_keys=("state",), action_space=spaces.Discrete(4), needs_images=False, privileged_state=True
    )

    class Args(AgentArgs):
        pass

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        walls = np.asarray(self.ctx.privileged("walls"), dtype=np.int8)
        goal = tuple(self.ctx.privileged("goal"))
        start = (int(obs["state"][0]), int(obs["state"][1]))
        path = shortest_path(walls, start, (int(goal[0]), int(goal[1])))
        if not path:
            raise RuntimeError(f"no path from {start} to {goal}")
        self.ctx.emit("agent.decision", {"plan_length": len(path)})
        return ActionChunk(path)
