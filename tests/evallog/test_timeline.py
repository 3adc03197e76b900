"""An episode's timeline, made from traces the Kernel recorded as a run records them (a TraceBuffer, serialised to
JSON lines and read back): one row per env step with its action, reward and review, the chunks with their stale
actions, the shield's interventions, and the bounds on its size."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from hylo.core import ActionChunk, EventBus, Kernel, TaskInstance
from hylo.core.timing import timing_from
from hylo.envs import NullEnv, PointReach, PointReachExpert
from hylo.evallog import timeline as timeline_module
from hylo.evallog.recording import TraceBuffer, serialize
from hylo.evallog.timeline import MAX_DIMS, timeline

TASK = TaskInstance("builtin", "point_reach", 3)


def recorded(env: Any, agent: Any, **kernel: Any) -> list[dict[str, Any]]:
    """An episode's trace as `EvalLog.trace` reads it back."""
    bus = EventBus()
    buffer = TraceBuffer()
    bus.subscribe(buffer, critical=True)
    Kernel(env, agent, bus=bus, **kernel).run(TASK)
    return [json.loads(line) for line in serialize(buffer.take())]


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event"] == kind]


class ScriptAgent:
    """Returns `script[k]` (one action, or a chunk of several) at its k-th call, the last one after that."""

    def __init__(self, script: list[list[list[float]]]) -> None:
        self.script = script
        self.calls = 0

    def act(self, obs: Any) -> ActionChunk:
        actions = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        return ActionChunk([np.array(a, np.float32) for a in actions])


def test_each_step_holds_its_action_reward_and_result_and_every_event_falls_in_one_step() -> None:
    events = recorded(PointReach(), PointReachExpert())
    line = timeline(events)

    actions, results = of(events, "action"), of(events, "step.result")
    assert line.total_steps == len(results) == len(line.steps) > 3 and line.cut is None
    assert [row.action for row in line.steps] == [event["action"] for event in actions]
    assert [row.reward for row in line.steps] == [event["reward"] for event in results]
    assert [row.success for row in line.steps] == [event["success"] for event in results]
    assert line.steps[-1].success and not any(row.success for row in line.steps[:-1])
    assert line.dim_names == ["0", "1"] and line.total_dims == 2
    assert line.dt == pytest.approx(0.1)  # PointReach's 10 Hz
    assert line.end is not None and line.end.status == "success" and line.end.steps == len(results)
    # the steps' sequence ranges cut the trace into consecutive pieces, each holding its own action and result
    assert line.steps[0].seq_first == events[0]["seq"] and line.steps[-1].seq_last == events[-1]["seq"]
    for before, after in zip(line.steps, line.steps[1:], strict=False):
        assert after.seq_first == before.seq_last + 1
    for row in line.steps:
        inside = [e for e in events if row.seq_first <= e["seq"] <= row.seq_last]
        assert [e["step"] for e in inside if e["event"] in ("action", "step.result")] == [row.step, row.step]
        assert sum(e.get("signal") == "step_end" for e in inside) == 1


def test_chunks_under_realtime_timing_give_their_merge_step_dropped_actions_and_holds() -> None:
    timing = timing_from("realtime", {"schedule": "chunked", "latency_steps": 2, "execution_steps": 3})
    events = recorded(PointReach(), PointReachExpert(chunk=6), timing=timing)
    line = timeline(events)

    chunks = of(events, "agent.chunk")
    assert len(line.chunks) == len(chunks) > 2
    for row, event in zip(line.chunks, chunks, strict=True):
        assert (row.requested_at, row.size, row.dropped) == (event["requested_at"], 6, event["dropped"])
        assert row.start_step == event["requested_at"] + 2 and row.latency_s == event["latency_s"]
    assert all(chunk.dropped == 2 for chunk in line.chunks)  # two control steps late: its first two are stale
    # the first chunk has no plan beside it: the robot holds until it arrives, then runs the agent's actions
    holds = [row.hold for row in line.steps]
    assert holds[:2] == [True, True] and not any(holds[2:])
    assert [row.hold for row in line.steps] == [event["hold"] for event in of(events, "action")]


