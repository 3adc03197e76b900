"""Timing modes: sync, realtime on the virtual clock, realtime on the wall clock."""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest
from pydantic import ValidationError

from hylo.core import (
    ActionChunk,
    EnvCapabilities,
    Environment,
    EnvSpec,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    IncompatibleComponents,
    Kernel,
    MemoryRecorder,
    Observation,
    RealtimeTiming,
    StepResult,
    SyncTiming,
    TaskInstance,
)
from hylo.core.agent import MAX_CHUNK
from hylo.core.latency import FixedLatency, LognormalLatency
from hylo.core.timing import (
    CHUNKED_OPTIONS,
    MAX_HORIZON,
    ChunkedTiming,
    Clock,
    RefillTiming,
    Schedule,
    Strategy,
    check_timing_options,
    parse_timing,
    timing_from,
)
from hylo.envs import GridGoal, GridGoalExpert, PointReach, PointReachExpert

HOLD = (-1.0, -1.0)


class TickEnv(Environment):
    """Counts steps; never ends but by the step budget. Actions are 2-D labels, recorded as executed."""

    def __init__(
        self,
        rate_hz: float = 10.0,
        max_episode_steps: int = 100,
        *,
        hold: bool = True,
        self_paced: bool = False,
    ) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0.0, 1e6, (1,), np.float64)}),
            action_space=spaces.Box(-1000.0, 1000.0, (2,), np.float64),
            control_rate_hz=rate_hz,
            max_episode_steps=max_episode_steps,
            name="tick",
        )
        self._caps = EnvCapabilities(hold_action=hold, self_paced=self_paced)
        self.t = 0
        self.executed: list[tuple[float, ...]] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return self._caps

    def _obs(self) -> Observation:
        return Observation(t=np.array([float(self.t)]))

    def reset(self, task: TaskInstance) -> Observation:
        self.t = 0
        self.executed = []
        return self._obs()

    def step(self, action: Any) -> StepResult:
        self.executed.append(tuple(float(x) for x in np.asarray(action)))
        self.t += 1
        return StepResult(self._obs())

    def observe(self) -> Observation:
        return self._obs()

    def hold_action(self) -> Any:
        if not self._caps.hold_action:
            return super().hold_action()
        return np.array(HOLD)


class Labelled:
    """Chunk number c is [(c, 0), (c, 1), ...]: every executed action says which chunk and which index it is."""

    def __init__(self, size: int = 5, execution_steps: int | None = None, sleep_s: float = 0.0) -> None:
        self.size = size
        self.execution_steps = execution_steps
        self.sleep_s = sleep_s
        self.calls = 0
        self.threads: list[int] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.calls = 0
        self.threads = []

    def act(self, obs: Observation) -> ActionChunk:
        self.threads.append(threading.get_ident())
        if self.sleep_s:
            time.sleep(self.sleep_s)
        c = self.calls
        self.calls += 1
        return ActionChunk([np.array([float(c), float(i)]) for i in range(self.size)], self.execution_steps)


class JitteryExpert(PointReachExpert):
    """The expert, with a measured latency that changes from call to call."""

    def act(self, obs: Observation) -> ActionChunk:
        time.sleep(random.uniform(0.0, 0.004))
        return super().act(obs)


