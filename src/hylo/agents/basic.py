"""Reference agents that need no model: a seeded random agent and a hold (do-nothing) agent."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field

from hylo.core.agent import MAX_CHUNK, AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation


class RandomAgent(AgentBase):
    """Samples the action space uniformly; seeded from the episode's seed, so runs are reproducible."""

    name = "random"
    requirements = AgentRequirements(needs_images=False)  # it reads no observation: nothing is rendered for it

    class Args(AgentArgs):
        chunk: int = Field(default=1, ge=1, le=MAX_CHUNK, description="actions per act")

    def __init__(self, chunk: int = 1) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.chunk = chunk
        self._space: spaces.Space[Any] | None = None

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        # A private copy: seeding the env spec's own space would make runs depend on each other.
        self._space = copy.deepcopy(ctx.env_spec.action_space)
        self._space.seed(ctx.seed)

    def act(self, obs: Observation) -> ActionChunk:
        if self._space is None:
            raise RuntimeError("RandomAgent.act before reset")
        return ActionChunk([self._space.sample() for _ in range(self.chunk)])


def neutral_action(space: spaces.Space[Any]) -> Any:
    """The action closest to "do nothing" a space allows: zero clipped into a Box, the first choice otherwise."""
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return int(space.start)
    if isinstance(space, spaces.Dict):
        return {key: neutral_action(sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.MultiDiscrete):
        return np.zeros(space.shape, space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, space.dtype)
    raise TypeError(f"no neutral action for {space}")


class HoldAgent(AgentBase):
    """Always returns the neutral action: the floor any agent must beat."""

    name = "hold"
    requirements = AgentRequirements(needs_images=False)

    class Args(AgentArgs):
        pass

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self._action = neutral_action(ctx.env_spec.action_space)

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(self._action)
