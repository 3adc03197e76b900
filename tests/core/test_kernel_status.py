"""Every way an episode can end: status, reason, steps — and `Kernel.run` never raises."""

from __future__ import annotations

import time
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.core import (
    ActionChunk,
    AgentRequirements,
    Environment,
    EnvSpec,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    IncompatibleComponents,
    InvalidAction,
    Kernel,
    MemoryRecorder,
    Observation,
    SimulationDiverged,
    StepResult,
    TaskInstance,
)
from hylo.envs import GridGoal, GridGoalExpert, NullEnv, PointReach, PointReachExpert

TASK = TaskInstance(benchmark="test", task="status")
ZERO = np.zeros(2, np.float32)


class ScriptedEnv(Environment):
    """A 2-D Box-action env whose observation is the step count; how it ends (or breaks) is scripted.

    `success_at=n`: every step from the n-th on reports success (without terminating: the env would run on).
    `step_error=(n, exc)`: the n-th step raises `exc`.
    """

    def __init__(
        self,
        *,
        max_episode_steps: int = 20,
        success_at: int | None = None,
        terminate_at: int | None = None,
        truncate_at: int | None = None,
        step_error: tuple[int, BaseException] | None = None,
        reset_error: BaseException | None = None,
    ) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict({"state": spaces.Box(0.0, np.inf, (1,), np.float32)}),
            action_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
            control_rate_hz=10.0,
            max_episode_steps=max_episode_steps,
            name="scripted",
        )
        self.success_at = success_at
        self.terminate_at = terminate_at
        self.truncate_at = truncate_at
        self.step_error = step_error
        self.reset_error = reset_error
        self.t = 0
        self.resets = 0
        self.actions: list[Any] = []

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self, task: TaskInstance) -> Observation:
        self.resets += 1
        if self.reset_error is not None:
            raise self.reset_error
        self.t = 0
        self.actions = []
        return self.observe()

    def step(self, action: Any) -> StepResult:
        if self.step_error is not None and self.t + 1 == self.step_error[0]:
            raise self.step_error[1]
        self.actions.append(np.array(action, copy=True))
        self.t += 1
        success = self.success_at is not None and self.t >= self.success_at
        terminated = self.t == self.terminate_at
        truncated = self.t == self.truncate_at
        return StepResult(self.observe(), 1.0 if success else 0.0, terminated, truncated, success)

    def observe(self) -> Observation:
        return Observation(state=np.array([self.t], np.float32))


class ScriptAgent:
    """Returns `script[k]` (any value: a chunk, a bare action, None...) at its k-th act, ZERO once the script runs out.

    `fail={"act": n, ...}` makes the n-th call (0-based) of that hook raise `error`; `sleep_at` makes one act slow.
    """

    def __init__(
        self,
        script: list[Any] | None = None,
        *,
        fail: dict[str, int] | None = None,
        error: Exception | None = None,
        sleep_at: int | None = None,
        sleep_s: float = 0.2,
        decide: bool = False,
    ) -> None:
        self.script = list(script or [])
        self.fail = fail or {}
        self.error = error or ValueError("bad plan")
        self.sleep_at = sleep_at
        self.sleep_s = sleep_s
        self.decide = decide
        self.calls: dict[str, int] = {"reset": 0, "act": 0, "on_step": 0, "on_episode_end": 0}
        self.act_obs: list[float] = []
        self.outcomes: list[EpisodeOutcome] = []

    def _hook(self, name: str) -> None:
        n = self.calls[name]
        self.calls[name] += 1
        if self.fail.get(name) == n:
            raise self.error

    def reset(self, ctx: Any) -> None:
        self.ctx = ctx
        self._hook("reset")

    def act(self, obs: Observation) -> Any:
        k = self.calls["act"]
        self.act_obs.append(float(obs["state"][0]))
        self._hook("act")
        if k == self.sleep_at:
            time.sleep(self.sleep_s)
        if self.decide:
            self.ctx.emit("agent.decision", {"call": k})
        return self.script[k] if k < len(self.script) else ActionChunk([ZERO])

    def on_step(self, result: StepResult) -> None:
        self._hook("on_step")

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self.outcomes.append(outcome)
        if self.decide:
            self.ctx.emit("memory.write", {"status": outcome.status.value})
        self._hook("on_episode_end")


