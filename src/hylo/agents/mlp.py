"""`mlp`: a numpy multilayer perceptron over a state vector, with weights drawn from a seed.

It is not trained and not meant to be good: it is real work of the shape a learned policy's is, so that batched
inference can be measured on a CPU. One call reads every weight once, whatever its batch size: it is bound by memory
bandwidth, as a large model's call at a small batch is on a GPU, so B observations in one `act_batch` cost little
more than one. `call_sleep_ms` adds a sleep to every call, whatever its batch size: a stand-in for a GPU call, whose
cost barely grows with the batch while the CPU waits.

Each layer's weights are held as a stack of row blocks of `BLOCK_ROWS` rows, (blocks, rows, in), and applied to the
batch (as columns) in one stacked matrix product, `np.matmul(blocks, x)`, a batch of one included. Held as one
(out, in) matrix, OpenBLAS multiplies it by a few columns in its general kernel, which copies (packs) the whole matrix
first: four states then cost 2.4× one on the machine this was measured on, where the stacked blocks cost 1.3×
(`hidden` 2048, one core).

The product uses as many threads as the process's BLAS may (threadpoolctl's limit): the blocks are shared out among
them, each thread multiplying its own run of blocks (numpy releases the GIL), while BLAS is held to one thread per
block. OpenBLAS would not split the stacked product itself (each block is too small), and where it splits a product
it may change the order of a sum. An env worker's BLAS has one thread (`HYLO_WORKER_THREADS`), a policy host's every
CPU (`HYLO_HOST_THREADS`): its calls run while the workers in its batch wait for them. Every block is multiplied by
the same kernel on one thread whoever runs it, so the actions do not depend on the thread count.

The default shape (39 → 2048 → 2048 → 2048 → 2048 → 4, float32, 48 MB of weights) fits Meta-World's 39-d state and
4-d action. Measured on a 2-core machine: 2.2–2.6 ms per call on one thread for one state, 2.6–3.3 ms for four; with
two threads, 1.3 ms for one state, 1.9–2.1 ms for four.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field
from threadpoolctl import ThreadpoolController

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.types import Observation

BLOCK_ROWS = 64
"""Rows per block of a layer's weights: a block times a batch of a few columns is small enough for OpenBLAS to
multiply without packing, and 64 rows of 2048 float32 (512 KB) stay in a core's L2 cache while it does."""

MIN_SHARE_BYTES = 2**20
"""The least weight a thread is handed in a batch's product: a smaller share costs more to hand over than to multiply
(the first layer, 2048 × 39, is multiplied by the calling thread alone)."""

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
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self.requirements = AgentRequirements(
            observation_keys=("state",),
            action_space=spaces.Box(-1.0, 1.0, (action_dim,), np.float32),
            needs_images=False,
        )

    def forward(self, states: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The (B, action_dim) actions for a (B, state_dim) batch of states: one stacked matrix product per layer,
        its blocks shared out among the threads the process's BLAS may use, each block multiplied by BLAS on one."""
        x = np.ascontiguousarray(states.T)
        last = len(self.blocks) - 1
        with _blas_alone() as threads:
            for i, (blocks, b) in enumerate(zip(self.blocks, self.biases, strict=True)):
                x = self._stacked(blocks, x, threads)[: b.shape[0]] + b
                x = np.tanh(x) if i == last else np.maximum(x, np.float32(0.0))
        return np.ascontiguousarray(x.T)

    def _stacked(self, blocks: np.ndarray[Any, Any], x: np.ndarray[Any, Any], threads: int) -> np.ndarray[Any, Any]:
        """`np.matmul(blocks, x)` as (rows, B), its blocks shared out among `threads` threads."""
        out = np.empty((blocks.shape[0], blocks.shape[1], x.shape[1]), dtype=np.result_type(blocks, x))
        parts = min(threads, blocks.shape[0], blocks.nbytes // MIN_SHARE_BYTES)
        if parts < 2:
            np.matmul(blocks, x, out=out)
            return out.reshape(-1, x.shape[1])
        if self._pool is None or self._pool_size != parts:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._pool, self._pool_size = ThreadPoolExecutor(parts - 1, thread_name_prefix="hylo-mlp"), parts
        bounds = [len(blocks) * k // parts for k in range(parts + 1)]
        spans = [slice(start, end) for start, end in itertools.pairwise(bounds)]
        helped = [self._pool.submit(np.matmul, blocks[span], x, out=out[span]) for span in spans[1:]]
        np.matmul(blocks[spans[0]], x, out=out[spans[0]])  # this thread's share, while the others run theirs
        for done in helped:
            done.result()
        return out.reshape(-1, x.shape[1])

    def act(self, obs: Observation) -> ActionChunk:
        return self.act_batch([obs], [])[0]

    def act_batch(self, observations: Sequence[Observation], contexts: Sequence[EpisodeContext]) -> list[ActionChunk]:
        states = np.stack([np.asarray(obs["state"], dtype=np.float32).reshape(self.state_dim) for obs in observations])
        actions = self.forward(states)
        if self.call_sleep_s:
            time.sleep(self.call_sleep_s)
        return [ActionChunk.single(row.copy()) for row in actions]


def blas_threads() -> int:
    """How many threads this process's BLAS may use now (threadpoolctl's limit; the smallest of its BLAS libraries')."""
    counts = [n for lib in _blas().lib_controllers if isinstance(n := lib.num_threads, int)]
    return max(1, min(counts, default=1))


@contextlib.contextmanager
def _blas_alone() -> Iterator[int]:
    """The threads BLAS may use (yielded), while it is held to one: the products are shared out among those threads
    here, and a BLAS that split each block's product too would run threads within threads. Held under one lock: a
    thread that read the limit while another held it to one would run on one thread, or on BLAS's own threads."""
    with _BLAS_LOCK:
        threads = blas_threads()
        if threads == 1:
            yield 1
            return
        libs = _blas().lib_controllers
        saved = [lib.num_threads for lib in libs]
        for lib in libs:
            lib.set_num_threads(1)
        try:
            yield threads
        finally:
            for lib, count in zip(libs, saved, strict=True):
                lib.set_num_threads(count)


_BLAS_LOCK = threading.Lock()


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController().select(user_api="blas")


def row_blocks(weights: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """An (out, in) matrix as a contiguous (blocks, BLOCK_ROWS, in) stack, its last block padded with zero rows (a
    matrix of fewer rows is one block of its own height)."""
    n_out, n_in = weights.shape
    rows = min(BLOCK_ROWS, n_out)
    count = -(-n_out // rows)
    stacked = np.zeros((count * rows, n_in), dtype=weights.dtype)
    stacked[:n_out] = weights
    return stacked.reshape(count, rows, n_in)
