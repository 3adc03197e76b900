"""pytest mixins: an implementer writes the factory methods and inherits one test per rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from hylo.conformance.agent import AgentChecker
from hylo.conformance.environment import EnvironmentChecker
from hylo.conformance.errors import Rule
from hylo.conformance.rollout import DEFAULT_STEPS, Policy
from hylo.core.environment import Environment
from hylo.core.types import TaskInstance


class EnvironmentConformance:
    """pytest mixin: write `make_env` (and optionally `make_tasks`, `make_policy`), inherit one test per rule.

    class TestMyEnv(EnvironmentConformance):
        def make_env(self) -> Environment:
            return MyEnv()

    Set `randomized = False` for an env whose episodes do not depend on the seed, `steps` to shorten rollouts.
    """

    randomized: ClassVar[bool] = True
    steps: ClassVar[int] = DEFAULT_STEPS

    def make_env(self) -> Environment:
        raise TypeError(f"{type(self).__name__} must define make_env() to use this conformance mixin")

    def make_tasks(self) -> Sequence[TaskInstance] | None:
        """The tasks to check on; None means two default tasks with different seeds."""
        return None

    def make_policy(self) -> Policy | None:
        """A policy that finishes episodes, for the rules about ended episodes; None means random actions."""
        return None

    def _check_rule(self, rule: Rule) -> None:
        EnvironmentChecker(
            self.make_env, self.make_tasks(), randomized=self.randomized, steps=self.steps, policy=self.make_policy()
        ).check(rule)

    def test_spec(self) -> None:
        self._check_rule(Rule.SPEC)

    def test_sampled_actions_accepted(self) -> None:
        self._check_rule(Rule.SAMPLED_ACTIONS)

    def test_step_result(self) -> None:
        self._check_rule(Rule.STEP_RESULT)

    def test_observations_in_space(self) -> None:
        self._check_rule(Rule.OBSERVATION_SPACE)

    def test_observations_stable(self) -> None:
        self._check_rule(Rule.OBSERVATION_STABLE)

    def test_deterministic(self) -> None:
        self._check_rule(Rule.DETERMINISTIC)

    def test_seed_varies(self) -> None:
        self._check_rule(Rule.SEED_VARIES)

    def test_reset_ensure_live(self) -> None:
        self._check_rule(Rule.RESET_ENSURE_LIVE)

    def test_observe_pure(self) -> None:
        self._check_rule(Rule.OBSERVE_PURE)

    def test_observe_terminal(self) -> None:
        self._check_rule(Rule.OBSERVE_TERMINAL)

    def test_hold_action(self) -> None:
        self._check_rule(Rule.HOLD_ACTION)

    def test_close(self) -> None:
        self._check_rule(Rule.CLOSE)


_PLAYED: dict[type, AgentChecker] = {}
"""Per `AgentConformance` test class, the checker that played its tasks' episodes (see `_check_played`)."""


class AgentConformance:
    """pytest mixin: write `make_agent` and `make_env` (optionally `make_tasks`), inherit one test per rule.

    class TestMyAgent(AgentConformance):
        def make_agent(self) -> MyAgent:
            return MyAgent()

        def make_env(self) -> Environment:
            return PointReach()
    """

    max_steps: ClassVar[int | None] = None

    def make_agent(self) -> Any:
        raise TypeError(f"{type(self).__name__} must define make_agent() to use this conformance mixin")

    def make_env(self) -> Environment:
        raise TypeError(f"{type(self).__name__} must define make_env() to use this conformance mixin")

    def make_tasks(self) -> Sequence[TaskInstance] | None:
        """The tasks to run; None means two default tasks with different seeds."""
        return None

    def _checker(self) -> AgentChecker:
        return AgentChecker(self.make_agent, self.make_env, self.make_tasks(), max_steps=self.max_steps)

    def _check_rule(self, rule: Rule) -> None:
        self._checker().check(rule)

    def _check_played(self, rule: Rule) -> None:
        """Check a rule judged on the tasks' episodes, which are played once per test class, not once per rule.

        pytest makes a fresh instance for every test, so the checker that played them is kept per class. A test
        instance with attributes of its own (set by a fixture or `setup_method`) may build another agent or env
        than its class would, so it plays its own.
        """
        shared = not vars(self)
        checker = _PLAYED.get(type(self)) if shared else None
        if checker is None:
            checker = self._checker()
            if shared:
                _PLAYED[type(self)] = checker
        checker.check(rule)

    def test_agent_binds(self) -> None:
        self._check_rule(Rule.AGENT_BINDS)

    def test_agent_actions_in_space(self) -> None:
        self._check_played(Rule.AGENT_ACTIONS)

    def test_agent_episodes_run(self) -> None:
        self._check_played(Rule.AGENT_EPISODES)

    def test_agent_deterministic(self) -> None:
        self._check_rule(Rule.AGENT_DETERMINISTIC)

    def test_agent_survives_reset(self) -> None:
        self._check_rule(Rule.AGENT_RESET)

    def test_agent_batch_of_one_is_act(self) -> None:
        self._check_rule(Rule.AGENT_BATCH)