def run(env: Environment, agent: Any, **kwargs: Any) -> tuple[EpisodeOutcome, MemoryRecorder]:
    """Run one traced episode; checks what every path must do: return an outcome, trace exactly one matching
    `episode.end`, and hand the same outcome to the agent's `on_episode_end`."""
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    kernel = Kernel(env, agent, bus=bus, **kwargs)
    outcome = kernel.run(TASK)  # must never raise for what happens inside the episode
    assert isinstance(outcome, EpisodeOutcome)
    assert outcome.success == (outcome.status is EpisodeStatus.SUCCESS)
    ends = recorder.of("episode.end")
    assert len(ends) == 1
    assert (ends[0].status, ends[0].reason, ends[0].steps, ends[0].success) == (
        outcome.status.value,
        outcome.reason,
        outcome.steps,
        outcome.success,
    )
    assert ends[0].safety_interventions == outcome.safety_interventions
    if isinstance(agent, ScriptAgent):
        assert [o.status for o in agent.outcomes] == [outcome.status]
    return outcome, recorder


# -- success -----------------------------------------------------------------------------------------------------------


def test_success() -> None:
    env = ScriptedEnv(success_at=3)
    outcome, _ = run(env, ScriptAgent())
    assert outcome.status is EpisodeStatus.SUCCESS
    assert outcome.success is True
    assert outcome.reason == "success"
    assert outcome.steps == 3
    assert outcome.status.score == 1


def test_success_with_builtin_env_and_expert() -> None:
    outcome, _ = run(PointReach(), PointReachExpert())
    assert outcome.status is EpisodeStatus.SUCCESS
    assert outcome.reason == "success"
    assert 1 <= outcome.steps < 60


def test_episode_ends_at_first_success_even_if_env_runs_on() -> None:
    env = ScriptedEnv(success_at=2, max_episode_steps=50)  # success is reported from step 2 on, never terminates
    agent = ScriptAgent([ActionChunk([ZERO] * 10)])  # a plan longer than the episode needs
    outcome, recorder = run(env, agent)
    assert outcome.status is EpisodeStatus.SUCCESS
    assert outcome.reason == "success"
    assert outcome.steps == 2
    assert env.t == 2, "the env must not be stepped past the first success"
    assert len(recorder.of("step.result")) == 2


def test_null_env_success_at_stops_the_episode() -> None:
    env = NullEnv(max_episode_steps=100, success_at=4)
    outcome, _ = run(env, ScriptAgent([np.zeros(7, np.float32)] * 10))
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 4)


def test_success_on_the_last_budgeted_step_is_success() -> None:
    outcome, _ = run(ScriptedEnv(success_at=5), ScriptAgent(), max_steps=5)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 5)


@pytest.mark.parametrize("ending", ["terminate_at", "truncate_at"])
def test_success_wins_over_an_ending_on_the_same_step(ending: str) -> None:
    env = ScriptedEnv(success_at=3, **{ending: 3})
    outcome, _ = run(env, ScriptAgent())
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 3)


# -- failure -----------------------------------------------------------------------------------------------------------


def test_failure_on_step_budget() -> None:
    env = ScriptedEnv(max_episode_steps=20)
    outcome, _ = run(env, ScriptAgent(), max_steps=4)
    assert outcome.status is EpisodeStatus.FAILURE
    assert outcome.success is False
    assert outcome.reason == "max_steps"
    assert outcome.steps == 4
    assert env.t == 4
    assert outcome.status.score == 0


def test_step_budget_defaults_to_the_envs_max_episode_steps() -> None:
    outcome, _ = run(NullEnv(max_episode_steps=6), ScriptAgent([np.zeros(7, np.float32)] * 6))
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 6)


