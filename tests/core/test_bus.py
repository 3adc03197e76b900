"""The trace bus: typed events, stamping, JSONL round trip, detaching broken subscribers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from hylo.core import (
    EVENT_TYPES,
    ActionChunk,
    AgentBase,
    BaseEvent,
    EpisodeContext,
    EpisodeStatus,
    EventBus,
    JsonlRecorder,
    Kernel,
    MemoryRecorder,
    Observation,
    TaskInstance,
    parse_event,
)
from hylo.core.events import ActionEvent, AgentDecisionEvent
from hylo.core.jsonable import jsonable
from hylo.envs import GridGoal, GridGoalExpert, NullEnv, PointReach, PointReachExpert

TRACE_KINDS = {
    "episode.start",
    "observation",
    "agent.decision",
    "memory.retrieval",
    "agent.chunk",
    "safety.review",
    "action",
    "step.result",
    "privileged.state",
    "episode.end",
    "memory.write",
}
AGENT_KINDS = {"agent.decision", "memory.retrieval", "memory.write"}


def reach_task(index: int = 0) -> TaskInstance:
    return TaskInstance("point_reach", "reach", index=index)


def grid_task(index: int = 0) -> TaskInstance:
    return TaskInstance("grid_goal", "goto", index=index)


def recorded_run(env: Any, agent: Any, tasks: list[TaskInstance], *subscribers: Any, run_id: str = "run-1") -> Any:
    bus = EventBus(run_id=run_id)
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    for sub in subscribers:
        bus.subscribe(sub)
    kernel = Kernel(env, agent, bus=bus)
    outcomes = [kernel.run(t) for t in tasks]
    return outcomes, recorder, bus


def comparable(events: list[BaseEvent]) -> list[dict[str, Any]]:
    """Events without what is measured (wall time, act latency)."""
    return [e.model_dump(exclude={"wall_time", "latency_s"}) for e in events]


# -- one typed class per kind ---------------------------------------------------------------------------------------


def test_one_event_class_per_kind() -> None:
    assert set(EVENT_TYPES) >= TRACE_KINDS
    assert len(set(EVENT_TYPES.values())) == len(EVENT_TYPES)
    for kind, cls in EVENT_TYPES.items():
        assert issubclass(cls, BaseEvent)
        assert cls.model_fields["event"].default == kind
        for field in ("run_id", "episode_id", "seq", "sim_time", "wall_time"):
            assert field in cls.model_fields, (kind, field)


def test_the_event_field_is_the_tag() -> None:
    event = ActionEvent(step=0, action=1)
    assert event.event == "action"
    with pytest.raises(ValidationError):
        ActionEvent(event="observation", step=0, action=1)
    line = AgentDecisionEvent(content={"a": 1}, seq=3).model_dump_json()
    parsed = parse_event(line)
    assert type(parsed) is AgentDecisionEvent
    assert parsed.content == {"a": 1}
    with pytest.raises(ValidationError):
        parse_event('{"event": "no.such.kind"}')


def test_every_episode_event_is_its_kind_s_class() -> None:
    _, rec, _ = recorded_run(GridGoal(), GridGoalExpert(), [grid_task(0)])
    kinds = set(rec.kinds())
    assert kinds >= {
        "episode.start",
        "observation",
        "agent.decision",
        "agent.chunk",
        "safety.review",
        "action",
        "step.result",
        "privileged.state",
        "episode.end",
    }
    for event in rec.events:
        assert type(event) is EVENT_TYPES[event.event]


# -- stamping -------------------------------------------------------------------------------------------------------


def test_events_carry_ids_sequence_and_times() -> None:
    tasks = [reach_task(0), reach_task(1)]
    env = PointReach()
    outcomes, rec, _ = recorded_run(env, PointReachExpert(chunk=4), tasks, run_id="run-42")
    assert all(o.status is EpisodeStatus.SUCCESS for o in outcomes)
    dt = env.spec.dt
    for task in tasks:
        events = [e for e in rec.events if e.episode_id == task.episode_id]
        assert events
        assert [e.seq for e in events] == list(range(len(events)))  # from 0, strictly increasing, per episode
        assert all(e.run_id == "run-42" for e in events)
        assert all(e.wall_time > 0 for e in events)
        walls = [e.wall_time for e in events]
        assert walls == sorted(walls)
        sims = [e.sim_time for e in events]
        assert sims == sorted(sims)
        start = next(e for e in events if e.event == "episode.start")
        assert start.sim_time == 0.0
        for result in (e for e in events if e.event == "step.result"):
            assert result.sim_time == pytest.approx((result.step + 1) * dt)  # the time after step k
    # the episodes' events are not interleaved
    ids = [e.episode_id for e in rec.events]
    assert ids == sorted(ids, key=[t.episode_id for t in tasks].index)


def test_emit_without_subscribers_returns_none() -> None:
    bus = EventBus()
    bus.begin_episode("ep")
    assert bus.emit(ActionEvent, step=0, action=1) is None
    assert bus.seq == 0
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    event = bus.emit(ActionEvent, step=0, action=1)
    assert isinstance(event, ActionEvent)
    assert (event.seq, event.episode_id) == (0, "ep")
    assert recorder.events == [event]
    bus.unsubscribe(recorder)
    assert bus.emit(ActionEvent, step=1, action=1) is None
    assert len(recorder.events) == 1


def test_a_kernel_without_subscribers_runs_the_same_episode() -> None:
    quiet = Kernel(PointReach(), PointReachExpert(chunk=5)).run(reach_task(2))
    (traced,), _, _ = recorded_run(PointReach(), PointReachExpert(chunk=5), [reach_task(2)])
    assert quiet == traced


# -- JSONL ----------------------------------------------------------------------------------------------------------


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "trace" / "events.jsonl"
    with JsonlRecorder(path) as jsonl:
        _, rec, _ = recorded_run(GridGoal(), GridGoalExpert(), [grid_task(0), grid_task(1)], jsonl)
        _, rec2, _ = recorded_run(PointReach(), PointReachExpert(chunk=3), [reach_task(0)], jsonl)
    lines = path.read_text(encoding="utf-8").splitlines()
    original = rec.events + rec2.events
    assert len(lines) == len(original)
    parsed = [parse_event(line) for line in lines]
    for before, after in zip(original, parsed, strict=True):
        assert type(after) is type(before)
        assert after == before


def test_jsonl_recorder_refuses_events_after_close(tmp_path: Path) -> None:
    jsonl = JsonlRecorder(tmp_path / "t.jsonl")
    jsonl.close()
    with pytest.raises(RuntimeError):
        jsonl(ActionEvent(step=0, action=0))


# -- broken subscribers ---------------------------------------------------------------------------------------------


class Breaks:
    """A viewer that raises at its n-th event."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0

    def __call__(self, event: BaseEvent) -> None:
        self.calls += 1
        if self.calls == self.at:
            raise RuntimeError("viewer crashed")


