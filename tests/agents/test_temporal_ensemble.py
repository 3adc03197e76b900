import numpy as np
import pytest

from hylo.agents import TemporalEnsemble
from hylo.core import ActionChunk, EventBus, Kernel, MemoryRecorder, TaskInstance
from hylo.envs import NullEnv, PointReach, PointReachExpert


class CountingChunker:
    """Predicts, at call k, the chunk [k, k+1, k+2] (as 1-D arrays): step t receives predictions t from every call."""

    def __init__(self) -> None:
        self.calls = 0

    def act(self, obs):
        k = self.calls
        self.calls += 1
        return ActionChunk([np.full(7, (k + i) / 100, np.float32) for i in range(3)])


class DriftingChunker:
    """Call k predicts value 10*k for every future step, so older predictions differ from newer ones."""

    def __init__(self) -> None:
        self.calls = 0

    def act(self, obs):
        k = self.calls
        self.calls += 1
        return ActionChunk([np.full(1, 10.0 * k / 1000, np.float32)] * 4)


def _executed(agent, env, steps):
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    Kernel(env, agent, max_steps=steps, bus=bus).run(TaskInstance("t", "x"))
    return [np.asarray(e.action) for e in recorder.of("action")]


def test_consistent_predictions_pass_through_unchanged():
    actions = _executed(TemporalEnsemble(CountingChunker(), m=0.5), NullEnv(), 6)
    assert [round(float(a[0]) * 100) for a in actions] == [0, 1, 2, 3, 4, 5]


def test_weights_follow_act_exponential_with_oldest_first():
    m = 0.3
    actions = _executed(TemporalEnsemble(DriftingChunker(), m=m), NullEnv(dim=1), 5)
    # At step t the predictions come from calls max(0, t-3)..t (chunk length 4); value of call k is 0.01*k.
    for t, action in enumerate(actions):
        calls = list(range(max(0, t - 3), t + 1))
        weights = np.exp(-m * np.arange(len(calls)))
        expected = float(np.dot(weights, [0.01 * k for k in calls]) / weights.sum())
        assert float(action[0]) == pytest.approx(expected, rel=1e-5)


def test_wrapper_queries_policy_every_step_and_still_succeeds():
    expert = PointReachExpert(chunk=4)
    outcome = Kernel(PointReach(), TemporalEnsemble(expert, m=0.01)).run(TaskInstance("builtin", "point_reach", 3))
    assert outcome.success
    assert outcome.steps > 0


def test_negative_weight_rejected():
    with pytest.raises(ValueError, match="-1"):
        TemporalEnsemble(CountingChunker(), m=-1)