class Blocking:
    """An act that does not return until released (or 5 s pass)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def act(self, obs: Observation) -> ActionChunk:
        self.release.wait(5.0)
        return ActionChunk([np.zeros(2)])


class RaisingInThread:
    def act(self, obs: Observation) -> ActionChunk:
        raise ValueError("policy exploded")


def run(
    env: Environment, agent: Any, task: TaskInstance | None = None, **kernel_args: Any
) -> tuple[EpisodeOutcome, MemoryRecorder]:
    bus = EventBus(run_id="timing")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    kernel = Kernel(env, agent, bus=bus, **kernel_args)
    try:
        outcome = kernel.run(task or TaskInstance("tick", "count"))
    finally:
        kernel.close()
    return outcome, recorder


def executed(recorder: MemoryRecorder) -> list[tuple[tuple[float, ...], bool]]:
    """(action, hold) of every `action` event."""
    return [(tuple(e.action), e.hold) for e in recorder.of("action")]


def without_realtime(outcome: EpisodeOutcome) -> EpisodeOutcome:
    """The outcome less its realtime figures: what a sync run of the same episode gives."""
    return dataclasses.replace(outcome, metrics={k: v for k, v in outcome.metrics.items() if k != "realtime"})


def exact(outcome: EpisodeOutcome) -> EpisodeOutcome:
    """The outcome less the measured call times (wall time, which no run repeats): what a repeated run must match."""
    realtime = {k: v for k, v in outcome.metrics["realtime"].items() if k != "latency_s"}
    return dataclasses.replace(outcome, metrics={**outcome.metrics, "realtime": realtime})


def reach_task(index: int) -> TaskInstance:
    return TaskInstance("point_reach", "reach", index=index)


# -- realtime with no latency is sync -------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 1, 2])
def test_zero_latency_realtime_matches_sync_on_point_reach(index: int) -> None:
    task = reach_task(index)
    sync_out, sync_rec = run(PointReach(), PointReachExpert(chunk=5), task)
    rt_out, rt_rec = run(
        PointReach(),
        PointReachExpert(chunk=5),
        task,
        timing=RealtimeTiming(refill_steps=0, latency_s=0.0),
    )
    assert sync_out.status is EpisodeStatus.SUCCESS
    realtime = rt_out.metrics["realtime"]
    assert (realtime["holds"], realtime["dropped"], realtime["executed"]) == (0, 0, sync_out.steps)
    assert without_realtime(rt_out) == sync_out
    assert executed(rt_rec) == executed(sync_rec)
    assert not any(hold for _, hold in executed(rt_rec))
    assert [e.dropped for e in rt_rec.of("agent.chunk")] == [0] * len(sync_rec.of("agent.chunk"))
    assert [e.requested_at for e in rt_rec.of("agent.chunk")] == [e.requested_at for e in sync_rec.of("agent.chunk")]
    assert [e.actions for e in rt_rec.of("agent.chunk")] == [e.actions for e in sync_rec.of("agent.chunk")]


@pytest.mark.parametrize("execution_steps", [None, 3])
def test_zero_latency_realtime_matches_sync_with_labelled_actions(execution_steps: int | None) -> None:
    sync_env, rt_env = TickEnv(max_episode_steps=12), TickEnv(max_episode_steps=12)
    sync_out, sync_rec = run(sync_env, Labelled(5, execution_steps), timing=SyncTiming())
    rt_out, rt_rec = run(rt_env, Labelled(5, execution_steps), timing=RealtimeTiming(refill_steps=0, latency_s=0))
    per_chunk = execution_steps or 5
    expected = [(float(s // per_chunk), float(s % per_chunk)) for s in range(12)]
    assert sync_env.executed == expected
    assert rt_env.executed == expected
    assert executed(rt_rec) == executed(sync_rec)
    assert without_realtime(rt_out) == sync_out
    assert (rt_out.status, rt_out.reason, rt_out.steps) == (EpisodeStatus.FAILURE, "max_steps", 12)


# -- the virtual clock is deterministic -----------------------------------------------------------------------------


def test_virtual_clock_with_fixed_latency_repeats_exactly() -> None:
    timing = RealtimeTiming(refill_steps=1, latency_s=0.2, max_hold_steps=5)
    task = reach_task(3)
    runs = [run(PointReach(), JitteryExpert(chunk=5), task, timing=timing) for _ in range(2)]
    (out_a, rec_a), (out_b, rec_b) = runs
    assert executed(rec_a) == executed(rec_b)
    assert [(e.requested_at, e.dropped, e.actions) for e in rec_a.of("agent.chunk")] == [
        (e.requested_at, e.dropped, e.actions) for e in rec_b.of("agent.chunk")
    ]
    assert exact(out_a) == exact(out_b)
    # a latency of 2 steps: the first two steps are holds, then every merged chunk lost its first two actions
    assert [hold for _, hold in executed(rec_a)[:3]] == [True, True, False]
    assert all(e.dropped == 2 for e in rec_a.of("agent.chunk"))


def test_virtual_clock_same_kernel_twice_repeats_exactly() -> None:
    env = TickEnv(max_episode_steps=30)
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    kernel = Kernel(env, Labelled(4, sleep_s=0.001), timing=RealtimeTiming(refill_steps=2, latency_s=0.25), bus=bus)
    first = kernel.run(TaskInstance("tick", "count"))
    first_actions, recorder.events = executed(recorder), []
    first_executed = list(env.executed)
    second = kernel.run(TaskInstance("tick", "count"))
    assert executed(recorder) == first_actions
    assert env.executed == first_executed
    assert exact(first) == exact(second)


# -- a fixed latency drops the stale head of each chunk -------------------------------------------------------------


def test_fixed_latency_drops_first_actions_and_holds_while_pending() -> None:
    env = TickEnv(rate_hz=10.0, max_episode_steps=20)
    dt = env.spec.dt
    agent = Labelled(5)
    timing = RealtimeTiming(refill_steps=0, latency_s=3 * dt, max_hold_steps=10, adaptive_refill=False)
    outcome, rec = run(env, agent, timing=timing)

    # Each chunk is requested when the queue is empty, arrives 3 steps later (3 holds meanwhile), loses its first
    # 3 actions (they belong to the past) and executes the remaining 2.
    expected: list[tuple[tuple[float, ...], bool]] = []
    for c in range(4):
        expected += [(HOLD, True)] * 3
        expected += [((float(c), 3.0), False), ((float(c), 4.0), False)]
    assert executed(rec) == expected
    assert env.executed == [action for action, _ in expected]
    assert [e.step for e in rec.of("action")] == list(range(20))

    chunks = rec.of("agent.chunk")
    assert len(chunks) == 4 == agent.calls
    assert [e.dropped for e in chunks] == [3, 3, 3, 3]
    assert [e.requested_at for e in chunks] == [0, 5, 10, 15]
    assert [e.size for e in chunks] == [5] * 4
    # the chunk is merged at step requested_at + 3 (sim_time is stamped with the steps done so far)
    assert [round(e.sim_time / dt) for e in chunks] == [3, 8, 13, 18]
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 20)


def test_fixed_latency_with_early_refill_has_no_holds_after_the_first_chunk() -> None:
    env = TickEnv(rate_hz=50.0, max_episode_steps=16)
    dt = env.spec.dt
    outcome, rec = run(env, Labelled(8), timing=RealtimeTiming(refill_steps=3, latency_s=3 * dt, max_hold_steps=5))
    # request when 3 actions remain: the next chunk lands exactly as the queue runs dry, minus its 3 stale actions
    expected = [(HOLD, True)] * 3
    expected += [((0.0, float(i)), False) for i in range(3, 8)]
    expected += [((1.0, float(i)), False) for i in range(3, 8)]
    expected += [((2.0, float(i)), False) for i in range(3, 6)]
    assert executed(rec) == expected
    chunks = rec.of("agent.chunk")
    assert [e.dropped for e in chunks] == [3, 3, 3]
    assert [e.requested_at for e in chunks] == [0, 5, 10]
    assert outcome.reason == "max_steps"


def test_fixed_latency_longer_than_the_chunk_drops_it_all_but_never_executes_a_stale_action() -> None:
    env = TickEnv(rate_hz=10.0, max_episode_steps=12)
    outcome, rec = run(env, Labelled(2), timing=RealtimeTiming(refill_steps=0, latency_s=0.4, max_hold_steps=50))
    chunks = rec.of("agent.chunk")
    assert chunks and all(e.dropped == 2 for e in chunks)
    assert all(hold for _, hold in executed(rec))
    assert outcome.reason == "max_steps"


def test_measured_latency_is_charged_in_steps_and_traced() -> None:
    env = TickEnv(rate_hz=100.0, max_episode_steps=30)
    dt = env.spec.dt
    outcome, rec = run(env, Labelled(8, sleep_s=0.03), timing=RealtimeTiming(refill_steps=0, max_hold_steps=50))
    chunks = rec.of("agent.chunk")
    assert chunks
    for chunk in chunks:
        merged_at = round(chunk.sim_time / dt)
        assert merged_at - chunk.requested_at >= 3  # act took >= 30 ms = 3 control steps of the virtual clock
        assert chunk.dropped == min(merged_at - chunk.requested_at, chunk.execution_steps)
        assert chunk.latency_s >= 0.03  # the trace shows the latency that was measured
    assert [hold for _, hold in executed(rec)[:3]] == [True] * 3
    assert outcome.reason == "max_steps"


# -- the watchdog ---------------------------------------------------------------------------------------------------


def test_watchdog_ends_the_episode_after_max_hold_steps_holds() -> None:
    env = TickEnv(max_episode_steps=50)
    outcome, rec = run(env, Labelled(5), timing=RealtimeTiming(latency_s=1000.0, max_hold_steps=4))
    assert outcome.status is EpisodeStatus.FAILURE
    assert outcome.reason == "watchdog"
    assert not outcome.success
    assert outcome.steps == 4
    assert executed(rec) == [(HOLD, True)] * 4
    assert env.executed == [HOLD] * 4
    end = rec.of("episode.end")[-1]
    assert (end.status, end.reason) == ("failure", "watchdog")


def test_watchdog_counts_consecutive_holds_only() -> None:
    env = TickEnv(max_episode_steps=20)
    dt = env.spec.dt
    # exactly 3 holds before each merge: a watchdog at 3 never fires, one at 2 does
    ok, _ = run(env, Labelled(5), timing=RealtimeTiming(latency_s=3 * dt, max_hold_steps=3))
    assert (ok.status, ok.reason, ok.steps) == (EpisodeStatus.FAILURE, "max_steps", 20)
    tripped, rec = run(env, Labelled(5), timing=RealtimeTiming(latency_s=3 * dt, max_hold_steps=2))
    assert (tripped.status, tripped.reason, tripped.steps) == (EpisodeStatus.FAILURE, "watchdog", 2)
    assert executed(rec) == [(HOLD, True)] * 2


def test_watchdog_with_measured_latency() -> None:
    env = TickEnv(rate_hz=500.0, max_episode_steps=200)
    outcome, rec = run(env, Labelled(5, sleep_s=0.05), timing=RealtimeTiming(max_hold_steps=5))
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "watchdog", 5)
    assert all(hold for _, hold in executed(rec))


# -- bind time ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timing", ["realtime", RealtimeTiming(), RealtimeTiming(clock="wall"), RealtimeTiming(latency_s=0.0)]
)
def test_realtime_needs_an_env_with_a_hold_action(timing: Any) -> None:
    with pytest.raises(IncompatibleComponents):
        Kernel(GridGoal(), GridGoalExpert(), timing=timing)
    with pytest.raises(IncompatibleComponents):
        Kernel(TickEnv(hold=False), Labelled(), timing=timing)


def test_sync_needs_no_hold_action() -> None:
    Kernel(GridGoal(), GridGoalExpert(), timing="sync")
    Kernel(TickEnv(hold=False), Labelled(), timing=SyncTiming())


# -- the wall clock -------------------------------------------------------------------------------------------------


def test_wall_clock_runs_act_in_a_worker_thread_and_paces_the_loop() -> None:
    rate, n = 50.0, 15
    env = TickEnv(rate_hz=rate, max_episode_steps=n)
    agent = Labelled(4)
    t0 = time.perf_counter()
    outcome, rec = run(env, agent, timing=RealtimeTiming(clock="wall", max_hold_steps=1000))
    elapsed = time.perf_counter() - t0
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", n)
    assert elapsed >= 0.9 * n / rate  # paced at the control rate (no upper bound: machines are slow sometimes)
    assert agent.threads and threading.main_thread().ident not in agent.threads
    assert threading.get_ident() not in agent.threads
    assert len(env.executed) == n
    assert any(not hold for _, hold in executed(rec))
    dt = env.spec.dt
    for chunk in rec.of("agent.chunk"):
        merged_at = round(chunk.sim_time / dt)
        assert chunk.dropped == min(merged_at - chunk.requested_at, chunk.execution_steps)


def test_wall_clock_does_not_sleep_for_a_self_paced_env() -> None:
    rate, n = 2.0, 10  # paced, this would take 5 s
    env = TickEnv(rate_hz=rate, max_episode_steps=n, self_paced=True)
    t0 = time.perf_counter()
    outcome, _ = run(env, Labelled(4), timing=RealtimeTiming(clock="wall", max_hold_steps=1000))
    elapsed = time.perf_counter() - t0
    assert outcome.steps == n
    assert outcome.reason == "max_steps"
    assert elapsed < 0.5 * n / rate


def test_wall_clock_act_timeout_is_an_error() -> None:
    agent = Blocking()
    env = TickEnv(rate_hz=50.0, max_episode_steps=500)
    try:
        t0 = time.perf_counter()
        outcome, rec = run(env, agent, timing=RealtimeTiming(clock="wall", max_hold_steps=1000), act_timeout_s=0.2)
        elapsed = time.perf_counter() - t0
    finally:
        agent.release.set()
    assert outcome.status is EpisodeStatus.ERROR
    assert outcome.reason == "timeout"
    assert not outcome.success
    assert elapsed < 3.0
    assert rec.of("episode.end")[-1].reason == "timeout"


def test_wall_clock_agent_raising_in_its_thread_is_an_error() -> None:
    env = TickEnv(rate_hz=100.0, max_episode_steps=200)
    outcome, _ = run(env, RaisingInThread(), timing=RealtimeTiming(clock="wall", max_hold_steps=1000))
    assert outcome.status is EpisodeStatus.ERROR
    assert "ValueError" in outcome.reason


def test_adaptive_refill_requests_early_enough_that_a_steady_policy_never_starves() -> None:
    env = TickEnv(rate_hz=10.0, max_episode_steps=30)
    dt = env.spec.dt
    # A latency of 3 steps and chunks of 6: after the first request (3 holds), each request goes out when 3 actions
    # remain, so the next chunk lands exactly when the queue runs dry.
    outcome, rec = run(env, Labelled(6), timing=RealtimeTiming(refill_steps=0, latency_s=3 * dt, max_hold_steps=5))
    holds = [hold for _, hold in executed(rec)]
    assert holds[:3] == [True, True, True]
    assert not any(holds[3:])
    assert outcome.reason == "max_steps"
    assert all(e.dropped == 3 for e in rec.of("agent.chunk"))


# -- the timing union -----------------------------------------------------------------------------------------------


def test_realtime_timing_makes_the_member_its_schedule_names() -> None:
    refill, chunked = RealtimeTiming(refill_steps=2, latency_s=0.1), RealtimeTiming(schedule="chunked")
    assert type(refill) is RefillTiming and type(chunked) is ChunkedTiming
    assert isinstance(refill, RealtimeTiming) and isinstance(chunked, RealtimeTiming)
    assert (refill.adaptive_refill, chunked.adaptive_refill) == (True, False)  # each schedule's default
    assert refill == RefillTiming(refill_steps=2, latency_s=0.1) and refill.model == FixedLatency(seconds=0.1)
    assert (chunked.schedule, chunked.clock, chunked.strategy) == (Schedule.CHUNKED, Clock.VIRTUAL, Strategy.NAIVE)
    assert RealtimeTiming(adaptive_refill=None).adaptive_refill is True
    assert chunked.model is None and RealtimeTiming(latency_steps=2).model == FixedLatency(steps=2)
    with pytest.raises(ValidationError, match="frozen"):
        refill.refill_steps = 3  # type: ignore[misc]


def test_timing_from_builds_the_member_a_spec_names() -> None:
    assert timing_from("sync", {}) == SyncTiming()
    assert type(timing_from("realtime", {})) is RefillTiming
    chunked = timing_from("realtime", {**CHUNKED_OPTIONS, "latency_steps": 2, "execution_steps": 4})
    assert isinstance(chunked, ChunkedTiming) and chunked.nominal_latency_steps(0.1) == 2
    lognormal = timing_from("realtime", {"latency_model": {"kind": "lognormal", "median_s": 0.05, "sigma": 0.2}})
    assert lognormal.model == LognormalLatency(0.05, 0.2)  # type: ignore[union-attr]
    for timing, options, reason in [
        ("sync", {"latency_s": 0.1}, r"timing options \['latency_s'\] need --timing realtime"),
        ("fast", {}, "unknown timing 'fast'"),
        ("realtime", {"warp": 1}, r"unknown timing options \['warp'\]; choose from \['refill_steps'"),
        ("realtime", {"clock": "sundial"}, r"unknown clock 'sundial'; choose one of \['virtual', 'wall'\]"),
        ("realtime", {"ensemble_m": -1}, r"ensemble_m must be a finite number in \[0, 100\], got -1"),
        ("realtime", {"latency_s": math.inf}, "latency_s must be a finite number of seconds"),
        ("realtime", {"adaptive_refill": "yes"}, "adaptive_refill must be true or false, got 'yes'"),
        ("realtime", {"max_hold_steps": 0}, "max_hold_steps must be an int >= 1"),
    ]:
        with pytest.raises(ValueError, match=reason) as info:
            timing_from(timing, options)
        assert "\n" not in str(info.value)  # one line: a refusal as the command line prints it


def test_options_on_their_own_are_checked_without_a_schedule() -> None:
    check_timing_options({"schedule": "chunked", "refill_steps": 2})  # a protocol or --timing completes them
    with pytest.raises(ValueError, match=r"give one latency, got \['latency_s', 'latency_model'\]"):
        check_timing_options({"latency_s": 0.1, "latency_model": {"kind": "empirical", "samples_s": [0.1]}})
    with pytest.raises(ValueError, match="a latency sample must be a finite number of seconds in"):
        check_timing_options({"latency_model": {"kind": "empirical", "samples_s": [0.1, 1e9]}})


def test_the_timing_bounds_are_the_chunk_bound() -> None:
    assert MAX_HORIZON == MAX_CHUNK
    assert parse_timing("realtime") == RefillTiming() and parse_timing(None) == SyncTiming()
    with pytest.raises(ValueError, match="unknown timing 'fast'"):
        parse_timing("fast")
