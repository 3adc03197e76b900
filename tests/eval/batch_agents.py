"""Agents the batched-inference tests name as `batch_agents:Class` (this directory is on PYTHONPATH, as the other eval
fixtures are, so the policy host and the workers import it by name).

`HYLO_TEST_BATCH_MARKER` names a file: the agents that fail once (across processes) create it when they do.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium.spaces as spaces
import numpy as np

from hylo.agents.mlp import blas_threads
from hylo.core import ActionChunk, AgentBase, AgentRequirements, ContainerSpec

REQUIRES = AgentRequirements(observation_keys=("state",), action_space=spaces.Box(-1.0, 1.0, (4,)), needs_images=False)


def _first_time() -> bool:
    """True once per marker file across processes: the first caller creates it."""
    try:
        fd = os.open(os.environ["HYLO_TEST_BATCH_MARKER"], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class ExactPolicy(AgentBase):
    """A seeded integer network over Meta-World's state, plus per-episode noise from `ctx.rng` and a term from the
    rewards its `on_step` saw in that episode: its batched arithmetic is exact (integer products), and an episode
    given another's context, or told another's steps, would act otherwise."""

    requirements = REQUIRES

    def __init__(self, seed: int = 0, chunk: int = 1) -> None:
        self.weights = np.random.default_rng(seed).integers(-50, 50, size=(39, 4), dtype=np.int64)
        self.chunk = chunk
        self.rewards: dict[str, float] = {}  # per episode, by id: one instance serves many under --batch

    def on_step(self, result, ctx=None):
        episode = (ctx or self.ctx).episode_id
        self.rewards[episode] = self.rewards.get(episode, 0.0) + float(result.reward)

    def on_episode_end(self, outcome, ctx=None):
        self.rewards.pop((ctx or self.ctx).episode_id, None)

    def _actions(self, states: np.ndarray, contexts) -> list[ActionChunk]:
        hidden = np.rint(states * 1000).astype(np.int64) @ self.weights  # exact whatever the batch
        base = ((hidden % 2001) - 1000).astype(np.float32) / np.float32(2000.0)
        chunks = []
        for row, ctx in zip(base, contexts, strict=True):
            noise = ctx.rng.integers(-100, 100, size=(self.chunk, 4)).astype(np.float32) / np.float32(400.0)
            told = np.float32(int(self.rewards.get(ctx.episode_id, 0.0) * 100) % 7) / np.float32(100.0)
            chunks.append(ActionChunk([row + n - told for n in noise]))
        return chunks

    def act(self, obs):
        return self._actions(np.asarray(obs["state"])[None, :], [self.ctx])[0]

    def act_batch(self, observations, contexts):
        return self._actions(np.stack([np.asarray(o["state"]) for o in observations]), contexts)


class FramePolicy(ExactPolicy):
    """`ExactPolicy` that also reads the camera frame: its actions move with an exact sum over the frame's pixels,
    so a frame that reached the host changed, cut or another episode's would change them."""

    requirements = AgentRequirements(
        observation_keys=("state", "images/corner"), action_space=spaces.Box(-1.0, 1.0, (4,)), needs_images=True
    )

    def _framed(self, chunks: list[ActionChunk], observations) -> list[ActionChunk]:
        framed = []
        for chunk, obs in zip(chunks, observations, strict=True):
            pixels = np.asarray(obs["images"]["corner"], dtype=np.int64)
            shift = np.float32(int((pixels * np.arange(1, pixels.shape[1] + 1)[:, None]).sum()) % 97) / np.float32(400)
            framed.append(ActionChunk([action + shift for action in chunk.actions]))
        return framed

    def act(self, obs):
        return self._framed([super().act(obs)], [obs])[0]

    def act_batch(self, observations, contexts):
        return self._framed(super().act_batch(observations, contexts), observations)


class ThreadsPolicy(ExactPolicy):
    """Acts [n / 100, 0, 0, 0], n the BLAS threads its process may use when it acts."""

    def act_batch(self, observations, contexts):
        return [ActionChunk.single(np.array([blas_threads() / 100, 0, 0, 0], np.float32)) for _ in observations]

    def act(self, obs):
        return self.act_batch([obs], [self.ctx])[0]


