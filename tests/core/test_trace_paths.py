"""The two trace paths write the same log: the JSON-only fast path (every subscriber takes JSON lines, no pydantic
objects are built) and the typed path (some subscriber wants typed events). Only `wall_time` may differ."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

import hylo.core.kernel as kernel_module
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
    RealtimeTiming,
    StepResult,
    TaskInstance,
    parse_event,
)

NAN = float("nan")


class CountEnv(Environment):
    """A 2-D Box env in [-1, 1]; the observation and info carry numpy values; success at step `success_at`."""

    def __init__(self, max_episode_steps: int = 12, success_at: int | None = 9) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"state": spaces.Box(-np.inf, np.inf, (2,), np.float32)}),
            action_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
            control_rate_hz=10.0,
            max_episode_steps=max_episode_steps,
            name="count",
        )
        self.success_at = success_at
        self.t = 0
        self.pos = np.zeros(2, np.float32)

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        self.t = 0
        self.pos = np.zeros(2, np.float32)
        return self.observe()

    def step(self, action: Any) -> StepResult:
        self.t += 1
        self.pos = (self.pos + np.asarray(action, np.float32)).astype(np.float32)
        done = np.bool_(self.t == self.success_at)
        info = {"dist": np.float32(np.linalg.norm(self.pos)), "t": np.int64(self.t), "flag": np.bool_(self.t % 2)}
        return StepResult(self.observe(), np.float32(self.t / 10), done, False, done, info)

    def observe(self) -> Observation:
        return Observation(state=self.pos.copy(), instruction="count to nine", frame=np.zeros((8, 8, 3), np.uint8))

    def hold_action(self) -> Any:
        return np.zeros(2, np.float32)


class Scripted:
    """A deterministic agent: multi-action chunks, out-of-bounds actions (clipped), agent events; on task index 1 its
    third chunk holds a NaN (a safety abort)."""

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.calls = 0
        ctx.emit("memory.retrieval", {"episode": ctx.episode_id, "seed": ctx.seed, "none": None})

    def act(self, obs: Observation) -> ActionChunk:
        c = self.calls
        self.calls += 1
        self.ctx.emit(
            "agent.decision",
            {"call": c, "state": obs["state"], "score": np.float64(c / 3), "tags": ("a", "b")},
            note=f"chunk {c}",
        )
        if self.ctx.task.index == 1 and c == 2:
            return ActionChunk([np.array([0.1, NAN], np.float32)] * 3)
        if c % 2 == 0:
            actions = [np.array([0.1 * (i + 1), -0.05], np.float32) for i in range(4)]
            return ActionChunk(actions, execution_steps=3)
        small = np.array([0.2, 0.2], np.float32)
        return ActionChunk([small, np.array([1.5, -2.0], np.float32), small])

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.ctx.emit("memory.write", {"status": outcome.status.value, "steps": outcome.steps})


@pytest.fixture
def frozen_latency(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Kernel measures act latency with perf_counter; freeze it so that two runs trace the same latency."""
    monkeypatch.setattr(kernel_module, "time", types.SimpleNamespace(perf_counter=lambda: 0.0, sleep=lambda s: None))


TASKS = [TaskInstance("count", "nine", index=i) for i in range(3)]


