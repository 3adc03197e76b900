"""The rules and the error that names a broken one."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from hylo.core.errors import HyloError

_T = TypeVar("_T")


class Rule(StrEnum):
    """The conformance rules; a `ConformanceError` carries the one that was broken."""

    SPEC = "spec"
    SAMPLED_ACTIONS = "sampled-actions"
    STEP_RESULT = "step-result"
    OBSERVATION_SPACE = "observation-in-space"
    OBSERVATION_STABLE = "observation-stable"
    DETERMINISTIC = "deterministic"
    SEED_VARIES = "seed-varies"
    RESET_ENSURE_LIVE = "reset-ensure-live"
    OBSERVE_PURE = "observe-pure"
    OBSERVE_TERMINAL = "observe-terminal"
    HOLD_ACTION = "hold-action"
    CLOSE = "close"
    AGENT_BINDS = "agent-binds"
    AGENT_ACTIONS = "agent-actions"
    AGENT_EPISODES = "agent-episodes"
    AGENT_DETERMINISTIC = "agent-deterministic"
    AGENT_RESET = "agent-reset"
    AGENT_BATCH = "agent-batch"

    @property
    def statement(self) -> str:
        """The rule in one sentence, as a user would check it by hand."""
        return _STATEMENTS[self]


_STATEMENTS: dict[Rule, str] = {
    Rule.SPEC: "env.spec is an EnvSpec with a gymnasium Dict observation space and a gymnasium action space; "
    "env.capabilities is an EnvCapabilities",
    Rule.OBSERVATION_SPACE: "observations from reset(), step() and observe() lie in spec.observation_space",
    Rule.STEP_RESULT: "step() returns a StepResult with a finite real reward, bool terminated / truncated / success "
    "and a mapping info",
    Rule.SAMPLED_ACTIONS: "step() accepts any action sampled from spec.action_space",
    Rule.OBSERVATION_STABLE: "an observation, once returned, is never modified by later calls (agents and recorders "
    "keep them)",
    Rule.DETERMINISTIC: "the same TaskInstance and the same actions give the same rollout, in a fresh env and after "
    "episodes of other tasks",
    Rule.SEED_VARIES: "tasks that differ only in their seed give different rollouts (the seed drives the randomness)",
    Rule.RESET_ENSURE_LIVE: "reset(task) revives the placed episode — midway, repeated, or after the end — with the "
    "same first observation, and the env steps again as in a fresh episode",
    Rule.OBSERVE_PURE: "observe() is a pure read: it returns the current observation and changes nothing",
    Rule.OBSERVE_TERMINAL: "after the episode ended, observe() returns the terminal frame (the last StepResult.obs)",
    Rule.HOLD_ACTION: "with capabilities.hold_action, hold_action() lies in spec.action_space and step() accepts it",
    Rule.CLOSE: "close() succeeds, on a fresh env and on one that ran an episode",
    Rule.AGENT_BINDS: "the agent binds to the env: check_compatible(env.spec, agent, env.capabilities) passes",
    Rule.AGENT_ACTIONS: "act() returns an ActionChunk or one action, and every action lies in the env's action space",
    Rule.AGENT_EPISODES: "Kernel episodes end without an error status (the agent neither raises nor times out)",
    Rule.AGENT_DETERMINISTIC: "the same seed gives the same actions over a Kernel episode",
    Rule.AGENT_RESET: "reset(ctx) starts every episode afresh: after other episodes, a repeated task gives the same "
    "actions",
    Rule.AGENT_BATCH: "an agent with act_batch returns, for a batch of one, what act returns: "
    "act_batch([obs], [ctx])[0] equals act(obs) at every step of a Kernel episode",
}


class ConformanceError(HyloError, AssertionError):
    """An implementation broke a conformance rule. An AssertionError, so pytest reports it as a test failure."""

    def __init__(self, rule: Rule, problem: str) -> None:
        self.rule = rule
        self.problem = problem
        super().__init__(f"[{rule.value}] {problem}\n  rule: {rule.statement}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from (rule, problem), not from the formatted message, so the error survives pickling (xdist).
        return (type(self), (self.rule, self.problem))


class ConformanceWarning(UserWarning):
    """Part of a rule could not be exercised (e.g. no episode ended), so a pass does not vouch for it."""


def call_under(rule: Rule, what: str, fn: Callable[[], _T]) -> _T:
    """Run `fn`, turning anything it raises into a ConformanceError of `rule` (so the message names the rule)."""
    try:
        return fn()
    except ConformanceError:
        raise
    except Exception as exc:
        raise ConformanceError(rule, f"{what} raised {type(exc).__name__}: {exc}") from exc
