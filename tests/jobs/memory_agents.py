"""Agents the memory tests run as jobs (`memory_agents:Class`, this directory on the job's PYTHONPATH)."""

from __future__ import annotations

import time

import numpy as np

from hylo.core import ActionChunk, AgentRequirements

MB = 1024**2


class Hoarder:
    """Keeps `step_mb` more memory at every act (written to, so resident), up to `most_mb`, and takes `pause_s` an
    act: a job of it holds more and more for a few seconds."""

    requirements = AgentRequirements(needs_images=False)

    def __init__(self, step_mb: int = 64, most_mb: int = 1536, pause_s: float = 0.05) -> None:
        self.step_mb = step_mb
        self.most_mb = most_mb
        self.pause_s = pause_s
        self.held: list[np.ndarray] = []

    def act(self, obs):
        if len(self.held) * self.step_mb < self.most_mb:
            self.held.append(np.ones(self.step_mb * MB, dtype=np.uint8))
        time.sleep(self.pause_s)
        return ActionChunk.single(0)


class Reserver:
    """Asks for `gb` GB in one allocation (never written to: it costs no memory where it is granted) at each reset."""

    requirements = AgentRequirements(needs_images=False)

    def __init__(self, gb: float = 8.0) -> None:
        self.gb = gb

    def reset(self, ctx):
        self.reserved = np.empty(int(self.gb * 1024 * MB), dtype=np.uint8)

    def act(self, obs):
        return ActionChunk.single(0)
