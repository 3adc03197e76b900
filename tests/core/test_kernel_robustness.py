"""`Kernel.run` never raises: malformed step results, failing holds, signals and guards, broken trace subscribers and
unbuildable events all end in an honest status; bind-time misconfiguration is refused at construction."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    AgentRequirements,
    BaseEvent,
    ContainerSpec,
    EnvCapabilities,
    Environment,
    EnvSpec,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    IncompatibleComponents,
    JsonlRecorder,
    Kernel,
    MemoryRecorder,
    Observation,
    RealtimeTiming,
    RotationGuard,
    SafetyShield,
    Signal,
    StepResult,
    TaskInstance,
    parse_event,
)
from hylo.core.events import ActionEvent, AgentDecisionEvent
from hylo.envs import GridGoal, GridGoalExpert, NullEnv

TASK = TaskInstance("robust", "never_raises")
ZERO = np.zeros(2, np.float64)
WALL = RealtimeTiming(clock="wall", max_hold_steps=1000)


class StepEnv(Environment):
    """A 2-D Box env (100 Hz, with a hold action) whose step result is produced by `make_result(t, obs)`.

    `hold_error` makes `hold_action` raise; `step_error_at=n` makes the n-th step raise.
    """

    def __init__(
        self,
        make_result: Callable[[int, Observation], Any] | None = None,
        *,
        max_episode_steps: int = 20,
        hold_error: BaseException | None = None,
        step_error_at: int | None = None,
        privileged: bool = False,
    ) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"t": spaces.Box(0.0, 1e6, (1,), np.float64)}),
            action_space=spaces.Box(-1.0, 1.0, (2,), np.float64),
            control_rate_hz=100.0,
            max_episode_steps=max_episode_steps,
            name="step_env",
        )
        self._caps = EnvCapabilities(hold_action=True, privileged_state=privileged)
        self.make_result = make_result
        self.hold_error = hold_error
        self.step_error_at = step_error_at
        self.t = 0
        self.resets = 0
        self.actions: list[Any] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return self._caps

    def reset(self, task: TaskInstance) -> Observation:
        self.resets += 1
        self.t = 0
        self.actions = []
        return self.observe()

    def step(self, action: Any) -> Any:
        if self.step_error_at is not None and self.t + 1 == self.step_error_at:
            raise ConnectionError("simulator socket closed")
        self.actions.append(action)
        self.t += 1
        obs = self.observe()
        if self.make_result is None:
            return StepResult(obs)
        return self.make_result(self.t, obs)

    def observe(self) -> Observation:
        return Observation(t=np.array([float(self.t)]))

    def hold_action(self) -> Any:
        if self.hold_error is not None:
            raise self.hold_error
        return np.zeros(2)

    def privileged_state(self, name: str) -> Any:
        return self.t


class Recording:
    """An agent that acts with a fixed plan, hears signals and keeps every outcome it is told."""

    def __init__(self, action: Any = ZERO) -> None:
        self.action = action
        self.outcomes: list[EpisodeOutcome] = []
        self.signals: list[str] = []
        self.acts = 0

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def act(self, obs: Observation) -> Any:
        self.acts += 1
        return ActionChunk([self.action])

    def on_signal(self, signal: Signal) -> None:
        self.signals.append(signal.value)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.outcomes.append(outcome)


def check_ending(outcome: EpisodeOutcome, events: list[BaseEvent], agent: Any) -> None:
    """What every ending must do: one `episode.end` matching the outcome, `run_end` signalled after it, and the
    agent told the verdict."""
    assert isinstance(outcome, EpisodeOutcome)
    assert outcome.success == (outcome.status is EpisodeStatus.SUCCESS)
    kinds = [e.event for e in events]
    ends = [e for e in events if e.event == "episode.end"]
    assert len(ends) == 1
    end = ends[0]
    assert (end.status, end.reason, end.steps, end.success) == (  # type: ignore[attr-defined]
        outcome.status.value,
        outcome.reason,
        outcome.steps,
        outcome.success,
    )
    run_ends = [i for i, e in enumerate(events) if e.event == "signal" and e.signal == "run_end"]  # type: ignore[attr-defined]
    assert len(run_ends) == 1
    assert run_ends[0] > kinds.index("episode.end")
    if isinstance(agent, Recording):
        assert [(o.status, o.reason) for o in agent.outcomes] == [(outcome.status, outcome.reason)]


def run(env: Environment, agent: Any, **kwargs: Any) -> tuple[EpisodeOutcome, MemoryRecorder]:
    bus = EventBus(run_id="robust")
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    kernel = Kernel(env, agent, bus=bus, **kwargs)
    try:
        outcome = kernel.run(TASK)
    finally:
        kernel.close()
    check_ending(outcome, recorder.events, agent)
    return outcome, recorder


# -- numpy step results on the JSON-only trace path --------------------------------------------------------------------


def test_numpy_bools_in_the_step_result_on_the_json_only_path(tmp_path: Path) -> None:
    def result(t: int, obs: Observation) -> StepResult:
        done = np.bool_(t == 3)
        return StepResult(obs, np.float32(1.0 if done else 0.0), done, np.bool_(False), done, {"hit": np.bool_(done)})

    path = tmp_path / "trace.jsonl"
    bus = EventBus(run_id="np")
    jsonl = JsonlRecorder(path)
    bus.subscribe(jsonl)  # the only subscriber: events are serialised straight from their fields
    agent = Recording()
    kernel = Kernel(StepEnv(result), agent, bus=bus)
    outcome = kernel.run(TASK)
    jsonl.close()

    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 3)
    assert bus.dropped == 0
    assert not bus.detached
    events = [parse_event(line) for line in path.read_bytes().splitlines()]
    check_ending(outcome, events, agent)
    results = [e for e in events if e.event == "step.result"]
    assert [(r.success, r.terminated, r.info) for r in results] == [  # type: ignore[attr-defined]
        (False, False, {"hit": False}),
        (False, False, {"hit": False}),
        (True, True, {"hit": True}),
    ]
    assert all(type(r.success) is bool for r in results)  # type: ignore[attr-defined]


# -- malformed step results are the env's fault ------------------------------------------------------------------------


MALFORMED: dict[str, Callable[[int, Observation], Any]] = {
    "gymnasium_5_tuple": lambda t, obs: (obs, 0.0, False, False, {}),
    "reward_none": lambda t, obs: StepResult(obs, None),  # type: ignore[arg-type]
    "success_array": lambda t, obs: StepResult(obs, 0.0, False, False, np.array([1, 0])),  # type: ignore[arg-type]
    "info_list": lambda t, obs: StepResult(obs, 0.0, False, False, False, ["x"]),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("make_result", list(MALFORMED.values()), ids=list(MALFORMED))
@pytest.mark.parametrize("timing", ["sync", "realtime"])
def test_malformed_step_result_is_infra_invalid(make_result: Callable[[int, Observation], Any], timing: str) -> None:
    agent = Recording()
    outcome, recorder = run(StepEnv(make_result), agent, timing=timing)
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert outcome.reason.startswith("env step raised"), outcome.reason
    assert outcome.steps == 0
    assert recorder.of("step.result") == []


def test_hold_action_raising_is_infra_invalid() -> None:
    env = StepEnv(hold_error=RuntimeError("brakes jammed"))
    agent = Recording()
    # a fixed latency of 2 steps: the queue is empty at step 0, so the hold action is needed at once
    outcome, _ = run(env, agent, timing=RealtimeTiming(latency_s=0.02))
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert outcome.reason.startswith("env hold_action raised"), outcome.reason
    assert "brakes jammed" in outcome.reason
    assert outcome.steps == 0


def test_hold_action_raising_under_the_wall_clock_is_infra_invalid() -> None:
    class Slow(Recording):
        def act(self, obs: Observation) -> Any:
            time.sleep(0.05)
            return super().act(obs)

    outcome, _ = run(StepEnv(hold_error=RuntimeError("brakes jammed")), Slow(), timing=WALL)
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert outcome.reason.startswith("env hold_action raised"), outcome.reason


# -- agent signal handlers ---------------------------------------------------------------------------------------------


class SignalRaiser(Recording):
    """Raises in `on_signal` the first time it hears `signal` (after `skip` earlier deliveries of it)."""

    def __init__(self, signal: str, skip: int = 0) -> None:
        super().__init__()
        self.target = signal
        self.skip = skip
        self.raised = False

    def on_signal(self, signal: Signal) -> None:
        super().on_signal(signal)
        if signal.value == self.target and not self.raised:
            if self.skip:
                self.skip -= 1
                return
            self.raised = True
            raise RuntimeError(f"cannot handle {signal.value}")


@pytest.mark.parametrize(("signal", "skip"), [("run_start", 0), ("step_start", 2), ("step_end", 1)])
@pytest.mark.parametrize("timing", ["sync", "realtime", "wall"])
def test_on_signal_raising_is_an_agent_error(signal: str, skip: int, timing: str) -> None:
    agent = SignalRaiser(signal, skip)
    outcome, _ = run(StepEnv(), agent, timing=WALL if timing == "wall" else timing)
    assert outcome.status is EpisodeStatus.ERROR
    assert "on_signal" in outcome.reason, outcome.reason
    assert "cannot handle" in outcome.reason


# -- guards that choke on the action's form ----------------------------------------------------------------------------


class ChokingGuard:
    name = "choking"

    def bind(self, space: Any) -> None:
        return None

    def check(self, action: Any, space: Any) -> tuple[Any, str | None]:
        raise IndexError("guard indexed past the action")


@pytest.mark.parametrize(
    ("shield", "action"),
    [
        (SafetyShield([RotationGuard(start=3)]), 0.0),  # a scalar where a 7-D vector is expected
        (SafetyShield([ChokingGuard()]), np.zeros(7, np.float32)),
    ],
    ids=["rotation_guard_scalar", "custom_guard_index_error"],
)
def test_guard_raising_something_other_than_safety_abort_is_an_error(shield: SafetyShield, action: Any) -> None:
    env = NullEnv(max_episode_steps=10)
    agent = Recording(action)
    outcome, recorder = run(env, agent, shield=shield)
    assert outcome.status is EpisodeStatus.ERROR
    assert outcome.reason.startswith("shield review"), outcome.reason
    assert "IndexError" in outcome.reason
    assert outcome.steps == 0
    assert recorder.of("action") == [], "an action no guard could review must not reach the env"


# -- 0-d arrays on a Discrete env --------------------------------------------------------------------------------------


class ZeroDimExpert(GridGoalExpert):
    """The grid expert, answering each step with one action as a 0-d numpy integer array."""

    def act(self, obs: Observation) -> Any:
        return np.array(super().act(obs).actions[0], dtype=np.int64)


def test_zero_d_integer_array_is_executed_as_a_single_discrete_action() -> None:
    reference, _ = run(GridGoal(), GridGoalExpert())
    assert reference.status is EpisodeStatus.SUCCESS
    outcome, recorder = run(GridGoal(), ZeroDimExpert())
    assert (outcome.status, outcome.steps) == (EpisodeStatus.SUCCESS, reference.steps)
    assert outcome.safety_interventions == 0
    assert all(isinstance(e.action, int) for e in recorder.of("action"))


# -- step containers are cleared when the episode ends mid-step --------------------------------------------------------


class ScratchAgent:
    """Writes to a step-lifetime container in every act and records what it found there first."""

    containers = [ContainerSpec("scratch", lifetime="step", reducer="append")]

    def __init__(self, ending: str) -> None:
        self.ending = ending
        self.seen: list[list[str]] = []
        self.episode = -1

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.episode += 1

    def act(self, obs: Observation) -> Any:
        scratch = self.ctx.containers["scratch"]
        self.seen.append(list(scratch.read()))
        scratch.write(f"episode {self.episode}")
        if self.episode == 0 and len(self.seen) >= 2:  # from its second act on, the first episode ends
            if self.ending == "nan_abort":  # (a long chunk: under the wall clock its head may be stale)
                return ActionChunk([np.array([np.nan, 0.0])] * 10)
            if self.ending == "agent_error":
                raise RuntimeError("gave up")
        return ActionChunk([ZERO])


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("nan_abort", EpisodeStatus.SAFETY_ABORT),
        ("agent_error", EpisodeStatus.ERROR),
        ("env_error", EpisodeStatus.INFRA_INVALID),
    ],
)
@pytest.mark.parametrize("timing", ["sync", "wall"])
def test_step_containers_are_cleared_when_the_episode_ends_mid_step(
    ending: str, status: EpisodeStatus, timing: str
) -> None:
    env = StepEnv(step_error_at=2 if ending == "env_error" else None, max_episode_steps=20)
    agent = ScratchAgent(ending)
    kernel = Kernel(env, agent, timing=WALL if timing == "wall" else "sync")
    try:
        first = kernel.run(TASK)
        env.step_error_at = None
        second = kernel.run(TASK)
    finally:
        kernel.close()
    assert first.status is status, first.reason
    assert second.status is EpisodeStatus.FAILURE
    # every act found the scratchpad empty, the first act of the second episode included
    assert agent.episode == 1
    assert all(seen == [] for seen in agent.seen), agent.seen


# -- trace subscribers -------------------------------------------------------------------------------------------------


class FailsAt:
    """A typed subscriber that raises at its n-th event."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = 0

    def __call__(self, event: BaseEvent) -> None:
        self.seen += 1
        if self.seen == self.n:
            raise OSError("disk full")


