"""Agents the LIBERO tests name as `libero_agents:Class` (they run in worker processes too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hylo.core import ActionChunk, AgentRequirements


class StateLog:
    """Holds the arm still with the gripper open and writes every state it is shown to `<out>/<episode>.npy`."""

    requirements = AgentRequirements(needs_images=False)  # so that a recorded episode is the only one rendered

    def __init__(self, out: str) -> None:
        self.out = Path(out)

    def reset(self, ctx):
        self.path = self.out / f"{ctx.task.task[:20]}-{ctx.task.index}.npy"
        self.states = []

    def act(self, obs):
        self.states.append(np.array(obs["state"]))
        np.save(self.path, np.stack(self.states))
        return ActionChunk.single(np.array([0.0] * 6 + [-1.0], np.float32))