def test_failure_on_truncation() -> None:
    env = ScriptedEnv(truncate_at=3)
    outcome, _ = run(env, ScriptAgent())
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "truncated", 3)
    assert env.t == 3


def test_failure_on_termination_without_success() -> None:
    env = ScriptedEnv(terminate_at=2)
    outcome, _ = run(env, ScriptAgent())
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "terminated", 2)
    assert outcome.success is False
    assert env.t == 2


# -- error: the agent's fault ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("at", [0, 2])
def test_error_when_agent_raises_in_act(at: int) -> None:
    env = ScriptedEnv()
    agent = ScriptAgent(fail={"act": at}, error=ValueError("bad plan"))
    outcome, _ = run(env, agent)
    assert outcome.status is EpisodeStatus.ERROR
    assert outcome.success is False
    assert "ValueError" in outcome.reason
    assert "bad plan" in outcome.reason
    assert outcome.steps == at
    assert env.t == at
    assert outcome.status.score is None  # abstains


def test_error_when_agent_raises_in_reset() -> None:
    env = ScriptedEnv()
    agent = ScriptAgent(fail={"reset": 0}, error=KeyError("no weights"))
    outcome, _ = run(env, agent)
    assert outcome.status is EpisodeStatus.ERROR
    assert "KeyError" in outcome.reason
    assert "no weights" in outcome.reason
    assert outcome.steps == 0
    assert agent.calls["act"] == 0
    assert env.t == 0


def test_error_when_agent_raises_in_on_step() -> None:
    env = ScriptedEnv()
    agent = ScriptAgent(fail={"on_step": 1}, error=RuntimeError("memory full"))
    outcome, _ = run(env, agent)
    assert outcome.status is EpisodeStatus.ERROR
    assert "RuntimeError" in outcome.reason
    assert "memory full" in outcome.reason
    assert outcome.steps == 2  # the step whose on_step raised was executed
    assert env.t == 2


def test_error_on_act_timeout() -> None:
    env = ScriptedEnv()
    agent = ScriptAgent(sleep_at=1, sleep_s=0.2)  # the second act is too slow
    outcome, recorder = run(env, agent, act_timeout_s=0.05)
    assert outcome.status is EpisodeStatus.ERROR
    assert outcome.reason == "timeout"
    assert outcome.steps == 1
    assert env.t == 1, "a chunk that arrived too late must not be executed"
    assert len(recorder.of("agent.chunk")) == 1
    assert outcome.status.score is None


def test_fast_agent_is_not_timed_out() -> None:
    outcome, _ = run(ScriptedEnv(), ScriptAgent(), act_timeout_s=5.0, max_steps=3)
    assert (outcome.status, outcome.reason) == (EpisodeStatus.FAILURE, "max_steps")


def test_error_when_agent_returns_none() -> None:
    env = ScriptedEnv()
    outcome, _ = run(env, ScriptAgent([ActionChunk([ZERO]), None]))
    assert outcome.status is EpisodeStatus.ERROR
    assert "None" in outcome.reason
    assert outcome.steps == 1
    assert env.t == 1


@pytest.mark.parametrize("empty", [[], ()], ids=["list", "tuple"])
def test_error_when_agent_returns_an_empty_chunk(empty: Any) -> None:
    env = ScriptedEnv()
    outcome, recorder = run(env, ScriptAgent([empty]))
    assert outcome.status is EpisodeStatus.ERROR, outcome.reason
    assert outcome.steps == 0
    assert env.t == 0
    assert recorder.of("action") == []


def test_an_action_chunk_cannot_be_emptied_after_construction() -> None:
    chunk = ActionChunk([ZERO, ZERO])
    with pytest.raises(AttributeError, match="cannot change"):
        chunk.actions = ()  # type: ignore[misc]  # e.g. an agent that filtered its own plan down to nothing
    with pytest.raises(ValueError, match="read-only"):
        chunk.actions[0][0] = 1.0
    assert len(chunk) == 2


