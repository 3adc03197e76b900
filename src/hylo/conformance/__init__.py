"""Conformance suite: the promises the Kernel relies on, checked against any Environment or Agent implementation.

The Kernel trusts its components: that `observe()` does not move the world, that `reset` revives the placed episode,
that a seed reproduces an episode, that an agent's actions lie in the action space. A component that breaks one of
these rarely crashes — it produces an evaluation that is quietly wrong. So every plugin interface ships with its
checks, in the manner of dm_env's `EnvironmentTestMixin` and gymnasium's `check_env`:

- `check_environment(make_env)` and `check_agent(make_agent, make_env)` check every rule in order and raise the first
  `ConformanceError`, whose message names the broken rule and the offending value;
- `EnvironmentConformance` and `AgentConformance` are pytest mixins: an implementer writes the factory methods and
  inherits one test per rule.

Rules are checked in dependency order (basic typing before determinism, determinism before the rules that compare
two rollouts), so the first failure names the root cause rather than a consequence.
"""

from hylo.conformance.agent import AGENT_RULES as AGENT_RULES
from hylo.conformance.agent import check_agent
from hylo.conformance.compare import first_difference
from hylo.conformance.environment import ENVIRONMENT_RULES as ENVIRONMENT_RULES
from hylo.conformance.environment import check_environment
from hylo.conformance.errors import ConformanceError, ConformanceWarning, Rule
from hylo.conformance.mixins import AgentConformance, EnvironmentConformance
from hylo.conformance.rollout import DEFAULT_STEPS as DEFAULT_STEPS
from hylo.conformance.rollout import END_SEARCH_ATTEMPTS as END_SEARCH_ATTEMPTS
from hylo.conformance.rollout import Policy

__all__ = [
    "AgentConformance",
    "ConformanceError",
    "ConformanceWarning",
    "EnvironmentConformance",
    "Policy",
    "Rule",
    "check_agent",
    "check_environment",
    "first_difference",
]
