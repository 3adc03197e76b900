"""The wall clock: the agent's calls run on one worker thread, in order, never beside each other; `run`
waits for them; a hung `act` costs its episode (and the next, while still hung) but never the run."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    EnvCapabilities,
    Environment,
    EnvSpec,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    JsonlRecorder,
    Kernel,
    MemoryRecorder,
    Observation,
    ProcessAgent,
    RealtimeTiming,
    Signal,
    StepResult,
    TaskInstance,
    parse_event,
)

WALL = RealtimeTiming(clock="wall", max_hold_steps=1000)
TASK = TaskInstance("wall", "clock")


class TickEnv(Environment):
    """Counts steps; never ends but by the step budget (or success at `success_at`). 100 Hz, with a hold action."""

    def __init__(self, rate_hz: float = 100.0, max_episode_steps: int = 100, success_at: int | None = None) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0.0, 1e6, (1,), np.float64)}),
            action_space=spaces.Box(-1000.0, 1000.0, (2,), np.float64),
            control_rate_hz=rate_hz,
            max_episode_steps=max_episode_steps,
            name="tick",
        )
        self.success_at = success_at
        self.t = 0
        self.resets = 0

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        self.resets += 1
        self.t = 0
        return self.observe()

    def step(self, action: Any) -> StepResult:
        self.t += 1
        return StepResult(self.observe(), 0.0, False, False, self.t == self.success_at)

    def observe(self) -> Observation:
        return Observation(t=np.array([float(self.t)]))

    def hold_action(self) -> Any:
        return np.array([-1.0, -1.0])


class Watchful:
    """Records, lock-free, whether on_step or a signal ever ran while act was running, and on which threads each
    callback ran."""

    def __init__(self, act_sleep_s: float = 0.005, chunk: int = 3) -> None:
        self.act_sleep_s = act_sleep_s
        self.chunk = chunk
        self.in_act = False
        self.overlaps: list[str] = []
        self.threads: dict[str, set[str]] = {}
        self.counts: dict[str, int] = {}
        self.acts_exited = 0
        self.outcomes: list[EpisodeOutcome] = []

    def _enter(self, name: str) -> None:
        self.threads.setdefault(name, set()).add(threading.current_thread().name)
        self.counts[name] = self.counts.get(name, 0) + 1
        if self.in_act:
            self.overlaps.append(name)

    def reset(self, ctx: EpisodeContext) -> None:
        self._enter("reset")
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        self._enter("act")
        self.in_act = True
        try:
            time.sleep(self.act_sleep_s)
            return ActionChunk([np.zeros(2)] * self.chunk)
        finally:
            self.in_act = False
            self.acts_exited += 1

    def on_step(self, result: StepResult) -> None:
        self._enter("on_step")

    def on_signal(self, signal: Signal) -> None:
        self._enter(f"on_signal:{signal.value}")

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self._enter("on_episode_end")
        self.outcomes.append(outcome)


def make_kernel(env: Environment, agent: Any, **kwargs: Any) -> tuple[Kernel, MemoryRecorder]:
    bus = EventBus(run_id="wall")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    return Kernel(env, agent, bus=bus, timing=kwargs.pop("timing", WALL), **kwargs), recorder


# -- one agent thread, no overlap --------------------------------------------------------------------------------------


def test_act_never_overlaps_on_step_or_signals() -> None:
    agent = Watchful(act_sleep_s=0.005, chunk=3)
    kernel, _ = make_kernel(TickEnv(max_episode_steps=40), agent)
    try:
        outcomes = [kernel.run(TASK) for _ in range(2)]
    finally:
        kernel.close()
    assert [(o.status, o.reason, o.steps) for o in outcomes] == [(EpisodeStatus.FAILURE, "max_steps", 40)] * 2
    assert agent.counts["act"] >= 4
    assert agent.counts["on_step"] == 80
    assert agent.counts["on_signal:step_start"] == 80
    assert agent.overlaps == []


def test_every_agent_callback_runs_on_the_agent_thread() -> None:
    agent = Watchful(act_sleep_s=0.002)
    kernel, _ = make_kernel(TickEnv(max_episode_steps=20), agent)
    try:
        kernel.run(TASK)
        kernel.run(TASK)
    finally:
        kernel.close()
    assert {"reset", "act", "on_step", "on_episode_end", "on_signal:run_start", "on_signal:step_end"} <= set(
        agent.threads
    )
    # one thread, the agent's, for every callback (the test thread is never one of them)
    assert {name: threads for name, threads in agent.threads.items() if threads != {"hylo-agent"}} == {}


# -- run waits for the agent -------------------------------------------------------------------------------------------


def test_run_returns_only_after_the_in_flight_act_finished() -> None:
    class SlowSecondAct(Watchful):
        def act(self, obs: Observation) -> ActionChunk:
            if self.counts.get("act", 0) == 1:
                self.act_sleep_s = 0.3  # still thinking when the env reports success
            return super().act(obs)

    agent = SlowSecondAct(act_sleep_s=0.0, chunk=3)
    env = TickEnv(max_episode_steps=100, success_at=6)
    kernel, _ = make_kernel(env, agent)
    try:
        outcome = kernel.run(TASK)
        acts_exited = agent.acts_exited
        acts_entered = agent.counts["act"]
        in_act = agent.in_act
    finally:
        kernel.close()
    assert (outcome.status, outcome.steps) == (EpisodeStatus.SUCCESS, 6)
    assert acts_entered == 2, "the second act was in flight when the episode ended"
    assert acts_exited == acts_entered
    assert not in_act
    assert [o.status for o in agent.outcomes] == [EpisodeStatus.SUCCESS]


def test_no_agent_callback_runs_after_run_returns() -> None:
    class SlowRunEnd(Watchful):
        def __init__(self) -> None:
            super().__init__(act_sleep_s=0.0)
            self.run_end_done = 0

        def on_signal(self, signal: Signal) -> None:
            super().on_signal(signal)
            if signal is Signal.RUN_END:
                time.sleep(0.2)
                self.run_end_done += 1

    agent = SlowRunEnd()
    kernel, _ = make_kernel(TickEnv(max_episode_steps=5), agent)
    try:
        outcome = kernel.run(TASK)
        run_end_done = agent.run_end_done
        on_end = agent.counts.get("on_episode_end", 0)
    finally:
        kernel.close()
    assert outcome.reason == "max_steps"
    assert on_end == 1
    assert run_end_done == 1, "run returned while the agent was still handling run_end"


class RunEndRaiser:
    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk([np.zeros(2)])

    def on_signal(self, signal: Signal) -> None:
        if signal is Signal.RUN_END:
            raise RuntimeError("run_end handler broke")


@pytest.mark.parametrize("timing", ["sync", "wall"])
def test_a_failing_run_end_handler_is_noted_on_its_own_episode_not_charged_to_the_next(timing: str) -> None:
    kernel, _ = make_kernel(TickEnv(max_episode_steps=5), RunEndRaiser(), timing=WALL if timing == "wall" else "sync")
    try:
        first = kernel.run(TASK)
        second = kernel.run(TASK)
    finally:
        kernel.close()
    # a signal after the verdict cannot change the verdict, only add to its detail
    for outcome in (first, second):
        assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 5)
        assert outcome.detail is not None and "on_signal" in outcome.detail


# -- a hung act --------------------------------------------------------------------------------------------------------


class HangsOnce(Watchful):
    """Its first act blocks until released (at most 5 s)."""

    def __init__(self) -> None:
        super().__init__(act_sleep_s=0.0)
        self.release = threading.Event()

    def act(self, obs: Observation) -> ActionChunk:
        if self.counts.get("act", 0) == 0:
            self._enter("act")
            self.release.wait(5.0)
            self.acts_exited += 1
            return ActionChunk([np.zeros(2)])
        return super().act(obs)


def test_hung_act_costs_its_episode_and_the_next_while_still_hung_then_the_run_recovers() -> None:
    agent = HangsOnce()
    env = TickEnv(max_episode_steps=200)  # 2 s of budget: the deadline comes first
    kernel, recorder = make_kernel(env, agent, act_timeout_s=0.2)
    try:
        t0 = time.perf_counter()
        hung = kernel.run(TASK)
        still_hung = kernel.run(TaskInstance("wall", "clock", index=1))
        elapsed = time.perf_counter() - t0
        resets_while_hung = env.resets
        agent.release.set()
        env.success_at = 10
        recovered = kernel.run(TaskInstance("wall", "clock", index=2))
        again = kernel.run(TaskInstance("wall", "clock", index=3))
    finally:
        agent.release.set()
        kernel.close()

    assert (hung.status, hung.reason) == (EpisodeStatus.ERROR, "timeout")
    assert (still_hung.status, still_hung.reason) == (EpisodeStatus.ERROR, "timeout")
    assert still_hung.steps == 0
    assert still_hung.detail is not None and "previous episode" in still_hung.detail
    assert resets_while_hung == 1, "the env is not reset for an episode the agent cannot take part in"
    assert elapsed < 4.0  # two deadlines of 0.2 s and their grace waits; loose
    assert (recovered.status, recovered.reason, recovered.steps) == (EpisodeStatus.SUCCESS, "success", 10)
    assert (again.status, again.reason, again.steps) == (EpisodeStatus.SUCCESS, "success", 10)
    assert env.resets == 3
    ends = recorder.of("episode.end")
    assert [(e.status, e.reason) for e in ends] == [
        ("error", "timeout"),
        ("error", "timeout"),
        ("success", "success"),
        ("success", "success"),
    ]
    # the agent heard every verdict, in order, once it was free to
    assert [o.reason for o in agent.outcomes] == ["timeout", "timeout", "success", "success"]
    assert agent.overlaps == []


# -- hard timeout with the wall clock ----------------------------------------------------------------------------------


class PlainAgent:
    """Module level: pickled to the isolated agent's process."""

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        self.ctx.emit("agent.decision", {"t": float(obs["t"][0])})
        return ActionChunk([np.zeros(2)] * 4)

    def on_step(self, result: StepResult) -> None:
        return None


