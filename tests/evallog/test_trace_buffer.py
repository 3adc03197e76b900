"""The EvalLog's trace buffer takes the loop's events as records and writes them, when committed, as the very lines
the JSONL recorder writes; grouped events are the same events; odd payloads still make one line each."""

from __future__ import annotations

import itertools
import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hylo.core.bus as bus_module
import hylo.core.kernel as kernel_module
from hylo.core import EventBus, JsonlRecorder, Kernel, MemoryRecorder, TaskInstance, parse_event
from hylo.core.events import ActionEvent, AgentDecisionEvent, ObservationEvent, SignalEvent, StepResultEvent
from hylo.envs import GridGoal, GridGoalExpert, PointReach, PointReachExpert
from hylo.evallog.recording import TraceBuffer, serialize


@pytest.fixture
def restart_clocks(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Wall times from a counter (restarted by the callable it returns) and act latencies of zero, so that two runs
    write the same bytes."""
    monkeypatch.setattr(kernel_module, "time", types.SimpleNamespace(perf_counter=lambda: 0.0, sleep=lambda s: None))

    def restart() -> None:
        ticks = itertools.count()
        monkeypatch.setattr(bus_module, "now", lambda: 1_700_000_000.0 + next(ticks) / 8)

    return restart


def _run(bus: EventBus, env: Any, agent: Any, tasks: list[TaskInstance]) -> None:
    kernel = Kernel(env, agent, bus=bus)
    try:
        for task in tasks:
            kernel.run(task)
    finally:
        kernel.close()


CASES = {
    "reach": (PointReach, PointReachExpert, "point_reach", "reach"),
    "grid": (GridGoal, GridGoalExpert, "grid_goal", "goto"),
}


@pytest.mark.parametrize("typed", [False, True], ids=["records", "beside_a_typed_subscriber"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_buffer_writes_the_lines_of_the_jsonl_recorder(
    tmp_path: Path, case: str, typed: bool, restart_clocks: Callable[[], None]
) -> None:
    env_cls, agent_cls, benchmark, task = CASES[case]
    tasks = [TaskInstance(benchmark, task, index=i) for i in range(3)]

    restart_clocks()
    jsonl_bus = EventBus(run_id="same")
    with JsonlRecorder(tmp_path / "trace.jsonl") as jsonl:
        jsonl_bus.subscribe(jsonl)
        _run(jsonl_bus, env_cls(), agent_cls(), tasks)
    expected = (tmp_path / "trace.jsonl").read_bytes().splitlines()

    restart_clocks()
    buffer_bus = EventBus(run_id="same")
    buffer = TraceBuffer()
    buffer_bus.subscribe(buffer, critical=True)
    if typed:
        buffer_bus.subscribe(MemoryRecorder())
    _run(buffer_bus, env_cls(), agent_cls(), tasks)
    written = serialize(buffer.take())

    assert len(written) == len(expected) > 3 * 5
    assert written == expected
    assert [parse_event(line).seq for line in written][:3] == [0, 1, 2]


@pytest.mark.parametrize("typed", [False, True], ids=["records", "typed"])
def test_grouped_events_are_the_events_one_by_one_sharing_one_wall_time(typed: bool) -> None:
    bus = EventBus(run_id="r")
    buffer = TraceBuffer()
    bus.subscribe(buffer)
    memory = MemoryRecorder()
    if typed:
        bus.subscribe(memory)
    bus.begin_episode("e/0")
    bus.emit_trusted(SignalEvent, signal="step_start", scope_id="step:0")
    bus.emit_group(
        (StepResultEvent, {"step": 0, "reward": 1.0, "terminated": False, "truncated": False, "success": False}),
        (ObservationEvent, {"obs": {"state": [0.5, 1.5]}, "terminal": False}),
    )
    bus.emit_trusted(SignalEvent, signal="step_end", scope_id="step:0")
    events = [json.loads(line) for line in serialize(buffer.take())]
    assert [(e["event"], e["seq"]) for e in events] == [
        ("signal", 0),
        ("step.result", 1),
        ("observation", 2),
        ("signal", 3),
    ]
    assert events[1]["info"] == {} and events[2]["obs"] == {"state": [0.5, 1.5]}
    if typed:
        assert [e.event for e in memory.events] == [e["event"] for e in events]
    else:
        assert events[1]["wall_time"] == events[2]["wall_time"]
    assert bus.seq == 4


def test_a_payload_that_looks_like_events_and_values_json_cannot_hold_still_make_one_line_each() -> None:
    bus = EventBus(run_id="r")
    buffer = TraceBuffer()
    bus.subscribe(buffer)
    bus.begin_episode("e/0")
    echoed = [{"event": "signal", "seq": 1}, {"event": "action", "seq": 2}]  # an agent echoing the trace
    bus.emit_trusted(AgentDecisionEvent, content={"history": echoed})
    bus.emit_trusted(ActionEvent, step=0, action=[0.5, float("nan"), float("inf")])
    bus.emit_trusted(AgentDecisionEvent, content={"text": "\ud800 lone surrogate", "n": np.float64(2.5)})
    lines = serialize(buffer.take())
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["content"]["history"] == echoed and first["seq"] == 0
    assert second["action"] == [0.5, None, None]
    assert third["event"] == "agent.decision" and third["seq"] == 2

    bus.emit_trusted(AgentDecisionEvent, content={"text": "\udfff alone"})
    (only,) = serialize(buffer.take())
    assert json.loads(only)["seq"] == 3