def test_a_clipped_action_is_an_intervention_on_its_step_and_an_abort_is_a_step_that_never_ran() -> None:
    far, near, bad = [3.0, 0.0], [0.1, 0.1], [float("nan"), 0.0]
    events = recorded(NullEnv(dim=2), ScriptAgent([[near], [near], [far], [near], [bad]]), max_steps=10)
    line = timeline(events)

    assert len(line.steps) == 5 and line.total_steps == 5
    reviews = [row.review for row in line.steps]
    assert all(review is not None for review in reviews)
    interventions = [row.step for row in line.steps if row.review is not None and row.review.intervention]
    assert interventions == [2, 4]
    clipped = line.steps[2]
    assert clipped.review is not None and clipped.review.modified and clipped.review.approved
    assert clipped.action == [1.0, 0.0] and clipped.executed  # the env was given the clipped action
    aborted = line.steps[4]
    assert aborted.review is not None and not aborted.review.approved and aborted.review.guard == "finite"
    assert not aborted.executed and aborted.action is None and aborted.reward is None
    assert line.end is not None and line.end.status == "safety_abort" and line.end.safety_interventions == 2
    assert aborted.seq_last == events[-1]["seq"], "the episode's closing events join the aborted step"


def test_a_timeline_is_bounded_in_steps_and_dims_and_says_what_it_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    wide = MAX_DIMS + 8
    events = recorded(NullEnv(dim=wide), ScriptAgent([[[0.5] * wide]]), max_steps=12)
    monkeypatch.setattr(timeline_module, "MAX_STEPS", 5)

    first = timeline(events)
    assert [row.step for row in first.steps] == [0, 1, 2, 3, 4] and first.total_steps == 12
    assert first.total_dims == wide and len(first.dim_names) == MAX_DIMS
    assert all(row.action is not None and len(row.action) == MAX_DIMS for row in first.steps)
    assert first.cut == f"showing steps 0–4 of 12 and the first {MAX_DIMS} of {wide} action dimensions"

    later = timeline(events, first_step=10)
    assert [row.step for row in later.steps] == [10, 11] and later.first_step == 10
    assert [chunk.start_step for chunk in later.chunks] == [10, 11]
    assert later.cut is not None and "steps 10–11 of 12" in later.cut
    with pytest.raises(ValueError, match="-1"):
        timeline(events, first_step=-1)


def test_an_action_recorded_by_its_digest_has_no_numbers() -> None:
    events = recorded(NullEnv(dim=80), ScriptAgent([[[0.25] * 80]]), max_steps=3)
    assert "digest" in of(events, "action")[0]["action"], "an action of more than 64 numbers is traced by digest"
    line = timeline(events)
    assert [row.action for row in line.steps] == [None, None, None] and line.dim_names == []
    assert [row.reward for row in line.steps] == [event["reward"] for event in of(events, "step.result")]


def test_a_dict_action_is_flattened_with_its_dimensions_named() -> None:
    base = {"run_id": "r", "episode_id": "e", "sim_time": 0.0, "wall_time": 0.0}
    events = [
        {**base, "event": "action", "seq": 0, "step": 0, "action": {"arm": [0.5, -0.5], "grip": 1}, "hold": False},
        {**base, "event": "step.result", "seq": 1, "step": 0, "reward": 0.0, "terminated": False, "truncated": False,
         "success": False, "info": {}},
    ]  # fmt: skip
    line = timeline(events)
    assert [row.action for row in line.steps] == [[0.5, -0.5, 1.0]]
    assert line.dim_names == ["arm[0]", "arm[1]", "grip"]


def test_a_trace_without_steps_has_an_empty_timeline() -> None:
    assert timeline([]).steps == [] and timeline([]).total_steps == 0 and timeline([]).end is None
