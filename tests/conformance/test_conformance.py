"""The conformance suite: the built-in envs and experts pass it, and each deliberately broken component fails it
under the rule it breaks, with a message that names the offending value."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.conformance import (
    AgentConformance,
    ConformanceError,
    ConformanceWarning,
    EnvironmentConformance,
    Rule,
    check_agent,
    check_environment,
    first_difference,
)
from hylo.core import (
    ActionChunk,
    AgentBase,
    AgentRequirements,
    EnvCapabilities,
    Environment,
    EnvSpec,
    EpisodeContext,
    Observation,
    StepResult,
    TaskInstance,
)
from hylo.envs import GridGoal, GridGoalExpert, NullEnv, PointReach, PointReachExpert


def point_reach_policy(obs: Mapping[str, Any]) -> Any:
    """Drives PointReach episodes to their end, so the rules about ended episodes are exercised."""
    return PointReachExpert().act(Observation(obs)).actions[0]


# -- the built-in components pass ---------------------------------------------------------------------------------


class TestNullEnv(EnvironmentConformance):
    randomized = False  # its episodes do not depend on the seed

    def make_env(self) -> Environment:
        return NullEnv(success_at=5)


class TestPointReach(EnvironmentConformance):
    def make_env(self) -> Environment:
        return PointReach()

    def make_policy(self) -> Callable[[Mapping[str, Any]], Any]:
        return point_reach_policy


class TestPointReachRendered(EnvironmentConformance):
    def make_env(self) -> Environment:
        return PointReach(render=True, image_size=32)

    def make_policy(self) -> Callable[[Mapping[str, Any]], Any]:
        return point_reach_policy

    def make_tasks(self) -> list[TaskInstance]:
        return [TaskInstance("point_reach", "reach", index=i, params={"color": "blue"}) for i in range(2)]


class TestGridGoal(EnvironmentConformance):
    def make_env(self) -> Environment:
        return GridGoal()


class TestPointReachExpert(AgentConformance):
    def make_agent(self) -> PointReachExpert:
        return PointReachExpert()

    def make_env(self) -> Environment:
        return PointReach()


class TestPointReachExpertChunked(AgentConformance):
    def make_agent(self) -> PointReachExpert:
        return PointReachExpert(chunk=4)

    def make_env(self) -> Environment:
        return PointReach(render=True, image_size=32)


class TestGridGoalExpert(AgentConformance):
    def make_agent(self) -> GridGoalExpert:
        return GridGoalExpert()

    def make_env(self) -> Environment:
        return GridGoal()


def test_check_functions_pass_the_builtins() -> None:
    check_environment(lambda: NullEnv(success_at=3), randomized=False)
    check_environment(PointReach, policy=point_reach_policy)
    check_environment(GridGoal)
    check_agent(PointReachExpert, PointReach)
    check_agent(GridGoalExpert, GridGoal)


def test_an_episode_that_never_ends_is_reported_as_unchecked_not_as_passed() -> None:
    with pytest.warns(ConformanceWarning) as caught:
        check_environment(NullEnv, randomized=False, steps=5)
    messages = sorted(str(warning.message) for warning in caught)
    assert [m.split("]")[0] for m in messages] == ["[observe-terminal", "[reset-ensure-live"]
    assert all("no episode ended within 5 steps" in m for m in messages)


# -- a reference env, and broken variants that each break one rule --------------------------------------------------


class WalkEnv(Environment):
    """A correct 2-D walk: the start comes from the seed, every episode succeeds (and terminates) at step 6."""

    END = 6

    def __init__(self) -> None:
        self._spec = EnvSpec(
            observation_space=spaces.Dict(
                {"state": spaces.Box(-10.0, 10.0, (2,), np.float32), "instruction": spaces.Text(32)}
            ),
            action_space=spaces.Box(-1.0, 1.0, (2,), np.float32),
            max_episode_steps=20,
            name="walk",
        )
        self._pos = np.zeros(2)
        self._t = 0
        self._done = False
        self._obs = self._observation()

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return EnvCapabilities(hold_action=True)

    def reset(self, task: TaskInstance) -> Observation:
        self._pos = np.random.default_rng(task.seed).uniform(-1.0, 1.0, 2)
        self._t = 0
        self._done = False
        self._obs = self._observation()
        return self._obs

    def step(self, action: Any) -> StepResult:
        if self._done:
            raise RuntimeError("step after the episode ended; reset first")
        self._pos = np.clip(self._pos + 0.5 * np.asarray(action, np.float64), -10.0, 10.0)
        self._t += 1
        self._done = self._t >= self.END
        self._obs = self._observation()
        return StepResult(self._obs, -float(np.abs(self._pos).sum()), self._done, False, self._done)

    def observe(self) -> Observation:
        return self._obs

    def hold_action(self) -> Any:
        return np.zeros(2, np.float32)

    def _observation(self) -> Observation:
        return Observation(state=self._pos.astype(np.float32), instruction="walk")


class ObserveAdvancesEnv(WalkEnv):
    """observe() nudges the simulation (as a `sim.forward()` with side effects would)."""

    def observe(self) -> Observation:
        self._pos = self._pos + 0.01
        return self._obs


class StickyResetEnv(WalkEnv):
    """reset() to the task already placed is a no-op: it neither revives an ended episode nor restarts a live one."""

    def __init__(self) -> None:
        super().__init__()
        self._task: TaskInstance | None = None

    def reset(self, task: TaskInstance) -> Observation:
        if task == self._task:
            return self._obs
        self._task = task
        return super().reset(task)


class WrongDtypeEnv(WalkEnv):
    def _observation(self) -> Observation:
        return Observation(state=self._pos.copy(), instruction="walk")  # float64 for a float32 Box


class OutOfBoundsEnv(WalkEnv):
    def _observation(self) -> Observation:
        return Observation(state=np.array([self._pos[0], 99.0], np.float32), instruction="walk")


class MissingKeyEnv(WalkEnv):
    def _observation(self) -> Observation:
        return Observation(state=self._pos.astype(np.float32))


class SeedIgnoringEnv(WalkEnv):
    """Draws its start from a generator seeded once per env, not from task.seed: fresh envs agree, episodes don't."""

    def __init__(self) -> None:
        super().__init__()
        self._rng = np.random.default_rng(0)

    def reset(self, task: TaskInstance) -> Observation:
        super().reset(task)
        self._pos = self._rng.uniform(-1.0, 1.0, 2)
        self._obs = self._observation()
        return self._obs


