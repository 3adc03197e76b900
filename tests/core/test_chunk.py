"""ActionChunk and chunk execution in the Kernel."""

from __future__ import annotations

import pickle
import re
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    ChunkExecutor,
    Environment,
    EnvSpec,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    Kernel,
    MemoryRecorder,
    Observation,
    StepResult,
    TaskInstance,
)

TASK = TaskInstance(benchmark="test", task="chunk")


# -- ActionChunk -------------------------------------------------------------------------------------------------------


def test_positional_and_keyword_arguments() -> None:
    positional = ActionChunk([1, 2, 3], 2)
    keyword = ActionChunk(actions=[1, 2, 3], execution_steps=2)
    assert positional.actions == keyword.actions == (1, 2, 3)
    assert positional.execution_steps == keyword.execution_steps == 2
    assert len(positional) == 3


@pytest.mark.parametrize(
    "actions",
    [[0, 1, 2], (0, 1, 2), range(3), np.array([0, 1, 2])],
    ids=["list", "tuple", "range", "1d-array"],
)
def test_accepts_any_sequence_of_ints(actions: Any) -> None:
    chunk = ActionChunk(actions)
    assert [int(a) for a in chunk.actions] == [0, 1, 2]
    assert len(chunk) == 3


def test_accepts_a_list_of_arrays() -> None:
    actions = [np.zeros(2), np.ones(2), np.full(2, 0.5)]
    chunk = ActionChunk(actions)
    assert len(chunk) == 3
    for got, want in zip(chunk.actions, actions, strict=True):
        np.testing.assert_array_equal(got, want)


def test_rows_of_a_2d_array_are_the_actions() -> None:
    plan = np.arange(12, dtype=np.float32).reshape(4, 3)
    chunk = ActionChunk(plan, 2)
    assert len(chunk) == 4
    assert chunk.execution_steps == 2
    for got, row in zip(chunk.actions, plan, strict=True):
        assert np.shape(got) == (3,)
        np.testing.assert_array_equal(got, row)


def test_accepts_dict_actions() -> None:
    chunk = ActionChunk([{"arm": np.zeros(3), "gripper": 1}])
    assert chunk.actions[0]["gripper"] == 1


def test_chunk_is_decoupled_from_the_callers_list() -> None:
    actions = [1, 2]
    chunk = ActionChunk(actions)
    actions.append(3)
    assert len(chunk) == 2


@pytest.mark.parametrize("n", [1, 3, 8])
def test_default_execution_steps_is_the_whole_chunk(n: int) -> None:
    assert ActionChunk(list(range(n))).execution_steps == n


def test_numpy_integer_execution_steps() -> None:
    chunk = ActionChunk([1, 2, 3], np.int64(2))
    assert chunk.execution_steps == 2
    assert type(chunk.execution_steps) is int


def test_single() -> None:
    chunk = ActionChunk.single(5)
    assert chunk.actions == (5,)
    assert chunk.execution_steps == 1


@pytest.mark.parametrize("steps", [0, -1, 4, 1.5, True, "2"])
def test_invalid_execution_steps_raise_naming_the_value(steps: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(steps))):
        ActionChunk([1, 2, 3], steps)


@pytest.mark.parametrize("actions", [[], (), np.empty((0, 3))], ids=["list", "tuple", "0-row-array"])
def test_empty_chunk_raises(actions: Any) -> None:
    with pytest.raises(ValueError, match="empty"):
        ActionChunk(actions)


def test_0d_array_raises() -> None:
    with pytest.raises(ValueError, match="0-d"):
        ActionChunk(np.array(1.0))


@pytest.mark.parametrize("actions", [5, "abc", {1, 2}, (a for a in [1, 2])], ids=["int", "str", "set", "generator"])
def test_non_sequence_raises(actions: Any) -> None:
    with pytest.raises(TypeError, match=type(actions).__name__):
        ActionChunk(actions)


def test_a_chunk_cannot_change_once_built() -> None:
    chunk = ActionChunk([1, 2, 3], 2)
    with pytest.raises(AttributeError, match="cannot change"):
        chunk.execution_steps = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot change"):
        del chunk.actions
    assert chunk.actions == (1, 2, 3) and chunk.execution_steps == 2


def test_a_chunks_arrays_are_read_only_and_the_agents_stay_writable() -> None:
    mine = np.zeros(2)
    plan = np.zeros((2, 2))
    held = {"arm": np.zeros(3), "gripper": 1}
    for chunk in (ActionChunk([mine]), ActionChunk.single(mine), ActionChunk(plan), ActionChunk([held])):
        first = chunk.actions[0]
        array = first["arm"] if isinstance(first, dict) else first
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1.0
    mine[0] = plan[0, 0] = held["arm"][0] = 1.0  # the agent's own arrays: still its to reuse
    assert mine.flags.writeable and plan.flags.writeable and held["arm"].flags.writeable


def test_a_chunk_survives_pickling() -> None:
    chunk = ActionChunk([np.arange(3.0), np.ones(3)], 1)
    back = pickle.loads(pickle.dumps(chunk))
    assert back.execution_steps == 1 and len(back) == 2
    np.testing.assert_array_equal(back.actions[0], np.arange(3.0))
    assert not back.actions[0].flags.writeable


