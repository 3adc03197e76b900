"""The dual-rate agent is deterministic under the virtual clock, even when both halves draw random numbers and the
Reasoner's wall-clock speed varies; it follows the Kernel's clock unless told otherwise."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import numpy as np

from hylo.agents import DualRateAgent
from hylo.core import (
    ActionChunk,
    EpisodeContext,
    EpisodeStatus,
    EventBus,
    Kernel,
    MemoryRecorder,
    Observation,
    RealtimeTiming,
    TaskInstance,
)
from hylo.envs import NullEnv


class RandomPolicy:
    """Acts with its own random draw plus the committed subgoal (so the trace shows both)."""

    def __init__(self) -> None:
        self.seeds: list[int] = []
        self.clocks: list[str] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.seeds.append(ctx.seed)
        self.clocks.append(ctx.clock.value)

    def act(self, obs: Observation, subgoal: Any) -> ActionChunk:
        time.sleep(0.001)  # while the reasoner thinks: its draws and these interleave differently every run
        noise = float(self.ctx.rng.uniform(-0.1, 0.1))
        goal = 0.0 if subgoal is None else float(subgoal)
        action = np.full(7, 0.0, np.float32)
        action[0] = noise
        action[1] = goal
        return ActionChunk([action])


class RandomReasoner:
    """Draws its subgoal from its own generator (in `reset` and in `reason`) and takes a random wall time to do so."""

    def __init__(self, max_sleep_s: float = 0.004, hang_s: float = 0.0) -> None:
        self.max_sleep_s = max_sleep_s
        self.hang_s = hang_s
        self.seeds: list[int] = []
        self.threads: set[str] = set()
        self.calls = 0

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.seeds.append(ctx.seed)
        self.offset = float(ctx.rng.uniform(0.0, 0.1))

    def reason(self, obs: Observation, trigger: str, subgoal: Any) -> float:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(random.uniform(0.0, self.max_sleep_s))  # the machine's speed: must not matter
        if self.hang_s:
            time.sleep(self.hang_s)
        return round(self.offset + float(self.ctx.rng.uniform(-0.8, 0.8)), 6)


def agent(reasoner: RandomReasoner | None = None, **kwargs: Any) -> DualRateAgent:
    return DualRateAgent(
        RandomPolicy(),
        reasoner or RandomReasoner(),
        period_steps=3,
        reasoner_latency_steps=2,
        **kwargs,
    )


def actions_of(seed_index: int, *, steps: int = 20) -> tuple[list[list[float]], DualRateAgent]:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    dual = agent()
    outcome = Kernel(NullEnv(), dual, max_steps=steps, bus=bus).run(TaskInstance("dual", "rate", index=seed_index))
    assert (outcome.status, outcome.reason) == (EpisodeStatus.FAILURE, "max_steps")
    return [list(e.action[:2]) for e in recorder.of("action")], dual


def test_same_seed_gives_the_same_actions_every_time() -> None:
    runs = [actions_of(0) for _ in range(6)]
    first, first_agent = runs[0]
    assert len(first) == 20
    for actions, _ in runs[1:]:
        assert actions == first
    # the reasoner's subgoals actually reach the policy (several commits, several distinct subgoals)
    assert len(first_agent.commits) >= 5
    assert len({c.subgoal for c in first_agent.commits}) >= 5
    assert len({a[1] for a in first}) >= 5


def test_different_seeds_give_different_actions() -> None:
    a, _ = actions_of(0)
    b, _ = actions_of(1)
    assert a != b
    assert [x[0] for x in a] != [x[0] for x in b]  # the policy's draws differ
    assert [x[1] for x in a[3:]] != [x[1] for x in b[3:]]  # and so do the reasoner's


def test_reasoner_has_its_own_seed_derived_from_the_episode() -> None:
    _, first = actions_of(0)
    _, again = actions_of(0)
    _, other = actions_of(1)
    policy, reasoner = first.policy, first.reasoner
    assert isinstance(policy, RandomPolicy) and isinstance(reasoner, RandomReasoner)
    assert policy.seeds == [TaskInstance("dual", "rate", index=0).seed]
    assert reasoner.seeds != policy.seeds
    assert reasoner.seeds == again.reasoner.seeds  # type: ignore[attr-defined]
    assert reasoner.seeds != other.reasoner.seeds  # type: ignore[attr-defined]
    assert reasoner.threads == {"hylo-reasoner"}


def test_a_hung_reasoner_ends_the_episode_as_an_error_naming_the_reasoner_timeout() -> None:
    hung = RandomReasoner(max_sleep_s=0.0, hang_s=0.6)
    dual = agent(hung, reasoner_timeout_s=0.2)
    t0 = time.perf_counter()
    outcome = Kernel(NullEnv(), dual, max_steps=20).run(TaskInstance("dual", "hang"))
    elapsed = time.perf_counter() - t0
    assert outcome.status is EpisodeStatus.ERROR
    assert "reasoner" in outcome.reason and "0.2" in outcome.reason, outcome.reason
    assert outcome.steps == 2  # the first commit was due at step 2 (reasoner_latency_steps)
    assert elapsed < 8.0  # loose: the deadline is 0.2 s


def test_clock_follows_the_kernel_unless_given() -> None:
    # A reasoner far slower than its virtual latency: on the virtual clock the policy waits for it (simulated time
    # does not pass), on the wall clock it never does.
    def first_goals(timing: Any, clock: str | None) -> tuple[list[float], list[str]]:
        slow = RandomReasoner(max_sleep_s=0.0, hang_s=0.3)
        dual = DualRateAgent(RandomPolicy(), slow, reasoner_latency_steps=0, clock=clock)
        bus = EventBus()
        recorder = MemoryRecorder()
        bus.subscribe(recorder)
        kernel = Kernel(NullEnv(), dual, max_steps=5, bus=bus, timing=timing)
        try:
            outcome = kernel.run(TaskInstance("dual", "clock"))
        finally:
            kernel.close()
        assert outcome.reason == "max_steps", outcome.reason
        policy = dual.policy
        assert isinstance(policy, RandomPolicy)
        # what the policy planned with (under the wall clock an executed action may be a hold)
        return [float(e.actions[0][1]) for e in recorder.of("agent.chunk")], policy.clocks

    wall_timing = RealtimeTiming(clock="wall", max_hold_steps=1000)

    goals, clocks = first_goals("sync", None)
    assert clocks == ["virtual"]
    assert goals[0] != 0.0, "on the virtual clock the first plan already uses the committed subgoal"

    goals, clocks = first_goals(wall_timing, None)
    assert clocks == ["wall"]
    assert goals[0] == 0.0, "on the wall clock the policy acted before the slow reasoner answered"

    goals, clocks = first_goals("sync", "wall")  # an explicit clock overrides the Kernel's
    assert clocks == ["virtual"]
    assert goals[0] == 0.0