class UnseededEnv(WalkEnv):
    def reset(self, task: TaskInstance) -> Observation:
        super().reset(task)
        self._pos = np.random.default_rng().uniform(-1.0, 1.0, 2)
        self._obs = self._observation()
        return self._obs


class SeedlessEnv(WalkEnv):
    """Deterministic, but every seed gives the same episode."""

    def reset(self, task: TaskInstance) -> Observation:
        super().reset(task)
        self._pos = np.array([0.25, -0.25])
        self._obs = self._observation()
        return self._obs


class BufferEnv(WalkEnv):
    """Returns a view of one buffer it overwrites in place, so earlier observations change under the agent."""

    def __init__(self) -> None:
        self._buffer = np.zeros(2, np.float32)
        super().__init__()

    def _observation(self) -> Observation:
        self._buffer[:] = self._pos
        return Observation(state=self._buffer, instruction="walk")


class IntFlagEnv(WalkEnv):
    def step(self, action: Any) -> StepResult:
        result = super().step(action)
        return result._replace(terminated=int(result.terminated))  # type: ignore[arg-type]  # the defect under test


class NanRewardEnv(WalkEnv):
    def step(self, action: Any) -> StepResult:
        return super().step(action)._replace(reward=float("nan"))


class PickyEnv(WalkEnv):
    def step(self, action: Any) -> StepResult:
        if float(np.asarray(action)[0]) < -0.5:
            raise ValueError(f"cannot move left that fast: {action}")
        return super().step(action)


class StaleTerminalEnv(WalkEnv):
    """After the end, observe() shows the first frame again instead of the terminal one."""

    def reset(self, task: TaskInstance) -> Observation:
        self._first = super().reset(task)
        return self._first

    def observe(self) -> Observation:
        return self._first if self._done else self._obs


class BadHoldEnv(WalkEnv):
    def hold_action(self) -> Any:
        return np.zeros(3, np.float32)


class BadCloseEnv(WalkEnv):
    def close(self) -> None:
        raise OSError("simulator socket already gone")


class BoxObservationEnv(WalkEnv):
    @property
    def spec(self) -> EnvSpec:
        return EnvSpec(spaces.Box(-10.0, 10.0, (2,), np.float32), self._spec.action_space, name="walk")


class TestWalkEnv(EnvironmentConformance):
    """The reference env passes: each broken variant below fails for its one defect, not for the harness."""

    def make_env(self) -> Environment:
        return WalkEnv()


