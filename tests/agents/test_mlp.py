"""`mlp`: a seeded numpy MLP whose act_batch is one matrix product per layer."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from hylo.agents.mlp import MlpPolicy, blas_threads
from hylo.agents.registry import AgentSpecError, make_agent, registered_agents


def _obs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"state": rng.uniform(-1, 1, 39)}


def test_it_is_registered_by_name_and_built_with_its_arguments() -> None:
    assert registered_agents()["mlp"] == "hylo.agents.mlp:MlpPolicy"
    agent = make_agent("mlp", {"hidden": 16, "layers": 1})
    assert [w.shape for w in agent.weights] == [(16, 39), (4, 16)]


def test_its_weights_are_held_once_as_row_blocks() -> None:
    agent = MlpPolicy(hidden=100, layers=2)  # 100 rows: one full block of 64 and one padded with zero rows
    assert [b.shape for b in agent.blocks] == [(2, 64, 39), (2, 64, 100), (1, 4, 100)]
    for weights, blocks in zip(agent.weights, agent.blocks, strict=True):
        assert np.shares_memory(weights, blocks)  # the (out, in) matrix is a view: one copy of the model in memory
        assert not blocks.reshape(-1, weights.shape[1])[weights.shape[0] :].any()


def test_its_weights_come_from_its_seed() -> None:
    obs = _obs(np.random.default_rng(0))
    one, again, other = MlpPolicy(hidden=32), MlpPolicy(hidden=32), MlpPolicy(seed=1, hidden=32)
    assert np.array_equal(one.act(obs).actions[0], again.act(obs).actions[0])
    assert not np.array_equal(one.act(obs).actions[0], other.act(obs).actions[0])


def test_a_batch_answers_each_observation_as_act_does() -> None:
    rng = np.random.default_rng(3)
    agent = MlpPolicy(hidden=100)  # a padded last block: its zero rows must not reach the next layer
    observations = [_obs(rng) for _ in range(5)]
    batch = agent.act_batch(observations, [])
    assert len(batch) == 5
    for obs, chunk in zip(observations, batch, strict=True):
        single = agent.act(obs).actions[0]
        assert chunk.actions[0].dtype == np.float32 and chunk.actions[0].shape == (4,)
        np.testing.assert_allclose(chunk.actions[0], single, rtol=0, atol=1e-5)  # float rounding only
        assert np.all(np.abs(single) <= 1.0)


def test_its_actions_do_not_depend_on_the_threads_it_is_given() -> None:
    rng = np.random.default_rng(5)
    agent = MlpPolicy(hidden=1000)  # 16 blocks of 64 rows (the last padded): shared out among up to 3 threads
    batches = [rng.uniform(-1, 1, (size, 39)).astype(np.float32) for size in (1, 2, 4, 7)]
    with threadpool_limits(1):
        alone = [agent.forward(states) for states in batches]
    for threads in (2, 3):
        before = set(threading.enumerate())
        with threadpool_limits(threads):
            assert blas_threads() == threads
            for states, expected in zip(batches, alone, strict=True):
                assert np.array_equal(agent.forward(states), expected)  # bit for bit
        helpers = [t for t in set(threading.enumerate()) - before if t.name.startswith("hylo-mlp")]
        assert 1 <= len(helpers) <= threads - 1  # shared out (the calling thread takes a share too)


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(AgentSpecError, match=r"hidden: Input should be less than or equal to 8192, got 100000"):
        make_agent("mlp", {"hidden": 100_000})
    with pytest.raises(AgentSpecError, match=r"call_sleep_ms: Input should be greater than or equal to 0"):
        make_agent("mlp", {"call_sleep_ms": -1.0})


def test_it_passes_the_agent_conformance_suite_its_batch_of_one_included() -> None:
    pytest.importorskip("metaworld")
    from hylo.conformance import check_agent
    from hylo.envs.metaworld import MetaWorldBenchmark

    benchmark = MetaWorldBenchmark()
    tasks = [benchmark.task_instance("mt10", "reach-v3", index, 0) for index in range(2)]
    check_agent(lambda: MlpPolicy(hidden=64), benchmark.make_env, tasks, max_steps=10)
