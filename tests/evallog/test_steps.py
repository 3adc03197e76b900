"""One cut of a trace into env steps: the episode viewer's timeline and the Rerun export put every trace event in the
same step, on traces the Kernel recorded and on a made-up trace with the odd cases (events before the first step, a
chunk asked for at one step and merged two steps later, a reset signal inside a step, the episode's closing events
after its last step, a review that aborted the episode)."""

from __future__ import annotations

from typing import Any

import pytest
from test_timeline import ScriptAgent, recorded

from hylo.core.timing import timing_from
from hylo.envs import NullEnv, PointReach, PointReachExpert
from hylo.evallog.rrd import cut_steps
from hylo.evallog.timeline import timeline

BASE = {"run_id": "r", "episode_id": "e", "wall_time": 0.0}


def made_up_trace(*, aborted: bool = False) -> list[dict[str, Any]]:
    """Three steps (the third refused by the shield when `aborted`), with the odd cases the docstring names."""
    kinds: list[dict[str, Any]] = [
        {"event": "signal", "signal": "episode_reset", "scope_id": "e"},
        {"event": "signal", "signal": "run_start", "scope_id": "e"},
        {"event": "episode.start"},
        {"event": "observation", "obs": {"x": 0.0}},
    ]
    for step in range(3):
        kinds.append({"event": "signal", "signal": "step_start", "scope_id": f"step:{step}"})
        if step == 1:
            kinds.append({"event": "signal", "signal": "episode_reset", "scope_id": "e"})
        if step == 2:  # the chunk asked for at step 0 arrives two steps late
            kinds.append({"event": "agent.chunk", "requested_at": 0, "delay_steps": 2, "size": 4, "dropped": 2})
        if aborted and step == 2:
            kinds.append({"event": "safety.review", "approved": False, "modified": False, "guard": "finite"})
            break
        later = 0.1 * (step + 1)  # the sim time after the step
        kinds += [
            {"event": "safety.review", "approved": True, "modified": False},
            {"event": "action", "step": step, "action": [0.1 * step], "hold": False},
            {"event": "step.result", "step": step, "reward": 1.0, "terminated": step == 2, "sim_time": later},
            {"event": "observation", "obs": {"x": later}},
            {"event": "signal", "signal": "step_end", "scope_id": f"step:{step}"},
        ]
    kinds += [{"event": "episode.end", "status": "success", "steps": 3}, {"event": "signal", "signal": "run_end"}]
    return [{**BASE, "seq": seq, "sim_time": 0.0, **kind} for seq, kind in enumerate(kinds)]


def timeline_steps(events: list[dict[str, Any]]) -> dict[int, int]:
    """The step of each event's seq, as the timeline's rows give their sequence ranges."""
    return {seq: row.step for row in timeline(events).steps for seq in range(row.seq_first, row.seq_last + 1)}


def traces() -> dict[str, list[dict[str, Any]]]:
    far, near, bad = [3.0, 0.0], [0.1, 0.1], [float("nan"), 0.0]
    chunked = timing_from("realtime", {"schedule": "chunked", "latency_steps": 2, "execution_steps": 3})
    return {
        "made_up": made_up_trace(),
        "made_up_aborted": made_up_trace(aborted=True),
        "kernel": recorded(PointReach(), PointReachExpert()),
        "kernel_chunked_realtime": recorded(PointReach(), PointReachExpert(chunk=6), timing=chunked),
        "kernel_aborted": recorded(NullEnv(dim=2), ScriptAgent([[near], [near], [far], [near], [bad]]), max_steps=10),
    }


@pytest.mark.parametrize("name", sorted(traces()))
def test_the_timeline_and_the_rerun_export_put_every_event_in_the_same_step(name: str) -> None:
    events = traces()[name]
    viewer = timeline_steps(events)
    export = cut_steps(iter(events)).belongs
    assert sorted(viewer) == sorted(export) == [event["seq"] for event in events], "every event is in one step"
    assert viewer == export


def test_the_odd_cases_fall_in_the_step_a_user_expects() -> None:
    events = made_up_trace()
    steps = cut_steps(events)
    at = steps.belongs
    kinds = {(event["event"], event.get("signal")): [] for event in events}
    for event in events:
        kinds[(event["event"], event.get("signal"))].append(at[event["seq"]])
    assert kinds[("episode.start", None)] == [0] and kinds[("signal", "run_start")] == [0], "before the first step"
    assert kinds[("signal", "episode_reset")] == [0, 1], "a reset signal belongs to the step it came in"
    assert kinds[("agent.chunk", None)] == [2], "a late chunk belongs to the step it was merged at"
    assert kinds[("episode.end", None)] == [2] and kinds[("signal", "run_end")] == [2], "the closing events: the last"
    assert kinds[("observation", None)] == [0, 0, 1, 2], "the reset's, then the one each step returned"
    # the export shows an observation at the step that acts on it, beside that step's camera frame
    assert [step for step, _ in steps.observations] == [0, 1, 2, 3] and steps.count == 3
    assert steps.time(1) == pytest.approx(0.1) and steps.time(3) == pytest.approx(0.3)

    line = timeline(events)
    assert [(chunk.requested_at, chunk.start_step) for chunk in line.chunks] == [(0, 2)]
    assert line.steps[0].seq_first == 0 and line.steps[-1].seq_last == events[-1]["seq"]


def test_a_refused_step_holds_the_episodes_closing_events_in_both() -> None:
    events = made_up_trace(aborted=True)
    steps, line = cut_steps(events), timeline(events)
    refused = next(event["seq"] for event in events if event.get("approved") is False)
    assert steps.count == 2 and line.total_steps == 3 and not line.steps[2].executed
    assert {steps.belongs[event["seq"]] for event in events if event["seq"] >= refused} == {2}
    assert line.steps[2].seq_first < refused and line.steps[2].seq_last == events[-1]["seq"]


def test_a_trace_without_a_step_is_all_step_zero_and_the_timeline_shows_no_step() -> None:
    events = [{**BASE, "seq": 0, "sim_time": 0.0, "event": "episode.start"},
              {**BASE, "seq": 1, "sim_time": 0.0, "event": "episode.end", "status": "error"}]  # fmt: skip
    assert cut_steps(events).belongs == {0: 0, 1: 0} and cut_steps(events).count == 0
    line = timeline(events)
    assert line.steps == [] and line.total_steps == 0 and line.end is not None and line.end.status == "error"
