"""`mlp`: a numpy multilayer perceptron over a state vector, with weights drawn from a seed.

It is not trained and not meant to be good: it is real work of the shape a learned policy's is, so that batched
inference can be measured on a CPU. One call reads every weight once, whatever its batch size: it is bound by memory
bandwidth, as a large model's call at a small batch is on a GPU, so B observations in one `act_batch` cost little
more than one. `call_sleep_ms` adds a sleep to every call, whatever its batch size: a stand-in for a GPU call, whose
cost barely grows with the batch while the CPU waits.

Each layer's weights are held as a stack of row blocks of `BLOCK_ROWS` rows, (blocks, rows, in), and applied to the
batch (as columns) in one stacked matrix product, `np.matmul(blocks, x)`; one state goes through the plain (out, in)
view in a matrix-vector product. Held as one (out, in) matrix, OpenBLAS multiplies it by a few columns in its general
kernel, which copies (packs) the whole matrix first: four states then cost 2.4× one on the machine this was measured
on, where the stacked blocks cost 1.2× (`hidden` 2048, one core).

The default shape (39 → 2048 → 2048 → 2048 → 2048 → 4, float32, 48 MB of weights; 3–5 ms per call on one core of
that machine, for one state as for four) fits Meta-World's 39-d state and 4-d action.
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

BLOCK_ROWS = 64
"""Rows per block of a layer's weights: a block times a batch of a few columns is small enough for OpenBLAS to
multiply without packing, and 64 rows of 2048 float32 (512 KB) stay in a core's L2 cache while it does."""

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
        self.blocks = [
            row_blocks(rng.standard_normal((n_out, n_in), dtype=np.float32) / np.float32(np.sqrt(n_in)))
            for n_in, n_out in itertools.pairwise(widths)
        ]
        self.weights = [
            blocks.reshape(-1, n_in)[:n_out]
            for blocks, (n_in, n_out) in zip(self.blocks, itertools.pairwise(widths), strict=True)
        ]  # views of the blocks: (out, in) each
        self.biases = [rng.standard_normal((n_out, 1), dtype=np.float32) * np.float32(0.1) for n_out in widths[1:]]
        self.state_dim = state_dim
        self.call_sleep_s = call_sleep_ms / 1000.0
        self.requirements = AgentRequirements(
            observation_keys=("state",), action_space=spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
        )

    def forward(self, states: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The (B, action_dim) actions for a (B, state_dim) batch of states: one stacked matrix product per layer (for
        one state, one matrix-vector product: OpenBLAS's kernel for it reads the matrix once, and faster)."""
        x = np.ascontiguousarray(states.T)
        last = len(self.weights) - 1
        for i, (w, blocks, b) in enumerate(zip(self.weights, self.blocks, self.biases, strict=True)):
            x = (w @ x if x.shape[1] == 1 else np.matmul(blocks, x).reshape(-1, x.shape[1])[: w.shape[0]]) + b
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


def row_blocks(weights: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """An (out, in) matrix as a contiguous (blocks, BLOCK_ROWS, in) stack, its last block padded with zero rows (a
    matrix of fewer rows is one block of its own height)."""
    n_out, n_in = weights.shape
    rows = min(BLOCK_ROWS, n_out)
    count = -(-n_out // rows)
    stacked = np.zeros((count * rows, n_in), dtype=weights.dtype)
    stacked[:n_out] = weights
    return stacked.reshape(count, rows, n_in)