def test_error_when_agent_builds_an_empty_action_chunk() -> None:
    class EmptyChunkAgent:
        def act(self, obs: Observation) -> ActionChunk:
            return ActionChunk([])

    env = ScriptedEnv()
    outcome, _ = run(env, EmptyChunkAgent())
    assert outcome.status is EpisodeStatus.ERROR
    assert "ValueError" in outcome.reason
    assert outcome.steps == 0
    assert env.t == 0


def test_agent_failing_in_on_episode_end_keeps_the_verdict() -> None:
    agent = ScriptAgent(fail={"on_episode_end": 0}, error=RuntimeError("cannot save memory"))
    outcome, _ = run(ScriptedEnv(success_at=2), agent)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.SUCCESS, "success", 2)


# -- infra_invalid: the environment's fault ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "names"),
    [
        (RuntimeError("sim crashed"), ("RuntimeError", "sim crashed")),
        (SimulationDiverged("BADQPOS"), ("BADQPOS",)),
    ],
)
def test_infra_invalid_when_env_reset_raises(error: Exception, names: tuple[str, ...]) -> None:
    env = ScriptedEnv(reset_error=error)
    agent = ScriptAgent()
    outcome, _ = run(env, agent)
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert outcome.success is False
    for name in names:
        assert name in outcome.reason
    assert outcome.steps == 0
    assert agent.calls["act"] == 0
    assert outcome.status.score is None


def test_infra_invalid_when_env_step_raises() -> None:
    env = ScriptedEnv(step_error=(3, ConnectionError("socket closed")))
    agent = ScriptAgent()
    outcome, recorder = run(env, agent)
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert "ConnectionError" in outcome.reason
    assert "socket closed" in outcome.reason
    assert outcome.steps == 2
    assert agent.calls["on_step"] == 2, "on_step is not called for a step that never happened"
    assert len(recorder.of("step.result")) == 2


@pytest.mark.parametrize("warning", ["BADQPOS", "BADQVEL", "BADQACC"])
def test_infra_invalid_when_simulation_diverges(warning: str) -> None:
    env = ScriptedEnv(step_error=(2, SimulationDiverged(warning, "at t=0.1")))
    outcome, _ = run(env, ScriptAgent())
    assert outcome.status is EpisodeStatus.INFRA_INVALID
    assert warning in outcome.reason
    assert outcome.steps == 1


def test_error_not_infra_invalid_when_env_rejects_the_action() -> None:
    env = ScriptedEnv(step_error=(1, InvalidAction("BADCTRL: control out of range")))
    outcome, _ = run(env, ScriptAgent())
    assert outcome.status is EpisodeStatus.ERROR
    assert "BADCTRL" in outcome.reason
    assert outcome.steps == 0


# -- safety_abort ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("at", [0, 2])
def test_safety_abort_on_nan_action_with_default_shield(at: int) -> None:
    env = ScriptedEnv()
    bad = np.array([np.nan, 0.0], np.float32)
    agent = ScriptAgent([ActionChunk([ZERO])] * at + [ActionChunk([bad])])
    outcome, recorder = run(env, agent)
    assert outcome.status is EpisodeStatus.SAFETY_ABORT
    assert outcome.success is False
    assert outcome.steps == at
    assert "finite" in outcome.reason
    assert env.t == at, "a rejected action must never reach the env"
    assert outcome.status.score == 0
    reviews = recorder.of("safety.review")
    assert len(reviews) == at + 1
    assert reviews[-1].approved is False
    assert reviews[-1].guard == "finite"
    assert all(r.approved for r in reviews[:-1])
    assert len(recorder.of("action")) == at


def test_safety_interventions_count_clips() -> None:
    env = ScriptedEnv()
    far = np.array([3.0, 0.0], np.float32)
    script = [ActionChunk([a]) for a in (far, ZERO, far, far, ZERO)]
    outcome, recorder = run(env, ScriptAgent(script), max_steps=5)
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 5)
    assert outcome.safety_interventions == 3
    assert [r.modified for r in recorder.of("safety.review")] == [True, False, True, True, False]
    np.testing.assert_allclose(env.actions[0], [1.0, 0.0])  # the env received the clipped action