def test_hard_timeout_with_the_wall_clock_runs_a_normal_agent_to_the_step_budget() -> None:
    kernel, recorder = make_kernel(TickEnv(max_episode_steps=30), PlainAgent(), act_timeout_s=5.0, hard_timeout=True)
    try:
        assert isinstance(kernel.agent, ProcessAgent)
        outcomes = [kernel.run(TaskInstance("wall", "clock", index=i)) for i in range(2)]
        restarts = kernel.agent.restarts
    finally:
        kernel.close()
    assert [(o.status, o.reason, o.steps) for o in outcomes] == [(EpisodeStatus.FAILURE, "max_steps", 30)] * 2
    assert all(o.detail is None for o in outcomes), [o.detail for o in outcomes]
    assert restarts == 0
    assert recorder.of("agent.decision")


# -- trace sequence numbers under concurrent emitters ------------------------------------------------------------------


class Chatty:
    """Emits agent events from the worker thread in every callback it has."""

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        ctx.emit("memory.retrieval", {"episode": ctx.episode_id})

    def act(self, obs: Observation) -> ActionChunk:
        for i in range(5):
            self.ctx.emit("agent.decision", {"i": i})
        time.sleep(0.001)
        return ActionChunk([np.zeros(2)] * 2)

    def on_step(self, result: StepResult) -> None:
        self.ctx.emit("memory.write", {"t": float(result.obs["t"][0])})

    def on_signal(self, signal: Signal) -> None:
        return None


