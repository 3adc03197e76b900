"""Hard timeouts: the agent runs in a child process that is killed when `act` overruns its deadline.

The agents are defined at module level: they are pickled to a spawned process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    ContainerSpec,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    Kernel,
    MemoryRecorder,
    Observation,
    ProcessAgent,
    TaskInstance,
)
from hylo.core.errors import AgentTimeout, InvalidAction, OverLimit, SimulationDiverged
from hylo.envs import NullEnv, PointReach, PointReachExpert


class IsolatedExpert(PointReachExpert):
    """The PointReach expert, misbehaving on chosen episode indices, tracing its process id."""

    def __init__(
        self,
        chunk: int = 5,
        hang_on: int | None = None,
        raise_on: int | None = None,
        crash_on: int | None = None,
    ) -> None:
        super().__init__(chunk=chunk)
        self.hang_on = hang_on
        self.raise_on = raise_on
        self.crash_on = crash_on
        self.index = -1

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.index = ctx.task.index
        ctx.emit("memory.retrieval", {"pid": os.getpid(), "index": self.index})

    def act(self, obs: Observation) -> ActionChunk:
        if self.index == self.hang_on:
            time.sleep(1e6)
        if self.index == self.raise_on:
            raise KeyError("remote boom")
        if self.index == self.crash_on:
            os._exit(3)
        self.ctx.emit("agent.decision", {"pid": os.getpid()}, index=self.index)
        return super().act(obs)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.ctx.emit("memory.write", {"status": outcome.status.value})


class IsolatedMemo:
    """Keeps an episode memory and a step scratchpad in the child; reports what it sees through ctx.emit."""

    containers = [
        ContainerSpec("memory", lifetime="episode", reducer="append"),
        ContainerSpec("scratch", lifetime="step", reducer="append"),
    ]

    def __init__(self, dim: int = 2) -> None:
        self.dim = dim

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        ctx.emit("memory.retrieval", {"memory": list(ctx.containers["memory"].read())})

    def act(self, obs: Observation) -> ActionChunk:
        c = self.ctx.containers
        self.ctx.emit("agent.decision", {"scratch": list(c["scratch"].read())})
        c["memory"].write(len(c["memory"].read()))
        c["scratch"].write("x")
        return ActionChunk.single(np.zeros(self.dim, np.float32))


def task(index: int) -> TaskInstance:
    return TaskInstance("point_reach", "reach", index=index)


def alive(pid: int) -> bool:
    with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/status") as f:
        state = next((line for line in f if line.startswith("State:")), "")
        if "zombie" in state or "\tZ" in state:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pids(recorder: MemoryRecorder) -> list[int]:
    return [e.content["pid"] for e in recorder.of("memory.retrieval")]


@pytest.fixture
def recorder() -> MemoryRecorder:
    return MemoryRecorder()


@pytest.fixture
def make_kernel(recorder: MemoryRecorder) -> Iterator[Any]:
    kernels: list[Kernel] = []

    def make(agent: Any, **kwargs: Any) -> Kernel:
        bus = EventBus(run_id="iso")
        bus.subscribe(recorder)
        kernel = Kernel(PointReach(), agent, act_timeout_s=kwargs.pop("act_timeout_s", 0.5), bus=bus, **kwargs)
        kernels.append(kernel)
        return kernel

    yield make
    for kernel in kernels:
        kernel.close()


def test_hung_act_is_killed_and_the_next_episode_gets_a_fresh_child(make_kernel: Any, recorder: MemoryRecorder) -> None:
    kernel = make_kernel(IsolatedExpert(hang_on=1), hard_timeout=True)
    assert isinstance(kernel.agent, ProcessAgent)

    first = kernel.run(task(0))
    assert first.status is EpisodeStatus.SUCCESS
    assert kernel.agent.restarts == 0

    t0 = time.perf_counter()
    hung = kernel.run(task(1))
    elapsed = time.perf_counter() - t0
    assert hung.status is EpisodeStatus.ERROR
    assert hung.reason == "timeout"
    assert not hung.success
    assert elapsed < 10.0  # 0.5 s deadline plus the kill; far below the pytest timeout
    hung_pid = pids(recorder)[-1]
    assert hung_pid != os.getpid()
    assert not alive(hung_pid)

    after = kernel.run(task(2))
    assert after.status is EpisodeStatus.SUCCESS
    assert kernel.agent.restarts == 1
    fresh_pid = pids(recorder)[-1]
    assert fresh_pid != hung_pid
    assert alive(fresh_pid)

    # the same episode in-process: isolation changes nothing about a healthy episode's result
    reference = Kernel(PointReach(), IsolatedExpert()).run(task(2))
    assert (after.status, after.steps, after.reason) == (reference.status, reference.steps, reference.reason)

    kernel.close()
    assert not alive(fresh_pid)


def test_exception_inside_the_child_is_an_error_naming_the_remote_type(make_kernel: Any) -> None:
    kernel = make_kernel(IsolatedExpert(raise_on=0), hard_timeout=True)
    outcome = kernel.run(task(0))
    assert outcome.status is EpisodeStatus.ERROR
    assert "KeyError" in outcome.reason
    assert "remote boom" in outcome.reason
    assert kernel.run(task(1)).status is EpisodeStatus.SUCCESS


def test_child_process_death_is_an_error_and_the_run_goes_on(make_kernel: Any, recorder: MemoryRecorder) -> None:
    kernel = make_kernel(IsolatedExpert(crash_on=0), hard_timeout=True)
    t0 = time.perf_counter()
    outcome = kernel.run(task(0))
    assert time.perf_counter() - t0 < 10.0
    assert outcome.status is EpisodeStatus.ERROR
    assert not outcome.success
    dead_pid = pids(recorder)[-1]
    assert not alive(dead_pid)

    again = kernel.run(task(1))
    assert again.status is EpisodeStatus.SUCCESS
    assert kernel.agent.restarts == 1
    assert pids(recorder)[-1] != dead_pid


def test_agent_events_from_the_child_reach_the_parent_bus(make_kernel: Any, recorder: MemoryRecorder) -> None:
    kernel = make_kernel(IsolatedExpert(), hard_timeout=True)
    the_task = task(4)
    outcome = kernel.run(the_task)
    assert outcome.status is EpisodeStatus.SUCCESS

    retrievals = recorder.of("memory.retrieval")
    decisions = recorder.of("agent.decision")
    writes = recorder.of("memory.write")
    assert len(retrievals) == 1
    child_pid = retrievals[0].content["pid"]
    assert child_pid != os.getpid()
    assert retrievals[0].content["index"] == 4
    assert len(decisions) == len(recorder.of("agent.chunk")) >= 1
    assert all(e.content == {"pid": child_pid, "index": 4} for e in decisions)
    assert [e.content for e in writes] == [{"status": "success"}]

    # forwarded events are stamped by the parent's bus: its run, this episode, in sequence with the Kernel's events
    for event in (*retrievals, *decisions, *writes):
        assert event.run_id == "iso"
        assert event.episode_id == the_task.episode_id
    assert [e.seq for e in recorder.events] == list(range(len(recorder.events)))
    kinds = recorder.kinds()
    assert kinds.index("memory.retrieval") < kinds.index("agent.decision") < kinds.index("agent.chunk")
    assert kinds.index("episode.end") < kinds.index("memory.write")


def test_containers_live_in_the_child_and_follow_the_forwarded_signals() -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    env = PointReach(max_episode_steps=3)  # the agent stands still: every episode runs out of steps
    kernel = Kernel(env, IsolatedMemo(dim=2), act_timeout_s=5.0, hard_timeout=True, bus=bus)
    try:
        for t in (task(0), task(0), task(1)):
            assert kernel.run(t).reason == "max_steps"
    finally:
        kernel.close()
    # episode memory: kept when the same task runs again, cleared by episode_reset when the task changes
    assert [e.content["memory"] for e in recorder.of("memory.retrieval")] == [[], [0, 1, 2], []]
    # step scratchpad: cleared at every step_end
    assert [e.content["scratch"] for e in recorder.of("agent.decision")] == [[]] * 9


def test_isolated_agent_on_an_env_whose_step_results_carry_no_info() -> None:
    # NullEnv returns StepResult(...) with the default (empty) info; on_step must still reach the child
    reference = Kernel(NullEnv(max_episode_steps=3), IsolatedMemo(dim=7)).run(task(0))
    kernel = Kernel(NullEnv(max_episode_steps=3), IsolatedMemo(dim=7), act_timeout_s=5.0, hard_timeout=True)
    try:
        outcome = kernel.run(task(0))
    finally:
        kernel.close()
    assert (reference.status, reference.reason, reference.steps) == (EpisodeStatus.FAILURE, "max_steps", 3)
    assert (outcome.status, outcome.reason, outcome.steps) == (reference.status, reference.reason, reference.steps)


class SpawnsAndHangs:
    """Starts a long-running helper process, writes its pid to `pid_file`, then hangs in `act`."""

    def __init__(self, pid_file: str) -> None:
        self.pid_file = pid_file

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        helper = subprocess.Popen(["sleep", "60"])
        Path(self.pid_file).write_text(str(helper.pid))
        time.sleep(1e6)
        return ActionChunk([np.zeros(7, np.float32)])


def test_timeout_kill_also_ends_the_processes_the_agent_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    kernel = Kernel(NullEnv(), SpawnsAndHangs(str(pid_file)), act_timeout_s=0.5, hard_timeout=True, max_steps=5)
    helper = None
    try:
        outcome = kernel.run(TaskInstance("iso", "grandchild"))
        assert (outcome.status, outcome.reason) == (EpisodeStatus.ERROR, "timeout")
        assert pid_file.exists(), "the agent started its helper before hanging"
        helper = int(pid_file.read_text())
        assert helper != os.getpid()
        deadline = time.monotonic() + 2.0
        while alive(helper) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(helper), "the helper process outlived the agent it belonged to"
    finally:
        kernel.close()
        if helper is not None and alive(helper):  # do not leak it if the assertion above failed
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper, signal.SIGKILL)


class RaisesOnAct:
    """Raises one of the errors that decide an episode's status from `act`, as an agent wrapping a remote model or
    a simulator of its own may: its client's timeout, a refused action, a diverged simulation."""

    def __init__(self, error: str) -> None:
        self.error = error

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> ActionChunk:
        if self.error == "timeout":
            raise AgentTimeout(None, 0.25, "infer at ws://127.0.0.1:9/")
        if self.error == "invalid":
            raise InvalidAction("the model answered an action of 3 dimensions, not 2")
        if self.error == "diverged":
            raise SimulationDiverged("BADQACC", "in the agent's own world model")
        raise OverLimit("infra_invalid", "env timeout", "the agent's own env call ran past its limit")


def test_an_isolated_agent_whose_own_remote_call_times_out_ends_the_episode_as_a_timeout() -> None:
    kernel = Kernel(PointReach(), RaisesOnAct("timeout"), act_timeout_s=5.0, hard_timeout=True)
    try:
        outcome = kernel.run(task(0))
    finally:
        kernel.close()
    assert (outcome.status, outcome.reason) == (EpisodeStatus.ERROR, "timeout")
    assert "infer at ws://127.0.0.1:9/ did not return in time (limit 0.25 s)" in (outcome.detail or "")


@pytest.mark.parametrize("error", ["timeout", "invalid", "diverged", "over_limit"])
def test_an_error_raised_by_an_isolated_agent_ends_the_episode_as_it_would_in_process(error: str) -> None:
    local = Kernel(PointReach(), RaisesOnAct(error), act_timeout_s=5.0).run(task(0))
    kernel = Kernel(PointReach(), RaisesOnAct(error), act_timeout_s=5.0, hard_timeout=True)
    try:
        isolated = kernel.run(task(0))
    finally:
        kernel.close()
    assert (isolated.status, isolated.reason, isolated.steps) == (local.status, local.reason, local.steps)