@pytest.mark.parametrize(
    ("env_class", "rule", "message"),
    [
        (ObserveAdvancesEnv, Rule.OBSERVE_PURE, r"step 1 .* differs when observe\(\) is called.*obs\['state'\]"),
        (StickyResetEnv, Rule.RESET_ENSURE_LIVE, r"reset\(.*\) after 3 steps returned another first observation"),
        (WrongDtypeEnv, Rule.OBSERVATION_SPACE, r"obs\['state'\] has dtype float64, but Box.* has dtype float32"),
        (OutOfBoundsEnv, Rule.OBSERVATION_SPACE, r"obs\['state'\]\[1\] = 99\.0 is outside \[-10\.0, 10\.0\]"),
        (MissingKeyEnv, Rule.OBSERVATION_SPACE, r"missing \['instruction'\]"),
        (SeedIgnoringEnv, Rule.DETERMINISTIC, r"after an episode of .* carries over between episodes"),
        (UnseededEnv, Rule.DETERMINISTIC, r"two fresh envs .* differ at the reset observation: obs\['state'\]\[0\]"),
        (SeedlessEnv, Rule.SEED_VARIES, r"rolled out identically under seeds"),
        (BufferEnv, Rule.OBSERVATION_STABLE, r"returned by reset\(.*\) changed afterwards"),
        (IntFlagEnv, Rule.STEP_RESULT, r"terminated is 0 of type int, not a bool"),
        (NanRewardEnv, Rule.STEP_RESULT, r"reward is nan, not finite"),
        (PickyEnv, Rule.SAMPLED_ACTIONS, r"step\(array\(\[-0\.\d+.*raised ValueError: cannot move left"),
        (StaleTerminalEnv, Rule.OBSERVE_TERMINAL, r"ended at step 6, the first observe\(\) differs"),
        (BadHoldEnv, Rule.HOLD_ACTION, r"hold_action\(\) has shape \(3,\), but Box.* has shape \(2,\)"),
        (BadCloseEnv, Rule.CLOSE, r"close\(\) on a fresh env raised OSError: simulator socket already gone"),
        (BoxObservationEnv, Rule.SPEC, r"observation_space is Box.*not a gymnasium spaces\.Dict"),
    ],
)
def test_a_broken_env_fails_under_the_rule_it_breaks(env_class: type[WalkEnv], rule: Rule, message: str) -> None:
    with pytest.raises(ConformanceError, match=message) as caught:
        check_environment(env_class)
    assert caught.value.rule is rule
    assert str(caught.value).startswith(f"[{rule.value}] ")


def test_each_mixin_test_checks_only_its_own_rule() -> None:
    class ObserveAdvances(EnvironmentConformance):  # not collected: the name does not start with Test
        def make_env(self) -> Environment:
            return ObserveAdvancesEnv()

    suite = ObserveAdvances()
    suite.test_spec()
    suite.test_deterministic()
    suite.test_reset_ensure_live()
    with pytest.raises(ConformanceError) as caught:
        suite.test_observe_pure()
    assert caught.value.rule is Rule.OBSERVE_PURE


def test_randomized_false_waives_seed_varies() -> None:
    check_environment(SeedlessEnv, randomized=False)


# -- agents -------------------------------------------------------------------------------------------------------


class SeededRandomAgent(AgentBase):
    """Random, but only through ctx.rng: the right way, so it passes."""

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk(list(self.ctx.rng.uniform(-1.0, 1.0, (3, 2)).astype(np.float32)), execution_steps=2)


class BatchedSeededAgent(SeededRandomAgent):
    """Batched the right way: each episode's actions come from its own context, a batch of one is act."""

    def act_batch(self, observations: Any, contexts: Any) -> list[ActionChunk]:
        return [
            ActionChunk(list(ctx.rng.uniform(-1.0, 1.0, (3, 2)).astype(np.float32)), execution_steps=2)
            for ctx in contexts
        ]


class SharedRngBatchAgent(SeededRandomAgent):
    """Its act_batch draws from the agent's own generator, not the episode's: a batch of one is not act."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(12345)

    def act_batch(self, observations: Any, contexts: Any) -> list[ActionChunk]:
        return [
            ActionChunk(list(self.rng.uniform(-1.0, 1.0, (3, 2)).astype(np.float32)), execution_steps=2)
            for _ in contexts
        ]


class TwoForOneBatchAgent(SeededRandomAgent):
    def act_batch(self, observations: Any, contexts: Any) -> list[ActionChunk]:
        return [self.act(observations[0])] * 2


class OutOfBoundsAgent(AgentBase):
    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk([np.zeros(2, np.float32), np.array([0.0, 1.5], np.float32)])


class PlanWithoutChunkAgent(AgentBase):
    def act(self, obs: Observation) -> Any:
        return np.zeros((4, 2), np.float32)


class UnseededAgent(AgentBase):
    def act(self, obs: Observation) -> Any:
        return np.random.default_rng().uniform(-1.0, 1.0, 2).astype(np.float32)


class LeakyAgent(AgentBase):
    """Seeds its generator once, at construction: each fresh agent agrees, but episodes after the first drift."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def act(self, obs: Observation) -> Any:
        return self.rng.uniform(-1.0, 1.0, 2).astype(np.float32)