@pytest.mark.parametrize("timing", ["sync", "wall"])
def test_critical_subscriber_failing_mid_episode_is_infra_invalid(timing: str) -> None:
    env = StepEnv(lambda t, obs: StepResult(obs, 0.0, False, False, t == 6))
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    failing = FailsAt(12)
    bus.subscribe(failing, critical=True)
    agent = Recording()
    kernel = Kernel(env, agent, bus=bus, timing=WALL if timing == "wall" else "sync")
    try:
        outcome = kernel.run(TASK)
    finally:
        kernel.close()
    check_ending(outcome, recorder.events, agent)
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert not outcome.success
    assert "trace recorder" in outcome.reason, outcome.reason
    assert "disk full" in outcome.reason
    assert failing not in bus.subscribers


def test_non_critical_subscriber_failing_mid_episode_changes_nothing() -> None:
    def make_env() -> StepEnv:
        return StepEnv(lambda t, obs: StepResult(obs, 0.0, False, False, t == 6))

    reference, _ = run(make_env(), Recording())
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    failing = FailsAt(12)
    bus.subscribe(failing)
    agent = Recording()
    outcome = Kernel(make_env(), agent, bus=bus).run(TASK)
    check_ending(outcome, recorder.events, agent)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 6)
    assert (outcome.status, outcome.reason, outcome.steps) == (reference.status, reference.reason, reference.steps)
    assert [s for s, _ in bus.detached] == [failing]