def trace(path: Path, *, typed: bool, timing: Any) -> tuple[list[EpisodeOutcome], EventBus]:
    bus = EventBus(run_id="paths")
    jsonl = JsonlRecorder(path)
    bus.subscribe(jsonl)
    if typed:
        bus.subscribe(MemoryRecorder())
    kernel = Kernel(CountEnv(), Scripted(), bus=bus, timing=timing)
    try:
        outcomes = [kernel.run(task) for task in TASKS]
    finally:
        kernel.close()
        jsonl.close()
    return outcomes, bus


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line, parsed as JSON and as a typed event, without its wall time."""
    out = []
    for line in path.read_bytes().splitlines():
        parse_event(line)  # every line reads back as its typed event
        record = json.loads(line, parse_constant=str)  # a NaN constant, if any, compares as its text
        del record["wall_time"]
        out.append(record)
    return out


@pytest.mark.usefixtures("frozen_latency")
@pytest.mark.parametrize(
    "timing",
    ["sync", RealtimeTiming(refill_steps=1, latency_s=0.1, max_hold_steps=5)],
    ids=["sync", "realtime_virtual"],
)
def test_json_only_and_typed_paths_write_the_same_lines(tmp_path: Path, timing: Any) -> None:
    fast_outcomes, fast_bus = trace(tmp_path / "fast.jsonl", typed=False, timing=timing)
    typed_outcomes, typed_bus = trace(tmp_path / "typed.jsonl", typed=True, timing=timing)
    assert fast_outcomes == typed_outcomes
    statuses = [o.status for o in fast_outcomes]
    assert EpisodeStatus.SAFETY_ABORT in statuses
    assert statuses[1] is EpisodeStatus.SAFETY_ABORT
    assert fast_bus.dropped == typed_bus.dropped == 0
    assert not fast_bus.detached and not typed_bus.detached

    fast, typed = lines(tmp_path / "fast.jsonl"), lines(tmp_path / "typed.jsonl")
    # what the comparison covers: clipped actions, multi-action chunks, a NaN abort, agent events
    kinds = {r["event"] for r in fast}
    assert {"agent.decision", "memory.retrieval", "memory.write", "agent.chunk", "safety.review"} <= kinds
    assert any(r["event"] == "safety.review" and r["modified"] for r in fast)
    assert any(r["event"] == "safety.review" and not r["approved"] for r in fast)
    assert any(r["event"] == "agent.chunk" and r["size"] > 1 for r in fast)
    assert len(fast) == len(typed)
    for a, b in zip(fast, typed, strict=True):
        assert a == b


@pytest.mark.usefixtures("frozen_latency")
def test_nan_in_a_chunk_is_written_the_same_on_both_paths(tmp_path: Path) -> None:
    trace(tmp_path / "fast.jsonl", typed=False, timing="sync")
    trace(tmp_path / "typed.jsonl", typed=True, timing="sync")

    def nan_chunk(path: Path) -> bytes:
        """The `actions` of the aborted episode's last chunk (the one holding the NaN), as written."""
        chunks = [line for line in path.read_bytes().splitlines() if b'"agent.chunk"' in line and b"/0001@" in line]
        return chunks[-1][chunks[-1].index(b'"actions"') :]

    assert nan_chunk(tmp_path / "fast.jsonl") == nan_chunk(tmp_path / "typed.jsonl")


# -- a critical recorder that fails ------------------------------------------------------------------------------------


class ClosesTheRecorder(Scripted):
    """Closes the JSONL recorder in the middle of the episode on task index 1 (as a crashed writer would)."""

    def __init__(self, recorder: JsonlRecorder) -> None:
        self.recorder = recorder

    def act(self, obs: Observation) -> ActionChunk:
        if self.ctx.task.index == 1 and self.calls == 2:
            self.recorder.close()
        return super().act(obs)


@pytest.mark.parametrize("typed", [False, True], ids=["json_only", "typed"])
def test_critical_jsonl_recorder_closed_mid_run_marks_that_episode_infra_invalid(tmp_path: Path, typed: bool) -> None:
    bus = EventBus(run_id="critical")
    jsonl = JsonlRecorder(tmp_path / "trace.jsonl")
    bus.subscribe(jsonl, critical=True)
    memory = MemoryRecorder()
    if typed:
        bus.subscribe(memory)
    kernel = Kernel(CountEnv(success_at=None, max_episode_steps=8), ClosesTheRecorder(jsonl), bus=bus)
    try:
        first = kernel.run(TASKS[0])
        broken = kernel.run(TASKS[1])
    finally:
        kernel.close()
    assert (first.status, first.reason) == (EpisodeStatus.FAILURE, "max_steps")
    assert broken.status is EpisodeStatus.INFRA_INVALID
    assert not broken.success
    assert "trace recorder" in broken.reason
    assert "closed" in broken.reason
    assert jsonl not in bus.subscribers
    # what was written before the failure still reads back
    records = [parse_event(line) for line in (tmp_path / "trace.jsonl").read_bytes().splitlines()]
    assert [r.event for r in records].count("episode.end") == 1
    if typed:
        ends = memory.of("episode.end")
        assert [(e.status, e.reason) for e in ends] == [("failure", "max_steps"), ("infra_invalid", broken.reason)]
