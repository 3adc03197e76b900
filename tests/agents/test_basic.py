import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.agents import HoldAgent, RandomAgent, neutral_action
from hylo.core import EventBus, Kernel, MemoryRecorder, TaskInstance
from hylo.envs import GridGoal, PointReach


def _actions(agent, env, index=0):
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    Kernel(env, agent, bus=bus).run(TaskInstance("builtin", env.spec.name, index))
    return [e.action for e in recorder.of("action")]


def test_random_agent_is_reproducible_per_episode_and_varies_across_episodes():
    env = PointReach()
    first = _actions(RandomAgent(), env, 0)
    again = _actions(RandomAgent(), env, 0)
    other = _actions(RandomAgent(), env, 1)
    assert first == again
    assert first != other


def test_random_agent_does_not_touch_the_env_spec_space():
    env = GridGoal()
    before = env.spec.action_space.np_random.bit_generator.state
    _actions(RandomAgent(chunk=3), env)
    assert env.spec.action_space.np_random.bit_generator.state == before


def test_hold_agent_acts_neutrally():
    actions = _actions(HoldAgent(), PointReach())
    assert all(a == [0.0, 0.0] for a in actions)
    assert neutral_action(spaces.Box(0.5, 1.0, (2,))).tolist() == [0.5, 0.5]
    assert neutral_action(spaces.Discrete(3, start=2)) == 2
    assert neutral_action(spaces.Dict({"a": spaces.Discrete(2)})) == {"a": 0}
    assert np.array_equal(neutral_action(spaces.MultiBinary(3)), np.zeros(3))


def test_random_agent_chunk_must_be_positive():
    with pytest.raises(ValueError, match="0"):
        RandomAgent(chunk=0)