class SlowPolicy(ExactPolicy):
    """ExactPolicy whose every call takes 30 ms, as a GPU call does to the CPU: an episode outlasts another's reset."""

    def act_batch(self, observations, contexts):
        time.sleep(0.03)
        return super().act_batch(observations, contexts)


class OneArgumentHooks(ExactPolicy):
    """`ExactPolicy` whose hooks take one argument and read the episode from `self.ctx`, as an `AgentBase` agent
    written for one episode at a time does: served many at once, each hook must still see its own episode."""

    def on_step(self, result):
        super().on_step(result, self.ctx)

    def on_episode_end(self, outcome):
        super().on_episode_end(outcome, self.ctx)


class RememberingPolicy(ExactPolicy):
    """`ExactPolicy` that also counts its acts in an episode-lifetime container (cleared by the episode's signals
    only): a container not cleared between two episodes of a worker would change the second one's actions."""

    containers = (ContainerSpec("asked", lifetime="episode", reducer="add"),)

    def _actions(self, states: np.ndarray, contexts) -> list[ActionChunk]:
        shifted = []
        for chunk, ctx in zip(super()._actions(states, contexts), contexts, strict=True):
            ctx.containers["asked"].write(1)
            shift = np.float32(ctx.containers["asked"].read() % 7) / np.float32(50.0)
            shifted.append(ActionChunk([action - shift for action in chunk.actions]))
        return shifted


class ExplodingBatch(ExactPolicy):
    """Raises in `act_batch` at the `at`-th request of episode `index` (the whole batch fails with it); per-episode
    counts are kept by episode id, as a shared agent keeps per-episode state."""

    def __init__(self, index: int = 1, at: int = 3) -> None:
        super().__init__()
        self.index, self.at = index, at
        self.asked: dict[str, int] = {}

    def act_batch(self, observations, contexts):
        for ctx in contexts:
            self.asked[ctx.episode_id] = self.asked.get(ctx.episode_id, 0) + 1
            if ctx.task.index == self.index and self.asked[ctx.episode_id] == self.at:
                raise RuntimeError("policy exploded")
        return super().act_batch(observations, contexts)


class HostKiller(ExactPolicy):
    """The first time (across processes) episode `index` asks, its process is SIGKILLed: the policy host dies."""

    def __init__(self, index: int = 1, delay_s: float = 0.0) -> None:
        super().__init__()
        self.index, self.delay_s = index, delay_s

    def act_batch(self, observations, contexts):
        if self.delay_s:
            time.sleep(self.delay_s)
        if any(ctx.task.index == self.index for ctx in contexts) and _first_time():
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act_batch(observations, contexts)


class DiesForGood(ExactPolicy):
    """Kills its host at the run's first request and cannot be built again afterwards (its weights gone): the
    episodes in flight then are lost with the host, every later one finds none."""

    def __init__(self) -> None:
        if os.path.exists(os.environ["HYLO_TEST_BATCH_MARKER"]):
            raise RuntimeError("the weights are gone")
        super().__init__()

    def act_batch(self, observations, contexts):
        if _first_time():
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act_batch(observations, contexts)


class HangOnce(ExactPolicy):
    """The first time (across processes) episode `index` asks, the call hangs."""

    def __init__(self, index: int = 1) -> None:
        super().__init__()
        self.index = index

    def act_batch(self, observations, contexts):
        if any(ctx.task.index == self.index for ctx in contexts) and _first_time():
            time.sleep(3600)
        return super().act_batch(observations, contexts)


class ActOnly(AgentBase):
    """An agent without act_batch."""

    requirements = REQUIRES

    def act(self, obs):
        return ActionChunk.single(np.zeros(4, np.float32))


class BatchOfOneDiffers(ActOnly):
    """Its act_batch of one answers something else than its act."""

    def act_batch(self, observations, contexts):
        return [ActionChunk.single(np.full(4, 0.5, np.float32)) for _ in observations]
