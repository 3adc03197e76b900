"""Lifecycle edges of the Kernel: exotic exceptions, slow or failing end-of-episode hooks on the wall clock, closing,
task identity, malformed versus unsafe actions, failing hold actions, and what an isolated agent still gets."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.agents import DualRateAgent
from hylo.core import (
    ActionChunk,
    AgentBase,
    BoundsGuard,
    ContainerSpec,
    EnvCapabilities,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    JsonlRecorder,
    Kernel,
    MemoryRecorder,
    Observation,
    RealtimeTiming,
    RotationGuard,
    SafetyAbort,
    SafetyShield,
    Signal,
    TaskInstance,
    parse_event,
)
from hylo.envs import NullEnv

WALL = RealtimeTiming(clock="wall", max_hold_steps=1000)
FAST = NullEnv(max_episode_steps=5, control_rate_hz=1000.0)  # wall-clock episodes take milliseconds


def task(i: int = 0) -> TaskInstance:
    return TaskInstance("life", "cycle", i)


class Steady(AgentBase):
    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(np.zeros(7, np.float32))


# -- exceptions that are not Exceptions ----------------------------------------------------------------------------


class Cancelled(Steady):
    def __init__(self) -> None:
        self.calls = 0

    def act(self, obs: Observation) -> ActionChunk:
        self.calls += 1
        if self.calls == 1:
            raise asyncio.CancelledError("policy server call cancelled")
        return super().act(obs)


@pytest.mark.parametrize("timing", [None, WALL], ids=["sync", "wall"])
def test_a_cancelled_act_is_an_agent_error_and_the_next_episode_runs(timing: Any) -> None:
    with Kernel(FAST, Cancelled(), timing=timing) as kernel:
        first = kernel.run(task(0))
        second = kernel.run(task(1))
    assert first.status is EpisodeStatus.ERROR
    assert "CancelledError" in first.reason
    assert (second.status, second.reason) == (EpisodeStatus.FAILURE, "max_steps")


# -- the wall clock's end of episode --------------------------------------------------------------------------------


class SlowToFinish(Steady):
    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        time.sleep(0.6)


def test_a_slow_on_episode_end_is_not_an_act_timeout_for_the_next_episode() -> None:
    with Kernel(FAST, SlowToFinish(), timing=WALL, act_timeout_s=0.2) as kernel:
        outcomes = [kernel.run(task(i)) for i in range(2)]
    assert [(o.status, o.reason) for o in outcomes] == [(EpisodeStatus.FAILURE, "max_steps")] * 2


class FailsToFinish(Steady):
    def __init__(self) -> None:
        self.episodes = 0

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.episodes += 1
        if self.episodes == 1:
            raise ValueError("bookkeeping bug in episode 0")


@pytest.mark.parametrize("timing", [None, WALL], ids=["sync", "wall"])
def test_a_failing_on_episode_end_is_noted_on_its_own_episode_only(timing: Any) -> None:
    with Kernel(FAST, FailsToFinish(), timing=timing) as kernel:
        first, second = kernel.run(task(0)), kernel.run(task(1))
    assert (first.status, first.reason) == (EpisodeStatus.FAILURE, "max_steps")
    assert "bookkeeping bug in episode 0" in (first.detail or "")
    assert (second.status, second.reason, second.detail) == (EpisodeStatus.FAILURE, "max_steps", None)


def test_dual_rate_agent_with_a_slow_reasoner_on_the_wall_clock_keeps_its_episodes_valid() -> None:
    class Policy:
        def act(self, obs: Observation, subgoal: Any) -> ActionChunk:
            return ActionChunk.single(np.zeros(7, np.float32))

    class SlowReasoner:
        def reason(self, obs: Observation, trigger: str, subgoal: Any) -> Any:
            time.sleep(0.4)
            return trigger

    agent = DualRateAgent(Policy(), SlowReasoner())
    with Kernel(FAST, agent, timing=WALL, act_timeout_s=0.2) as kernel:
        outcomes = [kernel.run(task(i)) for i in range(3)]
    assert all(o.status is EpisodeStatus.FAILURE and o.reason == "max_steps" for o in outcomes), outcomes


# -- closing ---------------------------------------------------------------------------------------------------------


class Closable(Steady):
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_closed_kernel_refuses_to_run_and_leaves_the_callers_agent_open() -> None:
    agent = Closable()
    kernel = Kernel(FAST, agent, timing=WALL)
    kernel.run(task())
    kernel.close()
    with pytest.raises(RuntimeError, match="closed"):
        kernel.run(task())
    assert not agent.closed


def test_wall_clock_kernels_dropped_without_close_leave_no_thread() -> None:
    before = threading.active_count()
    for _ in range(20):
        Kernel(FAST, Steady(), timing=WALL).run(task())
    gc.collect()
    deadline = time.monotonic() + 2.0
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= before


# -- task identity ---------------------------------------------------------------------------------------------------


class Memory(Steady):
    containers = (ContainerSpec("seen", lifetime="episode", reducer="add"),)

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        self.ctx.containers["seen"].write(1)
        return super().act(obs)


def test_tasks_with_array_params_are_compared_by_content() -> None:
    agent = Memory()
    kernel = Kernel(FAST, agent)
    a = TaskInstance("life", "cycle", 0, params={"goal": np.arange(1000.0)})
    same = TaskInstance("life", "cycle", 0, params={"goal": np.arange(1000.0)})
    moved = np.arange(1000.0)
    moved[500] = -1.0
    other = TaskInstance("life", "cycle", 0, params={"goal": moved})
    assert a.digest == same.digest != other.digest
    assert kernel.run(a).status is EpisodeStatus.FAILURE
    assert kernel.run(same).status is EpisodeStatus.FAILURE
    assert agent.ctx.containers["seen"].read() == 10  # same task: episode memory kept
    assert kernel.run(other).status is EpisodeStatus.FAILURE
    assert agent.ctx.containers["seen"].read() == 5  # moved goal: a new episode


def test_numpy_integers_in_a_task_are_plain_ints_in_the_trace(tmp_path: Path) -> None:
    placed = TaskInstance("life", "cycle", np.int64(3), base_seed=np.int32(7))
    assert type(placed.index) is int and type(placed.base_seed) is int
    bus = EventBus()
    bus.subscribe(JsonlRecorder(tmp_path / "t.jsonl"))
    Kernel(FAST, Steady(), bus=bus).run(placed)
    events = [parse_event(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    (start,) = [e for e in events if e.event == "episode.start"]
    assert start.task["index"] == 3
    assert bus.dropped == 0
    with pytest.raises(ValueError, match="index"):
        TaskInstance("life", "cycle", 1.5)  # type: ignore[arg-type]


# -- malformed versus unsafe ----------------------------------------------------------------------------------------


class Unwrapped(Steady):
    """Forgot ActionChunk: returns a (T, D) plan as one 'action'."""

    def act(self, obs: Observation) -> Any:
        return np.zeros((4, 7), np.float32)


def test_a_malformed_action_is_the_agents_error_not_a_safety_event() -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    outcome = Kernel(FAST, Unwrapped(), bus=bus).run(task())
    assert outcome.status is EpisodeStatus.ERROR
    assert outcome.reason.startswith("agent returned a malformed action")
    assert "shape (4, 7)" in outcome.reason


def test_rotation_guard_never_clips_a_non_finite_rotation() -> None:
    shield = SafetyShield([RotationGuard(3, "euler", 1.0, mode="clip")])
    with pytest.raises(SafetyAbort, match="non-finite"):
        shield.review(np.array([0, 0, 0, np.nan, 0, 0, 0.0]), spaces.Box(-10, 10, (7,)))


class BadHoldEnv(NullEnv):
    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def hold_action(self) -> Any:
        return np.full(7, 5.0, np.float32)  # outside the action space


def test_a_hold_action_the_shield_rejects_is_the_envs_fault() -> None:
    env = BadHoldEnv(max_episode_steps=10)
    shield = SafetyShield([BoundsGuard("reject")])
    outcome = Kernel(env, Steady(), shield=shield, timing=RealtimeTiming(latency_s=1.0)).run(task())
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert outcome.reason.startswith("env hold action failed")


# -- critical recorders ---------------------------------------------------------------------------------------------


class Breaks:
    def __init__(self) -> None:
        self.broken = True

    def __call__(self, event: Any) -> None:
        if self.broken:
            raise OSError("disk full")


def test_a_new_critical_recorder_makes_episodes_valid_again() -> None:
    bus = EventBus()
    bus.subscribe(Breaks(), critical=True)
    kernel = Kernel(FAST, Steady(), bus=bus)
    assert kernel.run(task(0)).status is EpisodeStatus.INFRA_INVALID
    later = kernel.run(task(1))
    assert later.status is EpisodeStatus.INFRA_INVALID
    assert "earlier episode" in later.reason
    recorder = MemoryRecorder()
    bus.subscribe(recorder, critical=True)
    assert kernel.run(task(2)).status is EpisodeStatus.FAILURE
    assert recorder.of("episode.end")


# -- isolation keeps the agent interface ----------------------------------------------------------------------------


class SignalCounter(AgentBase):
    """Counts signals in its own process and reports the count and its clock through the trace."""

    def __init__(self) -> None:
        self.signals: list[str] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        ctx.emit("agent.decision", {"clock": ctx.clock.value, "signals_so_far": list(self.signals)})

    def on_signal(self, signal: Signal) -> None:
        self.signals.append(signal.value)

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(np.zeros(7, np.float32))


def test_an_isolated_agent_hears_signals_and_knows_the_clock() -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    with Kernel(FAST, SignalCounter(), timing=WALL, act_timeout_s=5.0, hard_timeout=True, bus=bus) as kernel:
        kernel.run(task(0))
        kernel.run(task(1))
    decisions = [e.content for e in recorder.of("agent.decision")]
    assert [d["clock"] for d in decisions] == ["wall", "wall"]
    assert decisions[0]["signals_so_far"] == ["episode_reset", "run_start"]
    assert "step_end" in decisions[1]["signals_so_far"] and "run_end" in decisions[1]["signals_so_far"]


class SignalFails(SignalCounter):
    def on_signal(self, signal: Signal) -> None:
        if signal is Signal.STEP_END:
            raise RuntimeError("container bookkeeping failed")


def test_an_isolated_agent_failing_on_a_signal_is_an_error() -> None:
    with Kernel(FAST, SignalFails(), act_timeout_s=5.0, hard_timeout=True) as kernel:
        outcome = kernel.run(task())
    assert outcome.status is EpisodeStatus.ERROR
    assert "container bookkeeping failed" in outcome.reason


class Still(AgentBase):
    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(np.zeros(7, np.float32))


class SettlingEnv(NullEnv):
    """Runs three settle steps of its own in every reset, as a benchmark protocol may."""

    def prologue(self) -> list[Any]:
        return [[0.0] * 6 + [-1.0]] * 3


def test_the_envs_own_settle_steps_are_traced_before_the_first_observation_and_not_counted(tmp_path: Path) -> None:
    bus = EventBus(run_id="settle")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    jsonl = JsonlRecorder(tmp_path / "trace.jsonl")
    bus.subscribe(jsonl)
    with Kernel(SettlingEnv(max_episode_steps=4), Still(), bus=bus, max_steps=4) as kernel:
        outcome = kernel.run(TaskInstance("bench", "settle"))
    jsonl.close()
    assert outcome.steps == 4 and outcome.reason == "max_steps"  # the agent had its whole budget
    kinds = recorder.kinds()
    assert kinds.index("episode.start") < kinds.index("env.prologue") < kinds.index("observation")
    (prologue,) = recorder.of("env.prologue")
    assert prologue.steps == 3 and prologue.actions == [[0.0] * 6 + [-1.0]] * 3
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    assert parse_event(lines[kinds.index("env.prologue")]) == prologue  # written and read back like any event
    with Kernel(NullEnv(max_episode_steps=2), Still(), bus=bus) as plain:
        recorder.events.clear()
        plain.run(TaskInstance("bench", "plain"))
    assert "env.prologue" not in recorder.kinds()  # an env that runs nothing of its own adds nothing
