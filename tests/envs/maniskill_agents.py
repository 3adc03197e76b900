"""Agents the ManiSkill3 tests run in worker processes (importable as `maniskill_agents:...`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hylo.core.agent import AgentRequirements
from hylo.core.chunk import ActionChunk


class SeededStateLog:
    """Acts with uniform noise drawn from the episode's seed (any action size) and writes every state it is shown to
    `<out>/<task>-<index>.npy`."""

    requirements = AgentRequirements(observation_keys=("state",), needs_images=False)

    def __init__(self, out: str) -> None:
        self.out = Path(out)

    def reset(self, ctx):
        self.path = self.out / f"{ctx.task.task}-{ctx.task.index}.npy"
        self.size = int(ctx.env_spec.action_space.shape[0])
        self.rng = np.random.default_rng(ctx.seed)
        self.states = []

    def act(self, obs):
        self.states.append(np.array(obs["state"]))
        np.save(self.path, np.stack(self.states))
        return ActionChunk.single(self.rng.uniform(-1.0, 1.0, self.size).astype(np.float32))