@pytest.mark.parametrize("at", [1, 7, 40])
def test_a_raising_subscriber_is_detached_and_changes_nothing(at: int) -> None:
    tasks = [reach_task(3), reach_task(4)]
    baseline, base_rec, _ = recorded_run(PointReach(), PointReachExpert(chunk=5), tasks)
    broken = Breaks(at)
    outcomes, rec, bus = recorded_run(PointReach(), PointReachExpert(chunk=5), tasks, broken)
    assert len(base_rec.events) > at
    assert outcomes == baseline
    assert broken.calls == at  # never called again once it raised
    assert broken not in bus.subscribers
    assert [sub for sub, _ in bus.detached] == [broken]
    assert isinstance(bus.detached[0][1], RuntimeError)
    # the other subscriber saw every event, exactly as in a run without the broken one
    assert comparable(rec.events) == comparable(base_rec.events)


def test_a_raising_sole_subscriber_is_detached_and_the_episode_completes() -> None:
    baseline = Kernel(PointReach(), PointReachExpert(chunk=5)).run(reach_task(5))
    bus = EventBus()
    broken = Breaks(3)
    bus.subscribe(broken)
    outcome = Kernel(PointReach(), PointReachExpert(chunk=5), bus=bus).run(reach_task(5))
    assert outcome == baseline
    assert [sub for sub, _ in bus.detached] == [broken]
    assert not bus.active


def test_a_subscriber_that_raises_at_episode_end_does_not_change_the_outcome() -> None:
    class BreaksAtEnd:
        def __call__(self, event: BaseEvent) -> None:
            if event.event == "episode.end":
                raise ValueError("cannot save")

    baseline = Kernel(GridGoal(), GridGoalExpert()).run(grid_task(2))
    (outcome,), rec, bus = recorded_run(GridGoal(), GridGoalExpert(), [grid_task(2)], BreaksAtEnd())
    assert outcome == baseline
    assert len(bus.detached) == 1
    assert rec.of("episode.end")[-1].status == baseline.status.value


# -- what agents may emit -------------------------------------------------------------------------------------------


def _ctx(bus: EventBus) -> EpisodeContext:
    return EpisodeContext(seed=1, env_spec=PointReach().spec, task=reach_task(0), bus=bus)


@pytest.mark.parametrize("kind", sorted((set(EVENT_TYPES) - AGENT_KINDS) | {"no.such.kind"}))
def test_ctx_emit_refuses_kernel_only_kinds(kind: str) -> None:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    ctx = _ctx(bus)
    with pytest.raises(ValueError):
        ctx.emit(kind, {"x": 1})
    assert recorder.events == []
    with pytest.raises(ValueError):
        _ctx(EventBus()).emit(kind, {"x": 1})  # refused whether or not anyone listens


@pytest.mark.parametrize("kind", sorted(AGENT_KINDS))
def test_ctx_emit_accepts_agent_kinds(kind: str) -> None:
    bus = EventBus(run_id="r")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    bus.begin_episode(reach_task(0).episode_id)
    ctx = _ctx(bus)
    ctx.emit(kind, {"subgoal": "open door"}, score=np.float32(0.5))
    (event,) = recorder.events
    assert type(event) is EVENT_TYPES[kind]
    assert event.content == {"subgoal": "open door", "score": 0.5}
    assert (event.run_id, event.episode_id) == ("r", reach_task(0).episode_id)
    _ctx(EventBus()).emit(kind, {"quiet": True})  # nobody listens: nothing happens