def test_no_interventions_when_every_action_is_in_bounds() -> None:
    outcome, _ = run(ScriptedEnv(), ScriptAgent(), max_steps=3)
    assert outcome.safety_interventions == 0


# -- bind-time incompatibility -----------------------------------------------------------------------------------------


class NeedsAgent:
    def __init__(self, requirements: AgentRequirements) -> None:
        self.requirements = requirements
        self.acts = 0

    def act(self, obs: Observation) -> ActionChunk:
        self.acts += 1
        return ActionChunk([ZERO])


def _refused(env: ScriptedEnv, agent: Any) -> str:
    bus = EventBus()
    recorder = MemoryRecorder()
    bus.subscribe(recorder)
    with pytest.raises(IncompatibleComponents) as info:
        Kernel(env, agent, bus=bus)
    assert env.resets == 0, "an incompatible run must not start"
    assert recorder.events == []
    return str(info.value)


@pytest.mark.parametrize("key", ["images", "instruction", "state/joints"])
def test_incompatible_missing_observation_key(key: str) -> None:
    agent = NeedsAgent(AgentRequirements(observation_keys=(key,)))
    message = _refused(ScriptedEnv(), agent)
    assert repr(key) in message
    assert agent.acts == 0


def test_incompatible_needs_images() -> None:
    message = _refused(ScriptedEnv(), NeedsAgent(AgentRequirements(needs_images=True)))
    assert "image" in message


def test_incompatible_action_space_mismatch() -> None:
    wanted = spaces.Box(-1.0, 1.0, (7,), np.float32)
    message = _refused(ScriptedEnv(), NeedsAgent(AgentRequirements(action_space=wanted)))
    assert "(7,)" in message  # what the agent acts in
    assert "(2,)" in message  # what the env takes


def test_incompatible_builtin_expert_on_the_wrong_env() -> None:
    with pytest.raises(IncompatibleComponents, match=r"Discrete\(4\)"):
        Kernel(PointReach(), GridGoalExpert())
    with pytest.raises(IncompatibleComponents, match="instruction"):
        Kernel(NullEnv(), PointReachExpert())


def test_incompatible_names_every_problem() -> None:
    agent = NeedsAgent(
        AgentRequirements(observation_keys=("wrist",), action_space=spaces.Discrete(3)),
    )
    message = _refused(ScriptedEnv(), agent)
    assert "'wrist'" in message
    assert "Discrete(3)" in message


def test_incompatible_when_agent_has_no_act() -> None:
    class NotAnAgent:
        def reset(self, ctx: Any) -> None: ...

    message = _refused(ScriptedEnv(), NotAnAgent())
    assert "act" in message


def test_compatible_agent_binds() -> None:
    outcome, _ = run(GridGoal(), GridGoalExpert())
    assert outcome.status is EpisodeStatus.SUCCESS


# -- trace -------------------------------------------------------------------------------------------------------------


def _kinds(recorder: MemoryRecorder) -> list[str]:
    return [kind for kind in recorder.kinds() if kind != "signal"]


def test_trace_order_follows_the_sequence_diagram() -> None:
    env = ScriptedEnv(success_at=2)
    outcome, recorder = run(env, ScriptAgent())
    assert outcome.status is EpisodeStatus.SUCCESS
    step = ["agent.chunk", "safety.review", "action", "step.result", "observation"]
    assert _kinds(recorder) == ["episode.start", "observation", *step, *step, "episode.end"]
    assert recorder.of("signal"), "signal events interleave with the trace"
    seqs = [e.seq for e in recorder.events]
    assert seqs == sorted(seqs)


def test_trace_order_with_a_chunk_and_agent_events() -> None:
    env = ScriptedEnv(success_at=3)
    agent = ScriptAgent([ActionChunk([ZERO, ZERO, ZERO])], decide=True)
    outcome, recorder = run(env, agent)
    assert outcome.steps == 3
    step = ["safety.review", "action", "step.result", "observation"]
    assert _kinds(recorder) == [
        "episode.start",
        "observation",
        "agent.decision",
        "agent.chunk",
        *step,
        *step,
        *step,
        "episode.end",
        "memory.write",
    ]


