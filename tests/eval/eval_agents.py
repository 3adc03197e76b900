"""Agents the evaluation tests name as `eval_agents:Class` (this directory is put on PYTHONPATH)."""

from __future__ import annotations

import time

import numpy as np

from hylo.core import ActionChunk, AgentRequirements

STATE_ONLY = AgentRequirements(needs_images=False)
"""What these agents declare: none reads a camera, so no frame is rendered for them."""


class RaisingAgent:
    """Fails on the `fail_at`-th act of every episode."""

    requirements = STATE_ONLY

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

    requirements = STATE_ONLY

    def __init__(self, seconds: float = 0.2, action: int = 0) -> None:
        self.seconds = seconds
        self.action = action

    def act(self, obs):
        time.sleep(self.seconds)
        return ActionChunk.single(self.action)


class NaNAgent:
    """Returns a NaN action for a Box action space of `dim` dimensions."""

    requirements = STATE_ONLY

    def __init__(self, dim: int = 1) -> None:
        self.dim = dim

    def act(self, obs):
        return ActionChunk.single(np.full(self.dim, np.nan, dtype=np.float32))


class SleepyKillable:
    """Sleeps a little each step so that a test can kill the run midway."""

    requirements = STATE_ONLY

    def __init__(self, seconds: float = 0.02) -> None:
        self.seconds = seconds

    def reset(self, ctx):
        self.rng = np.random.default_rng(ctx.seed)

    def act(self, obs):
        time.sleep(self.seconds)
        return ActionChunk.single(int(self.rng.integers(0, 3)))


class NoisyAgent:
    """Prints from Python and writes to file descriptor 1 directly (as C libraries do) on every act."""

    requirements = STATE_ONLY

    def act(self, obs):
        import os

        print("noisy agent says hello")
        os.write(1, b"C-level noise on fd 1\n")
        return ActionChunk.single(2)


class SurrogateAgent:
    """Traces a decision whose text no UTF-8 encoder accepts (a lone surrogate), then acts."""

    requirements = STATE_ONLY

    def reset(self, ctx):
        self.ctx = ctx

    def act(self, obs):
        self.ctx.emit("agent.decision", {"text": "bad \udc80 text", "index": self.ctx.task.index})
        return ActionChunk.single(2)


class ResetHater:
    """Fails when told that the placed episode changed, on the `fail_on`-th such signal."""

    requirements = STATE_ONLY

    def __init__(self, fail_on: int = 2) -> None:
        self.fail_on = fail_on
        self.resets = 0

    def on_signal(self, signal):
        if signal == "episode_reset":
            self.resets += 1
            if self.resets == self.fail_on:
                raise RuntimeError("cannot forget")

    def act(self, obs):
        return ActionChunk.single(2)


class HangOnce:
    """Hangs for `seconds` in its first act of the run, then acts at once (zeros: the arm stays put)."""

    requirements = STATE_ONLY

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self.calls = 0

    def act(self, obs):
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.seconds)
        return ActionChunk.single(np.zeros(4, dtype=np.float32))