class CrashingAgent(AgentBase):
    def reset(self, ctx: EpisodeContext) -> None:
        self.calls = 0

    def act(self, obs: Observation) -> Any:
        self.calls += 1
        if self.calls == 3:
            raise ZeroDivisionError("policy head diverged")
        return np.zeros(2, np.float32)


class NeedsImagesAgent(AgentBase):
    requirements = AgentRequirements(observation_keys=("images/wrist",))

    def act(self, obs: Observation) -> Any:
        return np.zeros(2, np.float32)


def test_an_agent_that_draws_only_from_ctx_rng_passes() -> None:
    check_agent(SeededRandomAgent, WalkEnv)


def test_a_batched_agent_whose_batch_of_one_is_act_passes() -> None:
    check_agent(BatchedSeededAgent, WalkEnv)


class TestSeededRandomAgent(AgentConformance):
    max_steps = 10

    def make_agent(self) -> SeededRandomAgent:
        return SeededRandomAgent()

    def make_env(self) -> Environment:
        return WalkEnv()


@pytest.mark.parametrize(
    ("agent_class", "rule", "message"),
    [
        (OutOfBoundsAgent, Rule.AGENT_ACTIONS, r"act\(\) call 1: chunk\.actions\[1\]\[1\] = 1\.5 is outside"),
        (PlanWithoutChunkAgent, Rule.AGENT_ACTIONS, r"shape \(4, 2\).*wrap them in ActionChunk"),
        (UnseededAgent, Rule.AGENT_DETERMINISTIC, r"acted differently at step 0 \(action\[0\]"),
        (LeakyAgent, Rule.AGENT_RESET, r"run again after .* gave other actions than its first run, at step 0"),
        (CrashingAgent, Rule.AGENT_EPISODES, r"ended as error after 2 steps: agent raised ZeroDivisionError"),
        (NeedsImagesAgent, Rule.AGENT_BINDS, r"needs observation key 'images/wrist'"),
        (SharedRngBatchAgent, Rule.AGENT_BATCH, r"act\(\) call 1: act and act_batch of one differ \(actions\[0\]"),
        (TwoForOneBatchAgent, Rule.AGENT_BATCH, r"act_batch of one observation returned 2, not a sequence of one"),
    ],
)
def test_a_broken_agent_fails_under_the_rule_it_breaks(agent_class: type[AgentBase], rule: Rule, message: str) -> None:
    with pytest.raises(ConformanceError, match=message) as caught:
        check_agent(agent_class, WalkEnv)
    assert caught.value.rule is rule


# -- helpers and the error itself -----------------------------------------------------------------------------------


def test_first_difference_names_the_nested_leaf() -> None:
    image = np.zeros((4, 4, 3), np.uint8)
    a: dict[str, Any] = {"images": {"top": image}, "state": np.arange(3, dtype=np.float32), "instruction": "go"}
    b: dict[str, Any] = {"images": {"top": image.copy()}, "state": np.arange(3, dtype=np.float32), "instruction": "go"}
    assert first_difference(a, b) is None
    b["images"]["top"][2, 1, 0] = 7
    assert first_difference(a, b) == "obs['images']['top'][2, 1, 0]: 0 vs 7 (1 of 48 elements differ)"
    assert first_difference({"x": "go left"}, {"x": "go right"}) == "obs['x']: 'go left' vs 'go right'"
    assert (
        first_difference({"x": 1}, {"y": 1}) == "obs: keys differ (only in the first: ['x'], only in the second: ['y'])"
    )
    assert first_difference(np.zeros(2, np.float32), np.zeros(2)) is not None  # dtype counts
    assert first_difference(np.array([np.nan]), np.array([np.nan])) is None


def test_conformance_error_is_an_assertion_that_survives_pickling() -> None:
    error = ConformanceError(Rule.OBSERVE_PURE, "observe() moved the arm")
    assert isinstance(error, AssertionError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.rule, copy.problem, str(copy)) == (error.rule, error.problem, str(error))
    assert "rule: observe() is a pure read" in str(error)


def test_bad_arguments_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        check_environment(WalkEnv, steps=0)
    with pytest.raises(ValueError, match="tasks must not be empty"):
        check_environment(WalkEnv, tasks=[])
    with pytest.raises(ValueError, match="max_steps must be an int >= 1"):
        check_agent(SeededRandomAgent, WalkEnv, max_steps=0)
