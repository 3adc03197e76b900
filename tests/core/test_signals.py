"""Lifecycle signals and state containers: each lifetime is cleared by its own signal, and only by it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    AgentBase,
    ContainerSet,
    ContainerSpec,
    EpisodeContext,
    EpisodeStatus,
    EventBus,
    Kernel,
    Lifetime,
    MemoryRecorder,
    Observation,
    Reducer,
    Signal,
    StateContainer,
    StepResult,
    TaskInstance,
)
from hylo.envs import NullEnv

CLEARED_BY = {"run": "run_start", "episode": "episode_reset", "step": "step_end"}


# -- ContainerSpec --------------------------------------------------------------------------------------------------


def test_spec_defaults_and_string_values() -> None:
    spec = ContainerSpec("memory", lifetime="run", reducer="append", max_size=3)
    assert spec.lifetime is Lifetime.RUN
    assert spec.reducer is Reducer.APPEND
    assert spec.max_size == 3
    default = ContainerSpec("x")
    assert default.lifetime is Lifetime.EPISODE
    assert default.reducer is Reducer.LAST


def test_spec_bad_lifetime_is_named() -> None:
    with pytest.raises(ValueError, match="forever"):
        ContainerSpec("memory", lifetime="forever")


def test_spec_bad_reducer_is_named() -> None:
    with pytest.raises(ValueError, match="concat"):
        ContainerSpec("memory", reducer="concat")


@pytest.mark.parametrize("kwargs", [{"name": ""}, {"name": "m", "max_size": 0}])
def test_spec_other_invalid_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ContainerSpec(**kwargs)


def test_duplicate_container_names_are_refused() -> None:
    with pytest.raises(ValueError, match="memory"):
        ContainerSet([ContainerSpec("memory"), ContainerSpec("memory", lifetime="run")])


# -- reducers -------------------------------------------------------------------------------------------------------


def test_reducer_last_overwrites() -> None:
    box = StateContainer(ContainerSpec("goal", reducer="last"))
    assert box.read() is None
    box.write("door")
    box.write("key")
    assert box.read() == "key"
    assert box.writes == 2


def test_reducer_append_keeps_order_and_caps_size() -> None:
    unbounded = StateContainer(ContainerSpec("log", reducer="append"))
    assert unbounded.read() == []
    for i in range(5):
        unbounded.write(i)
    assert unbounded.read() == [0, 1, 2, 3, 4]

    capped = StateContainer(ContainerSpec("recent", reducer="append", max_size=3))
    for i in range(7):
        capped.write(i)
        assert len(capped.read()) <= 3
    assert capped.read() == [4, 5, 6]


def test_reducer_add_sums_from_zero() -> None:
    box = StateContainer(ContainerSpec("count", reducer="add"))
    assert box.read() == 0
    box.write(2)
    box.write(3)
    assert box.read() == 5
    floats = StateContainer(ContainerSpec("total", reducer="add"))
    floats.write(0.5)
    floats.write(0.25)
    assert floats.read() == 0.75


# -- which signal clears which lifetime -----------------------------------------------------------------------------


def _filled(lifetime: str) -> ContainerSet:
    containers = ContainerSet(
        [
            ContainerSpec("log", lifetime=lifetime, reducer="append"),
            ContainerSpec("last", lifetime=lifetime, reducer="last"),
            ContainerSpec("sum", lifetime=lifetime, reducer="add"),
        ]
    )
    containers["log"].write("a")
    containers["last"].write("b")
    containers["sum"].write(7)
    return containers


@pytest.mark.parametrize("lifetime", ["run", "episode", "step"])
def test_a_container_is_cleared_by_its_signal_only(lifetime: str) -> None:
    containers = _filled(lifetime)
    for signal in Signal:
        if signal.value != CLEARED_BY[lifetime]:
            containers.on_signal(signal)
    assert containers.snapshot() == {"log": ["a"], "last": "b", "sum": 7}

    containers.on_signal(Signal(CLEARED_BY[lifetime]))
    assert containers.snapshot() == {"log": [], "last": None, "sum": 0}
    assert all(c.writes == 0 for c in containers)


@pytest.mark.parametrize("lifetime", ["run", "episode", "step"])
def test_signal_by_name(lifetime: str) -> None:
    containers = _filled(lifetime)
    containers.on_signal(CLEARED_BY[lifetime])
    assert containers["log"].read() == []


def test_signals_clear_only_the_matching_lifetime_in_a_mixed_set() -> None:
    containers = ContainerSet([ContainerSpec(f"{lt}", lifetime=lt, reducer="append") for lt in CLEARED_BY])
    for lt in CLEARED_BY:
        containers[lt].write(lt)
    containers.on_signal("step_end")
    assert containers.snapshot() == {"run": ["run"], "episode": ["episode"], "step": []}
    containers.on_signal("run_start")
    assert containers.snapshot() == {"run": [], "episode": ["episode"], "step": []}
    containers.on_signal("episode_reset")
    assert containers.snapshot() == {"run": [], "episode": [], "step": []}


def test_snapshot_is_a_copy() -> None:
    containers = _filled("episode")
    snap = containers.snapshot()
    containers["log"].write("c")
    assert snap["log"] == ["a"]


# -- in the Kernel --------------------------------------------------------------------------------------------------


class MemoAgent(AgentBase):
    """Writes to one container of each lifetime at every act and records what it sees."""

    containers = [
        ContainerSpec("memory", lifetime="episode", reducer="append"),
        ContainerSpec("scratch", lifetime="step", reducer="append"),
        ContainerSpec("calls", lifetime="run", reducer="add"),
    ]

    def __init__(self) -> None:
        self.at_reset: list[dict[str, Any]] = []
        self.scratch_at_act: list[list[Any]] = []
        self.scratch_at_step: list[list[Any]] = []
        self.signals: list[Signal] = []
        self.n = 0

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.at_reset.append(ctx.containers.snapshot())

    def act(self, obs: Observation) -> ActionChunk:
        c = self.ctx.containers
        self.scratch_at_act.append(list(c["scratch"].read()))
        self.n += 1
        c["memory"].write(self.n)
        c["scratch"].write(self.n)
        c["calls"].write(1)
        return ActionChunk.single(np.zeros(7, np.float32))

    def on_step(self, result: StepResult) -> None:
        self.scratch_at_step.append(list(self.ctx.containers["scratch"].read()))

    def on_signal(self, signal: Signal) -> None:
        self.signals.append(signal)


def _task(index: int) -> TaskInstance:
    return TaskInstance("null", "idle", index=index)


def test_kernel_episode_memory_survives_steps_and_reruns_of_the_same_task() -> None:
    agent = MemoAgent()
    kernel = Kernel(NullEnv(max_episode_steps=4), agent)
    assert kernel.run(_task(0)).steps == 4
    containers = agent.ctx.containers
    assert containers["memory"].read() == [1, 2, 3, 4]  # kept across the episode's steps
    assert containers["calls"].read() == 4

    # the same task again: run_start clears the run lifetime only; no episode_reset, so the episode memory stays
    kernel.run(_task(0))
    assert agent.at_reset[1] == {"memory": [1, 2, 3, 4], "scratch": [], "calls": 0}
    assert containers["memory"].read() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert containers["calls"].read() == 4

    # a different task: episode_reset clears the episode memory
    kernel.run(_task(1))
    assert agent.at_reset[2] == {"memory": [], "scratch": [], "calls": 0}
    assert containers["memory"].read() == [9, 10, 11, 12]

    # and back to the first task: again a change of episode
    kernel.run(_task(0))
    assert agent.at_reset[3] == {"memory": [], "scratch": [], "calls": 0}
    assert agent.at_reset[0] == {"memory": [], "scratch": [], "calls": 0}


def test_kernel_step_lifetime_is_cleared_every_step() -> None:
    agent = MemoAgent()
    Kernel(NullEnv(max_episode_steps=5), agent).run(_task(0))
    assert agent.scratch_at_act == [[]] * 5  # what the previous step wrote is gone
    assert agent.scratch_at_step == [[1], [2], [3], [4], [5]]  # but it lives through its own step


def test_kernel_signal_events_and_scope_ids() -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    agent = MemoAgent()
    kernel = Kernel(NullEnv(max_episode_steps=3), agent, bus=bus)
    the_task = _task(0)
    kernel.run(the_task)

    signals = recorder.of("signal")
    names = [e.signal for e in signals]
    assert names == ["episode_reset", "run_start"] + ["step_start", "step_end"] * 3 + ["run_end"]
    assert all(e.scope_id for e in signals)
    starts = [e for e in signals if e.signal == "step_start"]
    ends = [e for e in signals if e.signal == "step_end"]
    assert [e.scope_id for e in starts] == [e.scope_id for e in ends]  # one iteration, one scope
    assert len({e.scope_id for e in starts}) == 3  # a new scope per iteration
    assert recorder.events[-1].event == "signal"
    assert recorder.events[-1].signal == "run_end"
    # what the agent heard is what the trace shows
    assert [s.value for s in agent.signals] == names

    # re-running the same task: no episode change, so no episode_reset
    recorder.events.clear()
    kernel.run(the_task)
    assert [e.signal for e in recorder.of("signal")][:2] == ["run_start", "step_start"]
    assert "episode_reset" not in [e.signal for e in recorder.of("signal")]

    recorder.events.clear()
    kernel.run(_task(1))
    assert [e.signal for e in recorder.of("signal")][:2] == ["episode_reset", "run_start"]


class FailingAgent(AgentBase):
    def act(self, obs: Observation) -> ActionChunk:
        raise RuntimeError("no plan")


def test_kernel_run_end_is_signalled_on_the_error_path_too() -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    outcome = Kernel(NullEnv(max_episode_steps=3), FailingAgent(), bus=bus).run(_task(0))
    assert outcome.status is EpisodeStatus.ERROR
    names = [e.signal for e in recorder.of("signal")]
    assert names[:2] == ["episode_reset", "run_start"]
    assert names[-1] == "run_end"
    assert recorder.events[-1].event == "signal"