def test_executor_plays_execution_steps_then_runs_dry() -> None:
    executor = ChunkExecutor()
    assert executor.empty
    executor.load(ActionChunk([1, 2, 3, 4], 2))
    assert executor.remaining == 2
    assert [executor.next(), executor.next()] == [1, 2]
    assert executor.empty
    executor.load(ActionChunk([7, 8, 9]))
    executor.clear()
    assert executor.empty


# -- in the Kernel -----------------------------------------------------------------------------------------------------


class RecordingEnv(Environment):
    """Records every action it executes; the observation is the step count. Never ends on its own."""

    def __init__(self, action_space: spaces.Space[Any], max_episode_steps: int = 50, success_at: int | None = None):
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0, np.inf, (), np.float64)}),
            action_space=action_space,
            control_rate_hz=10.0,
            max_episode_steps=max_episode_steps,
            name="recording",
        )
        self.success_at = success_at
        self.t = 0
        self.actions: list[Any] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self, task: TaskInstance) -> Observation:
        self.t = 0
        self.actions = []
        return self.observe()

    def step(self, action: Any) -> StepResult:
        self.actions.append(action)
        self.t += 1
        return StepResult(self.observe(), success=self.t == self.success_at)

    def observe(self) -> Observation:
        return Observation(t=self.t)


class PlanAgent:
    """At its k-th act returns `plan(k)`; records the step count of every observation it was asked about."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.asked_at: list[int] = []

    def act(self, obs: Observation) -> Any:
        self.asked_at.append(int(obs["t"]))
        return self.plan(len(self.asked_at) - 1)


def run(env: Environment, agent: Any, **kwargs: Any) -> tuple[EpisodeOutcome, MemoryRecorder]:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    outcome = Kernel(env, agent, bus=bus, **kwargs).run(TASK)
    return outcome, recorder


@pytest.mark.parametrize(("size", "execution_steps"), [(5, 3), (4, 4), (3, 1), (6, 2)])
def test_act_is_called_again_exactly_after_execution_steps(size: int, execution_steps: int) -> None:
    env = RecordingEnv(spaces.Discrete(1000))
    agent = PlanAgent(lambda k: ActionChunk([100 * k + i for i in range(size)], execution_steps))
    budget = 7
    outcome, recorder = run(env, agent, max_steps=budget)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", budget)

    calls = -(-budget // execution_steps)  # ceil
    assert agent.asked_at == [k * execution_steps for k in range(calls)]
    expected = [100 * k + i for k in range(calls) for i in range(execution_steps)][:budget]
    assert [int(a) for a in env.actions] == expected
    chunks = recorder.of("agent.chunk")
    assert [c.requested_at for c in chunks] == agent.asked_at
    assert all(c.size == size and c.execution_steps == execution_steps for c in chunks)


def test_bare_action_is_a_one_step_chunk() -> None:
    env = RecordingEnv(spaces.Discrete(1000))
    agent = PlanAgent(lambda k: k)
    outcome, _ = run(env, agent, max_steps=4)
    assert outcome.steps == 4
    assert agent.asked_at == [0, 1, 2, 3]
    assert env.actions == [0, 1, 2, 3]


def test_2d_array_chunk_rows_are_executed_in_order() -> None:
    env = RecordingEnv(spaces.Box(-1.0, 1.0, (2,), np.float32))
    plan = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], np.float32)
    agent = PlanAgent(lambda k: ActionChunk(plan))
    outcome, _ = run(env, agent, max_steps=3)
    assert outcome.steps == 3
    assert agent.asked_at == [0]
    np.testing.assert_allclose(np.stack(env.actions), plan)


def test_episode_ending_mid_chunk_does_not_leak_into_the_next_episode() -> None:
    env = RecordingEnv(spaces.Discrete(1000), success_at=2)
    agent = PlanAgent(lambda k: ActionChunk([100 * k + i for i in range(5)]))
    kernel = Kernel(env, agent)
    first = kernel.run(TASK)
    assert (first.status, first.steps) == (EpisodeStatus.SUCCESS, 2)
    second = kernel.run(TASK)
    assert (second.status, second.steps) == (EpisodeStatus.SUCCESS, 2)
    assert agent.asked_at == [0, 0], "a new episode starts with a fresh act, not the previous plan's leftovers"
    assert env.actions == [100, 101]


@pytest.mark.parametrize("clipped_at", [0, 1, 2])
def test_clipped_action_clears_the_executor(clipped_at: int) -> None:
    env = RecordingEnv(spaces.Box(-1.0, 1.0, (1,), np.float32))

    def plan(k: int) -> ActionChunk:
        values = [0.1 * (k + 1) + 0.01 * i for i in range(5)]
        if k == 0:
            values[clipped_at] = 2.0  # out of bounds: the default shield clips it to 1.0
        return ActionChunk([np.array([v], np.float32) for v in values], 5)

    agent = PlanAgent(plan)
    outcome, recorder = run(env, agent, max_steps=clipped_at + 3)
    assert outcome.steps == clipped_at + 3
    assert outcome.safety_interventions == 1
    # act is asked again at the very next step after the clipped one, not after the chunk's 5 steps
    assert agent.asked_at == [0, clipped_at + 1]
    executed = [round(float(a[0]), 4) for a in env.actions]
    first = [round(0.1 + 0.01 * i, 4) for i in range(clipped_at)]
    assert executed == [*first, 1.0, 0.2, 0.21]
    reviews = recorder.of("safety.review")
    assert [r.modified for r in reviews] == [i == clipped_at for i in range(clipped_at + 3)]
