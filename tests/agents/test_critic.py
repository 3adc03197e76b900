import numpy as np

from hylo.agents import CriticAgent, ProgressCritic
from hylo.core import ActionChunk, EventBus, Kernel, MemoryRecorder, TaskInstance
from hylo.envs import NullEnv, PointReach, PointReachExpert


class Forward:
    def act(self, obs):
        return ActionChunk([np.full(7, 0.1, np.float32)])


class SuggestOnce:
    name = "suggest_once"

    def __init__(self, recovery):
        self.recovery = recovery
        self.used = False

    def suggest(self, obs, plan):
        if self.used:
            return None
        self.used = True
        return ActionChunk([self.recovery])


def test_critic_recovery_still_passes_the_shield_and_is_clipped():
    agent = CriticAgent(Forward(), SuggestOnce(np.full(7, 5.0, np.float32)))
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    outcome = Kernel(NullEnv(), agent, max_steps=3, bus=bus).run(TaskInstance("t", "x"))
    assert outcome.status == "failure"
    assert outcome.safety_interventions == 1
    assert np.allclose(recorder.of("action")[0].action, 1.0)
    assert agent.recoveries == 1
    assert recorder.of("agent.decision")[0].content["critic"] == "suggest_once"


def test_critic_nan_recovery_is_a_safety_abort():
    agent = CriticAgent(Forward(), SuggestOnce(np.full(7, np.nan, np.float32)))
    outcome = Kernel(NullEnv(), agent, max_steps=3).run(TaskInstance("t", "x"))
    assert outcome.status == "safety_abort"
    assert outcome.reason.startswith("finite")


class Stuck:
    """Pushes into the wall: never makes progress."""

    def act(self, obs):
        return ActionChunk([np.array([1.0, 1.0], np.float32)])


def test_progress_critic_backs_off_a_stuck_policy():
    critic = ProgressCritic(window=5, backoff_steps=2)
    agent = CriticAgent(Stuck(), critic)
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    Kernel(PointReach(), agent, max_steps=30, bus=bus).run(TaskInstance("builtin", "point_reach", 1))
    assert agent.recoveries >= 1
    backoffs = [e for e in recorder.of("action") if np.allclose(e.action, [-1.0, -1.0])]
    assert len(backoffs) >= 2


def test_progress_critic_stays_silent_while_the_expert_progresses():
    agent = CriticAgent(PointReachExpert(), ProgressCritic(window=3))
    outcome = Kernel(PointReach(), agent).run(TaskInstance("builtin", "point_reach", 2))
    assert outcome.success
    assert agent.recoveries == 0


def test_a_critic_passes_on_what_its_policy_declares_or_the_contracts_defaults():
    from hylo.agents import TemporalEnsemble
    from hylo.core.agent import AgentRequirements
    from hylo.core.signals import ContainerSpec

    class Declaring(Forward):
        requirements = AgentRequirements(needs_images=False)
        containers = [ContainerSpec("memory")]

    for wrap in (lambda inner: CriticAgent(inner, ProgressCritic()), TemporalEnsemble):
        plain, declaring = wrap(Forward()), wrap(Declaring())
        assert (plain.requirements, plain.containers) == (None, ())
        assert declaring.requirements is Declaring.requirements
        assert declaring.containers == (ContainerSpec("memory"),)
