"""Agents the graph tests name as `graph_agents:Class` in a `reason` node (pytest puts this directory on sys.path).

Every call is appended to `LOG`, which the tests clear before each test; a test env can append to it too, so the
order of env and agent calls can be checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hylo.core import ActionChunk, AgentRequirements, ContainerSpec

LOG: list[Any] = []
"""Agent (and test env) calls, in order: ("reset", seed), ("act", n), ("on_step", reward), ("end", status), ..."""


class ScriptedAgent:
    """Returns chunks of `chunk` actions, action k of call n being `np.full(dim, value + k * delta)`; `execution_steps`
    of them run before it is asked again."""

    def __init__(
        self, value: float = 0.0, dim: int = 7, chunk: int = 1, execution_steps: int | None = None, delta: float = 0.0
    ) -> None:
        self.value, self.dim, self.chunk, self.execution_steps, self.delta = value, dim, chunk, execution_steps, delta
        self.calls = 0

    def act(self, obs: Any) -> ActionChunk:
        self.calls += 1
        LOG.append(("act", self.calls))
        actions = [np.full(self.dim, self.value + k * self.delta, np.float32) for k in range(self.chunk)]
        return ActionChunk(actions, self.execution_steps)


class HookAgent(ScriptedAgent):
    """A ScriptedAgent that also logs its lifecycle hooks."""

    def reset(self, ctx: Any) -> None:
        LOG.append(("reset", ctx.task.index))

    def on_step(self, result: Any) -> None:
        LOG.append(("on_step", bool(result.success)))

    def on_signal(self, signal: Any) -> None:
        LOG.append(("signal", str(signal)))

    def on_episode_end(self, outcome: Any) -> None:
        LOG.append(("end", outcome.status.value))


class NaNAgent:
    """A NaN action for a `dim`-D Box."""

    def __init__(self, dim: int = 7) -> None:
        self.dim = dim

    def act(self, obs: Any) -> ActionChunk:
        LOG.append(("act", "nan"))
        return ActionChunk.single(np.full(self.dim, np.nan, np.float32))


class RaisingAgent:
    """Its act always fails."""

    def act(self, obs: Any) -> ActionChunk:
        raise RuntimeError("policy exploded")


class ObservingAgent(ScriptedAgent):
    """Logs the keys of the observation each `on_step` result carries."""

    def on_step(self, result: Any) -> None:
        LOG.append(("on_step.obs", sorted(result.obs)))


class MemoAgent(ScriptedAgent):
    """Declares an episode container of its own and appends the number of each act to it."""

    containers = (ContainerSpec("acts", "episode", "append"),)

    def reset(self, ctx: Any) -> None:
        self.memo = ctx.containers["acts"]

    def act(self, obs: Any) -> ActionChunk:
        chunk = super().act(obs)
        self.memo.write(self.calls)
        return chunk


class NoneAgent:
    """Its act returns nothing."""

    def act(self, obs: Any) -> None:
        return None


class CameraAgent:
    """A vision policy for BabyAI: it needs camera frames, and fails loudly if a frame is missing; it turns left."""

    requirements = AgentRequirements(needs_images=True)

    def act(self, obs: Any) -> ActionChunk:
        frame = obs["images"]["view"]
        if frame.ndim != 3 or frame.dtype != np.uint8:
            raise ValueError(f"not a camera frame: {frame.dtype} {frame.shape}")
        return ActionChunk.single(0)