# -- events that cannot be built ---------------------------------------------------------------------------------------


class Opaque:
    def __repr__(self) -> str:
        return "<opaque handle>"


class EmitsObjects(Recording):
    def act(self, obs: Observation) -> Any:
        self.ctx.emit("agent.decision", {"handle": Opaque(), "nested": {"items": [Opaque(), np.float32(0.5)]}})
        return super().act(obs)


@pytest.mark.parametrize("json_only", [True, False], ids=["json_only", "typed"])
def test_agent_event_with_an_object_is_traced_by_repr(tmp_path: Path, json_only: bool) -> None:
    path = tmp_path / "trace.jsonl"
    bus = EventBus()
    jsonl = JsonlRecorder(path)
    bus.subscribe(jsonl)
    if not json_only:
        bus.subscribe(MemoryRecorder())
    agent = EmitsObjects()
    kernel = Kernel(StepEnv(max_episode_steps=3), agent, bus=bus)
    outcome = kernel.run(TASK)
    jsonl.close()
    events = [parse_event(line) for line in path.read_bytes().splitlines()]
    check_ending(outcome, events, agent)
    assert (outcome.status, outcome.reason) == (EpisodeStatus.FAILURE, "max_steps")
    assert bus.dropped == 0
    decisions = [e for e in events if e.event == "agent.decision"]
    assert len(decisions) == 3
    assert decisions[0].content == {  # type: ignore[attr-defined]
        "handle": "<opaque handle>",
        "nested": {"items": ["<opaque handle>", 0.5]},
    }


