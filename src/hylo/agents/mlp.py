"""`mlp`: a numpy multilayer perceptron over a state vector, with weights drawn from a seed.

It is not trained and not meant to be good: it is real work of the shape a learned policy's is, so that batched
inference can be measured on a CPU. One call of `act` for one observation reads every weight once (a matrix-vector
product per layer, bound by memory bandwidth); `act_batch` for B observations reads them once too (one matrix
product per layer), so B episodes cost little more than one. `call_sleep_ms` adds a sleep to every call, whatever
its batch size: a stand-in for a GPU call, whose cost barely grows with the batch while the CPU waits.

The default shape (39 → 2048 → 2048 → 2048 → 2048 → 4, float32, 48 MB of weights; about 1.9 ms per call for one state
and 4.1 ms for four, on one core of the machine it was measured on) fits Meta-World's 39-d state and 4-d action.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation

MAX_WIDTH = 8192
"""The widest hidden layer `mlp` may be asked for (its weights are held in memory: 8192² float32 is 256 MB)."""


class MlpPolicy(AgentBase):
    """A seeded numpy MLP from `obs["state"]` to a `tanh`-bounded action; `act_batch` is one product per layer."""

    name = "mlp"

    class Args(AgentArgs):
        seed: int = Field(default=0, ge=0, le=2**32 - 1)
        state_dim: int = Field(default=39, ge=1, le=MAX_WIDTH)
        action_dim: int = Field(default=4, ge=1, le=MAX_WIDTH)
        hidden: int = Field(default=2048, ge=1, le=MAX_WIDTH)
        layers: int = Field(default=4, ge=0, le=16)
        call_sleep_ms: float = Field(default=0.0, ge=0.0, le=10_000.0)

    def __init__(
        self,
        seed: int = 0,
        state_dim: int = 39,
        action_dim: int = 4,
        hidden: int = 2048,
        layers: int = 4,
        call_sleep_ms: float = 0.0,
    ) -> None:
        rng = np.random.default_rng(seed)
        widths = [state_dim, *([hidden] * layers), action_dim]
        # Each layer's weights as (out, in), applied to the batch as columns: OpenBLAS multiplies a wide matrix by a
        # few columns much faster than a few rows by it (4 states cost 2x one, not 3x).
        self.weights = [
            rng.standard_normal((n_out, n_in), dtype=np.float32) / np.float32(np.sqrt(n_in))
            for n_in, n_out in itertools.pairwise(widths)
        ]
        self.biases = [rng.standard_normal((n_out, 1), dtype=np.float32) * np.float32(0.1) for n_out in widths[1:]]
        self.state_dim = state_dim
        self.call_sleep_s = call_sleep_ms / 1000.0
        self.requirements = AgentRequirements(
            observation_keys=("state",), action_space=spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
        )

    def forward(self, states: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The (B, action_dim) actions for a (B, state_dim) batch of states: one matrix product per layer."""
        x = states.T
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = w @ x + b
            x = np.tanh(x) if i == last else np.maximum(x, np.float32(0.0))
        return np.ascontiguousarray(x.T)

    def act(self, obs: Observation) -> ActionChunk:
        return self.act_batch([obs], [])[0]

    def act_batch(self, observations: Sequence[Observation], contexts: Sequence[EpisodeContext]) -> list[ActionChunk]:
        states = np.stack([np.asarray(obs["state"], dtype=np.float32).reshape(self.state_dim) for obs in observations])
        actions = self.forward(states)
        if self.call_sleep_s:
            time.sleep(self.call_sleep_s)
        return [ActionChunk.single(row.copy()) for row in actions]