@pytest.mark.parametrize("json_only", [False, True], ids=["typed", "json_only"])
def test_trace_seq_is_unique_and_increasing_per_episode_with_agent_events_from_the_worker(
    tmp_path: Path, json_only: bool
) -> None:
    path = tmp_path / "trace.jsonl"
    bus = EventBus(run_id="seq")
    jsonl = JsonlRecorder(path)
    bus.subscribe(jsonl)
    recorder = MemoryRecorder()
    if not json_only:
        bus.subscribe(recorder)
    kernel = Kernel(TickEnv(max_episode_steps=30), Chatty(), bus=bus, timing=WALL)
    try:
        outcomes = [kernel.run(TaskInstance("wall", "seq", index=i)) for i in range(2)]
    finally:
        kernel.close()
        jsonl.close()
    assert all(o.reason == "max_steps" for o in outcomes)
    assert bus.dropped == 0
    assert not bus.detached

    events = [parse_event(line) for line in path.read_bytes().splitlines()]
    assert events
    if not json_only:
        assert [e.model_dump() for e in recorder.events] == [e.model_dump() for e in events]
    by_episode: dict[str, list[int]] = {}
    for event in events:
        by_episode.setdefault(event.episode_id, []).append(event.seq)
    assert len(by_episode) == 2
    for seqs in by_episode.values():
        assert seqs == list(range(len(seqs))), "seq must be unique and strictly increasing, in file order"
    kinds = {e.event for e in events}
    assert {"agent.decision", "memory.write", "memory.retrieval", "step.result"} <= kinds