class ImpersonatesKernel(AgentBase):
    def act(self, obs: Observation) -> ActionChunk:
        self.ctx.emit("action", {"step": 0})
        return ActionChunk.single(np.zeros(7, np.float32))


def test_an_agent_emitting_a_kernel_kind_fails_its_episode() -> None:
    (outcome,), rec, _ = recorded_run(NullEnv(max_episode_steps=3), ImpersonatesKernel(), [TaskInstance("null", "x")])
    assert outcome.status is EpisodeStatus.ERROR
    assert "ValueError" in outcome.reason
    assert rec.of("action") == []


# -- privileged reads -----------------------------------------------------------------------------------------------


def test_privileged_reads_are_traced() -> None:
    env = GridGoal()
    (outcome,), rec, _ = recorded_run(env, GridGoalExpert(), [grid_task(3)])
    assert outcome.status is EpisodeStatus.SUCCESS
    privileged = rec.of("privileged.state")
    chunks = rec.of("agent.chunk")
    assert len(chunks) >= 1
    # the expert reads the walls and the goal at each act
    assert [e.name for e in privileged] == ["walls", "goal"] * len(chunks)
    assert privileged[0].value == jsonable(env.privileged_state("walls"))
    assert privileged[1].value == jsonable(env.privileged_state("goal"))
    assert privileged[1].value == [int(x) for x in env.privileged_state("goal")]
    episode_id = grid_task(3).episode_id
    assert all(e.episode_id == episode_id for e in privileged)
    kinds = rec.kinds()
    assert kinds.index("episode.start") < kinds.index("privileged.state") < kinds.index("agent.chunk")


def test_an_agent_that_reads_nothing_privileged_leaves_no_such_event() -> None:
    _, rec, _ = recorded_run(PointReach(), PointReachExpert(chunk=5), [reach_task(0)])
    assert rec.of("privileged.state") == []


def test_every_event_kind_and_field_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "trace.md").read_text()
    for kind, cls in EVENT_TYPES.items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{kind}` |")), None)
        assert row is not None, f"docs/trace.md does not document {kind!r}"
        for name in set(cls.model_fields) - set(BaseEvent.model_fields):
            assert f"`{name}`" in row, f"docs/trace.md does not document {kind}.{name}"


class _Fields:
    """A field subscriber: keeps each event's plain dict, as the EvalLog's trace buffer does."""

    def __init__(self):
        self.rows = []

    def __call__(self, event):
        raise AssertionError("a field subscriber is handed dicts, never event objects")

    def write_fields(self, fields, kind):
        self.rows.append((kind, fields))


def test_a_field_subscriber_gets_plain_dicts_that_parse_back_into_the_same_events():
    import json

    from hylo.core.events import ActionEvent, SignalEvent, parse_event
    from hylo.core.jsonable import jsonable

    bus = EventBus(run_id="r")
    sink = _Fields()
    bus.subscribe(sink, critical=True)
    bus.begin_episode("e/1")
    bus.emit_trusted(ActionEvent, step=0, action=[0.5, float("nan")])
    bus.emit(SignalEvent, signal="run_end", scope_id="e/1")  # the validated path reaches it as a dict too
    assert [kind for kind, _ in sink.rows] == ["action", "signal"]
    first = sink.rows[0][1]
    assert first["event"] == "action" and first["episode_id"] == "e/1" and first["seq"] == 0
    parsed = [parse_event(json.dumps(jsonable(fields)).replace("NaN", "null")) for _, fields in sink.rows]
    assert [e.seq for e in parsed] == [0, 1] and parsed[0].action == [0.5, None]


def test_events_of_a_placement_belong_to_the_placed_episode_and_its_sequence_goes_on():
    from hylo.core.events import EpisodeStartEvent, SignalEvent

    bus = EventBus(run_id="r")
    sink = _Fields()
    bus.subscribe(sink)
    bus.begin_episode("e/0")
    bus.emit_trusted(SignalEvent, signal="run_end", scope_id="e/0")
    bus.place("e/1")  # the panel placed the next episode and signals episode_reset for it
    bus.emit_trusted(SignalEvent, signal="episode_reset", scope_id="e/1")
    bus.begin_episode("e/1")  # the Kernel starts the placed episode: same id, the sequence continues
    bus.emit_trusted(EpisodeStartEvent, task={}, task_digest="d", seed=1, agent="a", guards=[], timing="sync")
    bus.begin_episode("e/2")  # an episode nobody placed starts its own sequence
    bus.emit_trusted(SignalEvent, signal="run_start", scope_id="e/2")
    assert [(f["episode_id"], f["seq"]) for _, f in sink.rows] == [("e/0", 0), ("e/1", 0), ("e/1", 1), ("e/2", 0)]
