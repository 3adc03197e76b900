"""The batched bridge's shared agent on its own, without sockets: what each connection's hooks are called with, an
`act_batch` that answers the wrong number of chunks, and a stop while requests wait."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import gymnasium.spaces as spaces
import pytest

from hylo.bridges.batched_agent import BatchedAgent, BridgeStopped, ConnectionAgent, NotBatched
from hylo.core.context import EpisodeContext
from hylo.core.types import EnvSpec, TaskInstance

LONG_WAIT_S = 60.0  # a batch closes only when full or when every open episode waits


def context(task: str, seed: int) -> EpisodeContext:
    spec = EnvSpec(spaces.Dict({}), spaces.Box(-1.0, 1.0, shape=(1,)))
    return EpisodeContext(seed=seed, env_spec=spec, task=TaskInstance("vla-eval", task, seed=seed))


class Recorder:
    """Answers each observation with (its value, its episode's task), and notes every call it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closed = False

    def reset(self, ctx: EpisodeContext) -> None:
        self.calls.append(("reset", ctx.task.task))

    def on_episode_end(self, outcome: Any, ctx: EpisodeContext) -> None:
        self.calls.append(("end", (outcome, ctx.task.task)))

    def act_batch(self, observations: list[Any], contexts: list[EpisodeContext]) -> list[Any]:
        self.calls.append(("act_batch", [ctx.task.task for ctx in contexts]))
        return [(obs, ctx.task.task) for obs, ctx in zip(observations, contexts, strict=True)]

    def close(self) -> None:
        self.closed = True


def opened(shared: BatchedAgent, *tasks: str) -> list[ConnectionAgent]:
    agents = [shared.acquire() for _ in tasks]
    for seed, (agent, task) in enumerate(zip(agents, tasks, strict=True)):
        agent.reset(context(task, seed))
    return agents


def test_the_requests_of_every_open_episode_share_one_call_each_with_its_own_context() -> None:
    policy = Recorder()
    shared = BatchedAgent(policy, 4, LONG_WAIT_S)
    first, second = opened(shared, "a", "b")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda pair: pair[0].act(pair[1]), [(first, 1), (second, 2)]))
    assert answers == [(1, "a"), (2, "b")]
    first.on_episode_end("done")
    assert second.act(3) == (3, "b")  # alone now: the only open episode waits, so its batch closes at once
    assert [call[1] for call in policy.calls if call[0] == "act_batch"] == [["a", "b"], ["b"]]
    assert ("end", ("done", "a")) in policy.calls and shared.size == 1
    figures = shared.figures()
    assert (figures["calls"], figures["requests"], figures["mean_batch_size"]) == (2, 3, 1.5)
    shared.close()
    assert policy.closed


class Boom(Exception):
    """An agent's own error type."""


def test_each_episode_of_a_failed_batch_gets_its_own_copy_of_the_agents_error() -> None:
    class Exploding(Recorder):
        def act_batch(self, observations: list[Any], contexts: list[EpisodeContext]) -> list[Any]:
            raise Boom("policy exploded")

    shared = BatchedAgent(Exploding(), 2, LONG_WAIT_S)
    first, second = opened(shared, "a", "b")

    def act(agent: ConnectionAgent) -> BaseException:
        with pytest.raises(Boom, match="policy exploded") as raised:
            agent.act(0)
        return raised.value

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(act, [first, second]))
    assert errors[0] is not errors[1]  # each thread raised its own, with its own traceback
    assert shared.figures()["calls"] == 1
    shared.close()


def test_an_act_batch_that_answers_the_wrong_number_of_chunks_fails_its_batch() -> None:
    class Short(Recorder):
        def act_batch(self, observations: list[Any], contexts: list[EpisodeContext]) -> list[Any]:
            return []

    shared = BatchedAgent(Short(), 2, LONG_WAIT_S)
    (agent,) = opened(shared, "a")
    with pytest.raises(ValueError, match="act_batch returned 0 chunks for 1 observations"):
        agent.act(1)
    shared.close()


def test_a_stop_fails_the_requests_still_waiting_and_closes_the_agent() -> None:
    policy = Recorder()
    shared = BatchedAgent(policy, 4, LONG_WAIT_S)
    waiting, _silent = opened(shared, "a", "b")  # the second never asks: the first's batch waits for it
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        asked = pool.submit(waiting.act, 1)
        with pytest.raises(concurrent.futures.TimeoutError):
            asked.result(timeout=0.2)
        shared.close()
        with pytest.raises(BridgeStopped):
            asked.result(timeout=10)
    assert policy.closed and not [call for call in policy.calls if call[0] == "act_batch"]


def test_an_agent_without_act_batch_is_refused_by_name() -> None:
    class Plain:
        name = "plain"

        def act(self, obs: Any) -> Any:
            return obs

    with pytest.raises(NotBatched, match="agent 'plain' has no act_batch"):
        BatchedAgent(Plain(), 2, 0.01)