@pytest.mark.parametrize("json_only", [True, False], ids=["json_only", "typed"])
def test_bus_counts_events_it_cannot_build(tmp_path: Path, json_only: bool) -> None:
    bus = EventBus()
    jsonl = JsonlRecorder(tmp_path / "trace.jsonl")
    bus.subscribe(jsonl)
    recorder = MemoryRecorder()
    if not json_only:
        bus.subscribe(recorder)
    bus.begin_episode("e")
    assert bus.emit(ActionEvent, step=Opaque(), action=[0.0]) is None  # neither an int nor serialisable
    assert bus.dropped == 1
    assert bus.seq == 0, "a dropped event takes no sequence number"
    good = bus.emit(AgentDecisionEvent, content={"ok": True})
    assert bus.dropped == 1
    assert not bus.detached
    jsonl.close()
    lines = (tmp_path / "trace.jsonl").read_bytes().splitlines()
    assert [parse_event(line).event for line in lines] == ["agent.decision"]
    assert parse_event(lines[0]).seq == 0
    if not json_only:
        assert good is not None
        assert recorder.kinds() == ["agent.decision"]


def test_typed_bus_counts_an_event_with_a_missing_field() -> None:
    bus = EventBus()
    bus.subscribe(MemoryRecorder())
    assert bus.emit(ActionEvent, action=[0.0]) is None  # `step` is required
    assert bus.dropped == 1


