"""Agents the evaluation tests name as `eval_agents:Class` (this directory is put on PYTHONPATH)."""

from __future__ import annotations

import time

import numpy as np

from hylo.core import ActionChunk


class RaisingAgent:
    """Fails on the `fail_at`-th act of every episode."""

    def __init__(self, fail_at: int = 0) -> None:
        self.fail_at = fail_at

    def reset(self, ctx):
        self.calls = 0

    def act(self, obs):
        if self.calls == self.fail_at:
            raise RuntimeError("policy exploded")
        self.calls += 1
        return ActionChunk.single(0)


class SlowAgent:
    """Takes `seconds` per act."""

    def __init__(self, seconds: float = 0.2, action: int = 0) -> None:
        self.seconds = seconds
        self.action = action

    def act(self, obs):
        time.sleep(self.seconds)
        return ActionChunk.single(self.action)


class NaNAgent:
    """Returns a NaN action for a Box action space of `dim` dimensions."""

    def __init__(self, dim: int = 1) -> None:
        self.dim = dim

    def act(self, obs):
        return ActionChunk.single(np.full(self.dim, np.nan, dtype=np.float32))


class SleepyKillable:
    """Sleeps a little each step so that a test can kill the run midway."""

    def __init__(self, seconds: float = 0.02) -> None:
        self.seconds = seconds

    def reset(self, ctx):
        self.rng = np.random.default_rng(ctx.seed)

    def act(self, obs):
        time.sleep(self.seconds)
        return ActionChunk.single(int(self.rng.integers(0, 3)))


class NoisyAgent:
    """Prints from Python and writes to file descriptor 1 directly (as C libraries do) on every act."""

    def act(self, obs):
        import os

        print("noisy agent says hello")
        os.write(1, b"C-level noise on fd 1\n")
        return ActionChunk.single(2)
