"""Online critics as agent components.

A critic watches the episode and may suggest a recovery chunk instead of the policy's plan. It is part of the agent,
not of the Kernel: its suggestion is the agent's output, so it still passes the SafetyShield like any other action.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

import numpy as np

from hylo.core.agent import agent_name, containers_of, notify, requirements_of
from hylo.core.chunk import ActionChunk, as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation, StepResult


class Critic(Protocol):
    def suggest(self, obs: Observation, plan: ActionChunk) -> ActionChunk | None: ...


class CriticAgent:
    """An agent whose critic may replace the inner policy's plan with a suggested recovery."""

    def __init__(self, inner: Any, critic: Critic) -> None:
        self.inner = inner
        self.critic = critic
        self.name = f"critic({agent_name(inner)}, {agent_name(critic)})"
        self.requirements = requirements_of(inner)
        self.containers = containers_of(inner)
        self.recoveries = 0
        self.ctx: EpisodeContext | None = None

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.recoveries = 0
        notify((self.inner, self.critic), "reset", ctx)

    def act(self, obs: Observation) -> ActionChunk:
        plan = as_chunk(self.inner.act(obs))
        recovery = self.critic.suggest(obs, plan)
        if recovery is None:
            return plan
        self.recoveries += 1
        if self.ctx is not None:
            self.ctx.emit("agent.decision", {"critic": agent_name(self.critic), "recovery_steps": len(recovery)})
        return recovery

    def on_step(self, result: StepResult) -> None:
        notify((self.inner, self.critic), "on_step", result)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        notify((self.inner,), "on_episode_end", outcome)


class ProgressCritic:
    """Suggests backing off when the reward has not improved for `window` steps (the policy is stuck).

    The recovery repeats the negated last planned action for `backoff_steps` steps.
    """

    name = "progress_critic"

    def __init__(self, window: int = 10, min_gain: float = 1e-3, backoff_steps: int = 3) -> None:
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        if backoff_steps < 1:
            raise ValueError(f"backoff_steps must be >= 1, got {backoff_steps}")
        self.window = window
        self.min_gain = min_gain
        self.backoff_steps = backoff_steps
        self._rewards: deque[float] = deque(maxlen=window)

    def reset(self, ctx: EpisodeContext) -> None:
        self._rewards.clear()

    def on_step(self, result: StepResult) -> None:
        self._rewards.append(float(result.reward))

    def suggest(self, obs: Observation, plan: ActionChunk) -> ActionChunk | None:
        rewards = self._rewards
        if len(rewards) < self.window or rewards[-1] - rewards[0] > self.min_gain:
            return None
        rewards.clear()
        back = -np.asarray(plan.actions[0], dtype=np.float64)
        dtype = np.asarray(plan.actions[0]).dtype
        return ActionChunk([back.astype(dtype)] * self.backoff_steps)