# -- bind time ---------------------------------------------------------------------------------------------------------


class PrivilegedReader:
    requirements = AgentRequirements(privileged_state=True)

    def act(self, obs: Observation) -> Any:
        return ActionChunk([ZERO])


def test_privileged_agent_on_an_env_without_privileged_state_is_refused() -> None:
    env = StepEnv(privileged=False)
    with pytest.raises(IncompatibleComponents, match="privileged"):
        Kernel(env, PrivilegedReader())
    assert env.resets == 0


def test_privileged_agent_cannot_be_isolated() -> None:
    env = StepEnv(privileged=True)
    Kernel(env, PrivilegedReader())  # in-process, it binds
    with pytest.raises(IncompatibleComponents, match="privileged"):
        Kernel(env, PrivilegedReader(), act_timeout_s=1.0, hard_timeout=True)
    with pytest.raises(IncompatibleComponents, match="privileged"):
        Kernel(GridGoal(), GridGoalExpert(), act_timeout_s=1.0, hard_timeout=True)
    assert env.resets == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"refill_steps": 1.5}, "refill_steps"),
        ({"refill_steps": True}, "refill_steps"),
        ({"max_hold_steps": True}, "max_hold_steps"),
        ({"max_hold_steps": 2.0}, "max_hold_steps"),
    ],
)
def test_realtime_timing_refuses_non_integer_counts(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RealtimeTiming(**kwargs)


# -- one kernel, many broken episodes ----------------------------------------------------------------------------------


def test_a_kernel_goes_on_after_a_broken_episode() -> None:
    results: list[Any] = [StepResult(Observation(t=np.zeros(1)), None)]  # type: ignore[arg-type]
    env = StepEnv(lambda t, obs: results[0])
    kernel = Kernel(env, Recording())
    statuses = [kernel.run(TASK).status]
    results[0] = StepResult(Observation(t=np.zeros(1)), 0.0, False, False, True)
    statuses.append(kernel.run(TASK).status)
    assert statuses == [EpisodeStatus.INFRA_INVALID, EpisodeStatus.SUCCESS]