def test_trace_episode_start_and_end_payloads() -> None:
    outcome, recorder = run(ScriptedEnv(), ScriptAgent(), max_steps=2)
    (start,) = recorder.of("episode.start")
    assert start.seed == TASK.seed
    assert start.agent == "ScriptAgent"
    assert start.guards == ["finite", "bounds"]
    assert start.task["episode_id"] == TASK.episode_id
    (end,) = recorder.of("episode.end")
    assert (end.status, end.reason, end.steps) == ("failure", "max_steps", 2)
    assert outcome.steps == 2
    # action k and the result of executing it carry the same (0-based) step index
    assert [e.step for e in recorder.of("step.result")] == [0, 1]
    assert [e.step for e in recorder.of("action")] == [0, 1]


# -- EpisodeOutcome ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", list(EpisodeStatus))
def test_an_outcomes_success_follows_from_its_status(status: EpisodeStatus) -> None:
    outcome = EpisodeOutcome(status, 3, "why")
    assert outcome.success is (status is EpisodeStatus.SUCCESS)
    assert outcome.to_json()["success"] is outcome.success
    assert EpisodeOutcome.ended(status, 3, "why") == outcome


def test_an_outcome_built_by_position_or_by_keyword_is_the_same_outcome() -> None:
    positional = EpisodeOutcome(EpisodeStatus.FAILURE, 4, "max_steps", metrics={"return": 1.0})
    keyword = EpisodeOutcome(status=EpisodeStatus.FAILURE, steps=4, reason="max_steps", metrics={"return": 1.0})
    assert positional == keyword == EpisodeOutcome.ended(EpisodeStatus.FAILURE, 4, "max_steps", metrics={"return": 1.0})
    assert keyword.success is False
    assert EpisodeOutcome.ended(EpisodeStatus.FAILURE, 4, "max_steps", metrics=None).metrics == {}
    with pytest.raises(TypeError):  # the optional members by name only: `(status, success, steps, reason)` is refused
        EpisodeOutcome(EpisodeStatus.FAILURE, False, 4, "max_steps")  # type: ignore[call-arg, misc]
    with pytest.raises(TypeError):  # `success` follows from the status: it is not given, so it cannot contradict it
        EpisodeOutcome(EpisodeStatus.ERROR, 0, "agent raised", success=True)  # type: ignore[call-arg]


class SizedByTask(NullEnv):
    """A NullEnv whose action and state size is the task's (`task.index`), as ManiSkill's state size is."""

    def reset(self, task: TaskInstance) -> Observation:
        if task.index != self._hold.shape[0]:
            self.__init__(dim=task.index, max_episode_steps=5)  # type: ignore[misc]
        return super().reset(task)


class TwoDimensional(ScriptAgent):
    requirements = AgentRequirements(action_space=spaces.Box(-1.0, 1.0, (2,)))

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(np.zeros(2, np.float32))


def test_an_env_whose_spaces_follow_the_task_is_checked_again_at_each_episode() -> None:
    env = SizedByTask(dim=2, max_episode_steps=5)
    agent = TwoDimensional()
    with Kernel(env, agent, max_steps=3) as kernel:
        fits = kernel.run(TaskInstance(benchmark="test", task="sized", index=2))
        refused = kernel.run(TaskInstance(benchmark="test", task="sized", index=3))
        again = kernel.run(TaskInstance(benchmark="test", task="sized", index=2))
    assert (fits.status, fits.steps) == (EpisodeStatus.FAILURE, 3)
    assert (refused.status, refused.reason, refused.steps) == (EpisodeStatus.ERROR, "incompatible", 0)
    assert "acts in Box(-1.0, 1.0, (2,), float32) but env 'null' takes Box(-1.0, 1.0, (3,), float32)" in (
        refused.detail or ""
    )
    assert (again.status, again.steps) == (EpisodeStatus.FAILURE, 3)
