"""ACT-style temporal ensembling, as an agent wrapper (not a loop variant).

The inner policy is queried at every step for a chunk; each future step thus receives several predictions, which are
averaged with weights exp(−m·i), i = 0 for the oldest prediction (Zhao et al., 2023, "Learning Fine-Grained Bimanual
Manipulation with Low-Cost Hardware"). Smooths actions at the cost of one inference per step. It assumes one `act`
per executed step, i.e. sync timing. Under realtime timing, where chunks arrive late and every s steps, use the
`ensemble` strategy of the timing instead (`--strategy ensemble`, hylo.core.timing): it averages the predictions made
for each control step as they arrive.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from hylo.core.agent import agent_name, containers_of, notify, requirements_of
from hylo.core.chunk import ActionChunk, as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation, StepResult


class TemporalEnsemble:
    """Wraps an agent that returns chunks of array actions; returns one ensembled action per step."""

    def __init__(self, inner: Any, m: float = 0.01) -> None:
        if not m >= 0:
            raise ValueError(f"temporal ensemble weight m must be >= 0, got {m}")
        self.inner = inner
        self.m = float(m)
        self.name = f"temporal_ensemble({agent_name(inner)})"
        self.requirements = requirements_of(inner)
        self.containers = containers_of(inner)
        # _pending[k] holds the predictions made so far for the step k steps from now, oldest first.
        self._pending: deque[list[np.ndarray[Any, Any]]] = deque()

    def reset(self, ctx: EpisodeContext) -> None:
        self._pending.clear()
        notify((self.inner,), "reset", ctx)

    def act(self, obs: Observation) -> ActionChunk:
        chunk = as_chunk(self.inner.act(obs))
        pending = self._pending
        for i, action in enumerate(chunk.actions):
            if i == len(pending):
                pending.append([])
            pending[i].append(np.asarray(action, dtype=np.float64))
        predictions = pending.popleft()
        weights = np.exp(-self.m * np.arange(len(predictions)))
        action = np.tensordot(weights / weights.sum(), np.stack(predictions), axes=1)
        dtype = np.asarray(chunk.actions[0]).dtype
        return ActionChunk.single(action.astype(dtype if dtype.kind == "f" else np.float32))

    def on_step(self, result: StepResult) -> None:
        notify((self.inner,), "on_step", result)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        notify((self.inner,), "on_episode_end", outcome)
