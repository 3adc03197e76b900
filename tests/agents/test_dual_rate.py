import threading
import time

import numpy as np
import pytest

from hylo.agents import DualRateAgent
from hylo.core import ActionChunk, EventBus, Kernel, MemoryRecorder, StepResult, TaskInstance
from hylo.envs import NullEnv


class SubgoalPolicy:
    """Acts with the committed subgoal encoded in the action, so the trace shows which subgoal was used."""

    def act(self, obs, subgoal):
        value = -0.5 if subgoal is None else subgoal / 100
        return ActionChunk([np.full(7, value, np.float32)])


class CountingReasoner:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: list[str] = []
        self.threads: set[str] = set()

    def reason(self, obs, trigger, subgoal):
        self.calls.append(trigger)
        self.threads.add(threading.current_thread().name)
        if self.delay_s:
            time.sleep(self.delay_s)
        return len(self.calls)


def _run(agent, steps=12):
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    Kernel(NullEnv(), agent, max_steps=steps, bus=bus).run(TaskInstance("t", "x"))
    return [round(float(e.action[0]) * 100) for e in recorder.of("action")], recorder


def test_reasoner_triggers_on_episode_start_and_periodically_in_its_own_thread():
    reasoner = CountingReasoner()
    agent = DualRateAgent(SubgoalPolicy(), reasoner, period_steps=4)
    actions, recorder = _run(agent, steps=12)
    assert reasoner.calls == ["episode_start", "periodic", "periodic"]
    assert reasoner.threads == {"hylo-reasoner"}
    # Zero latency: each subgoal is used from the step it was triggered at.
    assert actions == [1] * 4 + [2] * 4 + [3] * 4
    decisions = recorder.of("agent.decision")
    assert [d.content["trigger"] for d in decisions] == ["episode_start", "periodic", "periodic"]


def test_virtual_latency_commits_at_a_fixed_step_whatever_the_reasoner_speed():
    fast = _run(DualRateAgent(SubgoalPolicy(), CountingReasoner(0.0), period_steps=5, reasoner_latency_steps=2))[0]
    slow = _run(DualRateAgent(SubgoalPolicy(), CountingReasoner(0.03), period_steps=5, reasoner_latency_steps=2))[0]
    assert fast == slow
    # Initial subgoal (None -> -50) for two steps, subgoal 1 from step 2; trigger at 5 commits at 7, etc.
    assert fast == [-50, -50, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]


def test_wall_clock_never_blocks_the_loop_on_a_slow_reasoner():
    reasoner = CountingReasoner(delay_s=0.5)
    agent = DualRateAgent(SubgoalPolicy(), reasoner, clock="wall")
    start = time.perf_counter()
    actions, _ = _run(agent, steps=20)
    elapsed = time.perf_counter() - start
    assert reasoner.calls == ["episode_start"]
    # The policy kept acting on the initial subgoal while the reasoner was still thinking.
    assert actions[0] == -50
    assert elapsed < 5.0


class ReachPolicy(SubgoalPolicy):
    def subgoal_reached(self, obs, subgoal):
        return subgoal == 1


class FailingStepEnv(NullEnv):
    def step(self, action):
        result = super().step(action)
        if self._t == 3:
            return StepResult(result.obs, 0.0, False, False, False, {"failure_signal": True})
        return result


def test_subgoal_reached_and_failure_signal_trigger_replanning():
    reasoner = CountingReasoner()
    agent = DualRateAgent(ReachPolicy(), reasoner)
    Kernel(NullEnv(), agent, max_steps=3).run(TaskInstance("t", "x"))
    assert reasoner.calls[:2] == ["episode_start", "subgoal_reached"]

    reasoner = CountingReasoner()
    agent = DualRateAgent(SubgoalPolicy(), reasoner)
    Kernel(FailingStepEnv(), agent, max_steps=6).run(TaskInstance("t", "x"))
    assert reasoner.calls == ["episode_start", "failure_signal"]


def test_reasoner_failure_is_an_agent_error():
    class Broken:
        def reason(self, obs, trigger, subgoal):
            raise RuntimeError("planner crashed")

    outcome = Kernel(NullEnv(), DualRateAgent(SubgoalPolicy(), Broken()), max_steps=5).run(TaskInstance("t", "x"))
    assert outcome.status == "error"
    assert "planner crashed" in outcome.reason


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="period_steps"):
        DualRateAgent(SubgoalPolicy(), CountingReasoner(), period_steps=0)
    with pytest.raises(ValueError, match="clock"):
        DualRateAgent(SubgoalPolicy(), CountingReasoner(), clock="lunar")
