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

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple, TypeVar

import gymnasium.spaces as spaces
import numpy as np

from hylo.core.agent import agent_name, check_compatible
from hylo.core.bus import EventBus, MemoryRecorder
from hylo.core.chunk import ActionChunk
from hylo.core.environment import Environment
from hylo.core.errors import IncompatibleComponents
from hylo.core.kernel import Kernel
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, EnvCapabilities, EnvSpec, StepResult, TaskInstance, derive_seed

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

Policy = Callable[[Mapping[str, Any]], Action]
"""Observation -> action; used to drive episodes to their end (random actions rarely finish a reaching task)."""

DEFAULT_STEPS = 50
"""Steps per conformance rollout (capped by the env's `max_episode_steps`): enough to leave the first frame behind,
few enough that a real simulator gets through the whole suite in seconds."""

END_SEARCH_ATTEMPTS = 8
"""Random-action episodes tried, per task, to find one that ends (for the rules about ended episodes)."""

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
    Rule.AGENT_BINDS: "the agent binds to the env: check_compatible(env.spec, agent) passes",
    Rule.AGENT_ACTIONS: "act() returns an ActionChunk or one action, and every action lies in the env's action space",
    Rule.AGENT_EPISODES: "Kernel episodes end without an error status (the agent neither raises nor times out)",
    Rule.AGENT_DETERMINISTIC: "the same seed gives the same actions over a Kernel episode",
    Rule.AGENT_RESET: "reset(ctx) starts every episode afresh: after other episodes, a repeated task gives the same "
    "actions",
}


class ConformanceError(AssertionError):
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


# -- comparing and describing values ----------------------------------------------------------------------------------


def _describe(value: Any) -> str:
    """A short, exact-enough rendering for an error message (images are summarised, not printed)."""
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"array({value.tolist()!r}, dtype={value.dtype})"
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, np.generic):
        return f"{value.item()!r} ({value.dtype})"
    if isinstance(value, Mapping):
        return f"{type(value).__name__} with keys {sorted(map(str, value))}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _index(index: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, index))}]" if index else ""


def _array_difference(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], path: str) -> str | None:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{path}: {_describe(a)} vs {_describe(b)}"
    if a.dtype.kind in "fc":
        same = (a == b) | (np.isnan(a) & np.isnan(b))
    elif a.dtype.kind in "biuSUM":
        same = np.asarray(a == b)
    else:
        return None if np.array_equal(a, b) else f"{path}: {_describe(a)} vs {_describe(b)}"
    if bool(same.all()):
        return None
    index = tuple(int(i) for i in np.argwhere(~same)[0])
    count = int((~same).sum())
    return f"{path}{_index(index)}: {a[index].item()!r} vs {b[index].item()!r} ({count} of {a.size} elements differ)"


def first_difference(a: Any, b: Any, path: str = "obs") -> str | None:
    """Where two observations differ, as `obs['images']['top'][3, 4, 0]: 12 vs 13 (...)`; None when they are equal.

    Handles what observations are made of: nested mappings, numpy arrays (shape, dtype and values; NaN equals NaN),
    lists, tuples, strings and scalars. A precise location is what turns "not deterministic" into a fixable bug.
    """
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            return f"{path}: {_describe(a)} vs {_describe(b)}"
        if set(a) != set(b):
            only_a = sorted(str(k) for k in a if k not in b)
            only_b = sorted(str(k) for k in b if k not in a)
            return f"{path}: keys differ (only in the first: {only_a}, only in the second: {only_b})"
        for key in a:
            found = first_difference(a[key], b[key], f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{path}: {_describe(a)} vs {_describe(b)}"
        return _array_difference(a, b, path)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return f"{path}: {_describe(a)} vs {_describe(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(a, (float, np.floating)) and isinstance(b, (float, np.floating)) and math.isnan(a) and math.isnan(b):
        return None
    try:
        equal = bool(a == b)
    except Exception:  # an exotic value whose == is not a bool: differ rather than guess
        equal = False
    return None if equal else f"{path}: {_describe(a)} vs {_describe(b)}"


def _snapshot(value: Any) -> Any:
    """A copy that later calls cannot change: envs may return views of buffers they overwrite in place."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, Mapping):
        return {key: _snapshot(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_snapshot(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_snapshot(item) for item in value)
    if value is None or isinstance(value, (str, bytes, int, float, np.generic)):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # uncopyable (a handle, a lock): compare the live object, the best we can do
        return value


# -- space membership -------------------------------------------------------------------------------------------------


def _box_problem(space: spaces.Box, value: Any, path: str, *, exact_dtype: bool) -> str | None:
    if exact_dtype:
        # An observation is the env's own output: it must match the declared dtype exactly, or agents trained on
        # the declared space see values they never saw (float64 for float32, int64 for uint8 images).
        if not isinstance(value, (np.ndarray, np.generic)):
            return f"{path} is {_describe(value)} of type {type(value).__name__}, not a numpy array for {space}"
        array = np.asarray(value)
        if array.shape != space.shape:
            return f"{path} has shape {array.shape}, but {space} has shape {space.shape}"
        if array.dtype != space.dtype:
            return f"{path} has dtype {array.dtype}, but {space} has dtype {space.dtype}"
    else:
        # An action may be computed in another numeric precision: the shield and the env cast it (as gymnasium's
        # own wrappers do), so only the kind, the shape and the bounds matter.
        try:
            array = np.asarray(value)
        except Exception as exc:
            return f"{path} {_describe(value)} is not array-like ({exc}) for {space}"
        if array.dtype.kind not in "biuf":
            return f"{path} {_describe(value)} has dtype {array.dtype}, not a real number type for {space}"
        if array.shape != space.shape:
            return f"{path} has shape {array.shape}, but {space} has shape {space.shape}"
    with np.errstate(invalid="ignore"):
        outside = ~((array >= space.low) & (array <= space.high))  # NaN is outside every bound
    if not bool(outside.any()):
        return None
    index = tuple(int(i) for i in np.argwhere(outside)[0])
    low, high = np.broadcast_to(space.low, space.shape)[index], np.broadcast_to(space.high, space.shape)[index]
    return f"{path}{_index(index)} = {array[index].item()!r} is outside [{low.item()!r}, {high.item()!r}] of {space}"


def _space_problem(space: spaces.Space[Any], value: Any, path: str, *, exact_dtype: bool) -> str | None:
    """Why `value` is not in `space`, or None. Recurses through Dict and Tuple to name the offending leaf."""
    if isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping):
            return f"{path} is {_describe(value)}, not a mapping for a Dict space"
        missing = [str(key) for key in space.spaces if key not in value]
        extra = sorted(str(key) for key in value if key not in space.spaces)
        if missing or extra:
            return f"{path} keys do not match the space: missing {missing}, not in the space {extra}"
        for key, sub in space.spaces.items():
            found = _space_problem(sub, value[key], f"{path}[{key!r}]", exact_dtype=exact_dtype)
            if found is not None:
                return found
        return None
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
            return f"{path} is {_describe(value)}, not a sequence of {len(space.spaces)} for {space}"
        for i, (sub, item) in enumerate(zip(space.spaces, value, strict=True)):
            found = _space_problem(sub, item, f"{path}[{i}]", exact_dtype=exact_dtype)
            if found is not None:
                return found
        return None
    if isinstance(space, spaces.Box):
        return _box_problem(space, value, path, exact_dtype=exact_dtype)
    if isinstance(space, spaces.Text):
        # Only type and length: gymnasium's default Text charset is alphanumeric without spaces, which no natural
        # instruction fits; in hylo a Text space means "a string of at most max_length characters".
        if not isinstance(value, str):
            return f"{path} is {_describe(value)} of type {type(value).__name__}, not a str for {space}"
        if not space.min_length <= len(value) <= space.max_length:
            return (
                f"{path} has {len(value)} characters, outside [{space.min_length}, {space.max_length}] of {space}: "
                f"{_describe(value)}"
            )
        return None
    if isinstance(space, spaces.Discrete) and isinstance(value, (bool, np.bool_)):
        return f"{path} is the bool {value!r}, not an integer of {space}"
    try:
        inside = bool(space.contains(value))
    except Exception:  # a value of the wrong kind can make contains() raise: that is a "no"
        inside = False
    return None if inside else f"{path} = {_describe(value)} is not in {space}"


def _chunk_problem(value: Any, space: spaces.Space[Any]) -> str | None:
    """Why what `act` returned is not a chunk (or a single action) of actions in `space`, or None."""
    if value is None:
        return "returned None, not an ActionChunk or an action"
    if isinstance(value, ActionChunk):
        for i, action in enumerate(value.actions):
            found = _space_problem(space, action, f"chunk.actions[{i}]", exact_dtype=False)
            if found is not None:
                return f"{found} (in a chunk of {len(value)})"
        return None
    found = _space_problem(space, value, "the returned action", exact_dtype=False)
    if found is not None and isinstance(value, (list, tuple, np.ndarray)):
        found += "; to return several actions, wrap them in ActionChunk"
    return found


def _result_problem(result: StepResult) -> str | None:
    reward = result.reward
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (int, float, np.integer, np.floating)):
        return f"reward is {_describe(reward)} of type {type(reward).__name__}, not a float"
    if not math.isfinite(float(reward)):
        return f"reward is {float(reward)!r}, not finite"
    for name in ("terminated", "truncated", "success"):
        flag = getattr(result, name)
        if not isinstance(flag, (bool, np.bool_)):
            return f"{name} is {_describe(flag)} of type {type(flag).__name__}, not a bool"
    info: Any = result.info  # typed as a Mapping, but it is the env's word we are checking
    if not isinstance(info, Mapping):
        return f"info is {_describe(info)} of type {type(info).__name__}, not a mapping"
    return None


# -- rollouts ---------------------------------------------------------------------------------------------------------


class _Frame(NamedTuple):
    """One reset or step, snapshotted: what two rollouts are compared on (info is left out: it may hold timings)."""

    obs: Any
    reward: Any = 0.0
    terminated: Any = False
    truncated: Any = False
    success: Any = False

    @classmethod
    def of(cls, result: StepResult) -> _Frame:
        return cls(_snapshot(result.obs), result.reward, result.terminated, result.truncated, result.success)

    @property
    def ended(self) -> bool:
        """The Kernel ends an episode at its first success, even if the env would run on; so do the checks."""
        return bool(self.terminated or self.truncated or self.success)


def _frame_difference(a: _Frame, b: _Frame) -> str | None:
    found = first_difference(a.obs, b.obs, "obs")
    if found is not None:
        return found
    for name in ("reward", "terminated", "truncated", "success"):
        found = first_difference(getattr(a, name), getattr(b, name), name)
        if found is not None:
            return found
    return None


def _rollout_difference(a: Sequence[_Frame], b: Sequence[_Frame]) -> str | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        found = _frame_difference(x, y)
        if found is not None:
            return f"{'the reset observation' if i == 0 else f'step {i}'}: {found}"
    if len(a) != len(b):
        return f"one rollout ended after {len(a) - 1} steps, the other after {len(b) - 1}"
    return None


def _label(task: TaskInstance) -> str:
    return f"{task.episode_id} (seed {task.seed})"


def _reseeded(task: TaskInstance, k: int) -> TaskInstance:
    """The same task under another seed: a different episode that the env must treat as one."""
    return dataclasses.replace(task, seed=derive_seed("conformance", task.seed, k))


def _default_tasks(spec: EnvSpec) -> tuple[TaskInstance, ...]:
    return tuple(TaskInstance(benchmark=spec.name, task="conformance", index=i) for i in range(2))


def _call(rule: Rule, what: str, fn: Callable[[], _T]) -> _T:
    """Run `fn`, turning anything it raises into a ConformanceError of `rule` (so the message names the rule)."""
    try:
        return fn()
    except ConformanceError:
        raise
    except Exception as exc:
        raise ConformanceError(rule, f"{what} raised {type(exc).__name__}: {exc}") from exc


def _spec_of(env: Environment) -> EnvSpec:
    """Check the spec rule on `env` (every rule does, so a broken spec is never reported as something else)."""
    rule = Rule.SPEC
    spec = _call(rule, "env.spec", lambda: env.spec)
    if not isinstance(spec, EnvSpec):
        raise ConformanceError(rule, f"env.spec is {_describe(spec)} of type {type(spec).__name__}, not an EnvSpec")
    if not isinstance(spec.observation_space, spaces.Dict):
        raise ConformanceError(
            rule,
            f"spec.observation_space is {spec.observation_space!r}, not a gymnasium spaces.Dict "
            "(observations are mappings: wrap a single array as {'state': ...})",
        )
    if not isinstance(spec.action_space, spaces.Space):
        raise ConformanceError(rule, f"spec.action_space is {_describe(spec.action_space)}, not a gymnasium Space")
    capabilities = _call(rule, "env.capabilities", lambda: env.capabilities)
    if not isinstance(capabilities, EnvCapabilities):
        raise ConformanceError(
            rule,
            f"env.capabilities is {_describe(capabilities)} of type {type(capabilities).__name__}, not EnvCapabilities",
        )
    return spec


# -- environments -----------------------------------------------------------------------------------------------------


class _EnvironmentChecker:
    """One method per environment rule. Every env it makes it also closes; close's own failures belong to CLOSE."""

    def __init__(
        self,
        make_env: Callable[[], Environment],
        tasks: Sequence[TaskInstance] | None,
        *,
        randomized: bool,
        steps: int,
        policy: Policy | None,
    ) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an int >= 1, got {steps!r}")
        if tasks is not None and not tasks:
            raise ValueError("tasks must not be empty (pass None for the default tasks)")
        self._make_env = make_env
        self._given_tasks = None if tasks is None else tuple(tasks)
        self._wanted_steps = steps
        self.randomized = randomized
        self.policy = policy
        self._spec: EnvSpec | None = None
        self._tasks: tuple[TaskInstance, ...] = ()
        self._steps = steps
        self._action_cache: dict[int, list[Action]] = {}

    def check(self, rule: Rule) -> None:
        method: Callable[[], None] | None = getattr(self, "rule_" + rule.name.lower(), None)
        if method is None:
            raise ValueError(f"{rule.value!r} is not an environment rule")
        method()

    # -- plumbing ---------------------------------------------------------------------------------------------------

    @property
    def spec(self) -> EnvSpec:
        """The env's spec, learnt from the first env made (one is made for it if a rule asks first)."""
        if self._spec is None:
            with self._env():
                pass
        assert self._spec is not None
        return self._spec

    @property
    def tasks(self) -> tuple[TaskInstance, ...]:
        """The given tasks, or the defaults for the env's benchmark."""
        self.spec  # noqa: B018 (learn the spec, which decides the default tasks)
        return self._tasks

    @contextlib.contextmanager
    def _env(self) -> Iterator[Environment]:
        env = self._make_env()
        try:
            self._learn(env)
            yield env
        finally:
            with contextlib.suppress(Exception):
                env.close()

    def _learn(self, env: Environment) -> None:
        spec = _spec_of(env)
        if self._spec is None:
            self._spec = spec
            self._tasks = self._given_tasks or _default_tasks(spec)
            budget = spec.max_episode_steps
            self._steps = self._wanted_steps if budget is None else min(self._wanted_steps, budget)

    def _actions(self, task: TaskInstance, attempt: int = 0) -> list[Action]:
        """A seeded action sequence from the action space: the same for every rollout of a task that compares."""
        seed = derive_seed("conformance-actions", task.seed, attempt)
        if seed not in self._action_cache:
            space = copy.deepcopy(self.spec.action_space)  # never advance the env's own space's generator
            space.seed(seed)
            self._action_cache[seed] = _call(
                Rule.SAMPLED_ACTIONS,
                f"spec.action_space.sample() on {space}",
                lambda: [space.sample() for _ in range(self._steps)],
            )
        return self._action_cache[seed]

    def _reset(self, rule: Rule, env: Environment, task: TaskInstance, when: str = "") -> Mapping[str, Any]:
        obs: Mapping[str, Any] = _call(rule, f"reset({_label(task)}){when}", lambda: env.reset(task))
        return obs

    def _step(self, rule: Rule, env: Environment, action: Action, where: str) -> StepResult:
        sent = _snapshot(action)  # the env may write into the array it receives; the sequence is reused
        result = _call(rule, f"step({_describe(action)}) at {where}", lambda: env.step(sent))
        if not isinstance(result, StepResult):
            raise ConformanceError(
                Rule.STEP_RESULT,
                f"step() at {where} returned a {type(result).__name__} {_describe(result)}, not a StepResult",
            )
        return result

    def _run(self, rule: Rule, env: Environment, task: TaskInstance, actions: Sequence[Action]) -> list[_Frame]:
        obs = self._reset(rule, env, task)
        frames = [_Frame(_snapshot(obs))]
        for i, action in enumerate(actions, 1):
            frames.append(_Frame.of(self._step(rule, env, action, f"step {i} of {_label(task)}")))
            if frames[-1].ended:
                break
        return frames

    def _find_end(self, rule: Rule, env: Environment) -> tuple[TaskInstance, list[Action], list[_Frame]] | None:
        """An episode run to its end on `env` (which is left just after that end), or None if none ended.

        With a policy, each task is played by it; without, seeded random actions are tried on several reseeded
        variants of each task (a fresh TaskInstance each, so a faulty same-task reset cannot blur the search).
        """
        policy = self.policy
        for task in self.tasks:
            if policy is not None:
                obs = self._reset(rule, env, task)
                frames, actions = [_Frame(_snapshot(obs))], []
                for i in range(1, self._steps + 1):
                    action = _call(rule, f"policy(obs) at step {i} of {_label(task)}", functools.partial(policy, obs))
                    actions.append(_snapshot(action))
                    result = self._step(rule, env, action, f"step {i} of {_label(task)} (policy)")
                    frames.append(_Frame.of(result))
                    if frames[-1].ended:
                        return task, actions, frames
                    obs = result.obs
                continue
            for attempt in range(END_SEARCH_ATTEMPTS):
                variant = task if attempt == 0 else _reseeded(task, attempt)
                actions = self._actions(variant, attempt)
                frames = self._run(rule, env, variant, actions)
                if frames[-1].ended:
                    return variant, actions[: len(frames) - 1], frames
        return None

    def _no_end(self, rule: Rule, what: str) -> None:
        driver = "the policy" if self.policy is not None else f"{END_SEARCH_ATTEMPTS} random-action attempts"
        warnings.warn(
            ConformanceWarning(
                f"[{rule.value}] no episode ended within {self._steps} steps ({driver} per task), so {what} was not "
                "checked; pass a policy that finishes episodes, or more steps"
            ),
            stacklevel=4,
        )

    def _check_obs(self, rule: Rule, obs: Any, where: str) -> None:
        found = _space_problem(self.spec.observation_space, obs, "obs", exact_dtype=True)
        if found is not None:
            raise ConformanceError(rule, f"{where}: {found}")

    # -- the rules ----------------------------------------------------------------------------------------------------

    def rule_spec(self) -> None:
        with self._env():
            pass  # _learn checked it

    def rule_sampled_actions(self) -> None:
        rule = Rule.SAMPLED_ACTIONS
        for task in self.tasks:
            with self._env() as env:
                episode = task
                self._reset(rule, env, episode)
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {_label(episode)}")
                    if _Frame.of(result).ended:  # go on in another episode: a fresh task, not a revival
                        episode = _reseeded(task, i)
                        self._reset(rule, env, episode)

    def rule_step_result(self) -> None:
        rule = Rule.STEP_RESULT
        for task in self.tasks:
            with self._env() as env:
                self._reset(rule, env, task)
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {_label(task)}")
                    found = _result_problem(result)
                    if found is not None:
                        raise ConformanceError(rule, f"step {i} of {_label(task)}: {found}")
                    if _Frame.of(result).ended:
                        break

    def rule_observation_space(self) -> None:
        rule = Rule.OBSERVATION_SPACE
        for task in self.tasks:
            with self._env() as env:
                self._check_obs(rule, self._reset(rule, env, task), f"the observation of reset({_label(task)})")
                self._check_obs(rule, _call(rule, "observe()", env.observe), "observe() after reset")
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {_label(task)}")
                    self._check_obs(rule, result.obs, f"the observation of step {i} of {_label(task)}")
                    if _Frame.of(result).ended:
                        self._check_obs(rule, _call(rule, "observe()", env.observe), "observe() after the end")
                        break

    def rule_observation_stable(self) -> None:
        rule = Rule.OBSERVATION_STABLE
        for task in self.tasks:
            with self._env() as env:
                obs = self._reset(rule, env, task)
                kept: list[tuple[str, Any, Any]] = [(f"reset({_label(task)})", obs, _snapshot(obs))]
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {_label(task)}")
                    kept.append((f"step {i} of {_label(task)}", result.obs, _snapshot(result.obs)))
                    if _Frame.of(result).ended:
                        break
                for where, live, then in kept:
                    found = first_difference(then, live, "obs")
                    if found is not None:
                        raise ConformanceError(
                            rule,
                            f"the observation returned by {where} changed afterwards ({found}, as returned vs now); "
                            "return fresh arrays, not views of buffers the env overwrites",
                        )

    def rule_deterministic(self) -> None:
        rule = Rule.DETERMINISTIC
        for task in self.tasks:
            actions = self._actions(task)
            with self._env() as env:
                first = self._run(rule, env, task, actions)
            with self._env() as env:
                fresh = self._run(rule, env, task, actions)
            found = _rollout_difference(first, fresh)
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"two fresh envs reset to {_label(task)} and given the same actions differ at {found}; "
                    "the env draws randomness that does not come from task.seed",
                )
            other = _reseeded(task, 1)
            with self._env() as env:
                self._run(rule, env, other, self._actions(other))
                again = self._run(rule, env, task, actions)
            found = _rollout_difference(first, again)
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"{_label(task)} rolled out after an episode of {_label(other)} differs from a fresh env's rollout "
                    f"at {found}; state or randomness carries over between episodes (derive it all from task.seed)",
                )

    def rule_seed_varies(self) -> None:
        rule = Rule.SEED_VARIES
        if not self.randomized:
            return
        for task in self.tasks:
            actions = self._actions(task)
            tried = [task.seed]
            with self._env() as env:
                base = self._run(rule, env, task, actions)
                for k in range(1, 4):
                    variant = _reseeded(task, k)
                    tried.append(variant.seed)
                    if _rollout_difference(base, self._run(rule, env, variant, actions)) is not None:
                        break
                else:
                    raise ConformanceError(
                        rule,
                        f"{task.episode_id} rolled out identically under seeds {tried} with the same actions; the env "
                        "ignores task.seed (if its episodes are not meant to vary with the seed, set randomized=False)",
                    )

    def rule_reset_ensure_live(self) -> None:
        rule = Rule.RESET_ENSURE_LIVE
        for task in self.tasks:
            actions = self._actions(task)
            with self._env() as env:
                reference = self._run(rule, env, task, actions[:3])
                self._revive(env, task, reference, actions[0], f"after {len(reference) - 1} steps")
                self._reset(rule, env, task, " (the first of two in a row)")
                self._revive(env, task, reference, actions[0], "right after another reset")
        with self._env() as env:
            found = self._find_end(rule, env)
            if found is None:
                self._no_end(rule, "reviving an ended episode")
                return
            task, actions, frames = found
            self._revive(env, task, frames, actions[0], f"after the episode ended at step {len(frames) - 1}")

    def _revive(self, env: Environment, task: TaskInstance, reference: list[_Frame], action: Action, when: str) -> None:
        rule = Rule.RESET_ENSURE_LIVE
        obs = self._reset(rule, env, task, f" {when}")
        found = first_difference(reference[0].obs, _snapshot(obs), "obs")
        if found is not None:
            raise ConformanceError(
                rule,
                f"reset({_label(task)}) {when} returned another first observation than a fresh reset ({found}); "
                "reset must bring the env back to the placed episode, never keep or pick another",
            )
        if len(reference) > 1:
            result = self._step(rule, env, action, f"step 1 after reset({_label(task)}) {when}")
            found = _frame_difference(reference[1], _Frame.of(result))
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"after reset({_label(task)}) {when}, step 1 differs from a fresh episode's step 1 ({found}); "
                    "reset must restore the whole simulator state, not only the observation",
                )

    def rule_observe_pure(self) -> None:
        rule = Rule.OBSERVE_PURE
        for task in self.tasks:
            actions = self._actions(task)
            with self._env() as env:
                reference = self._run(rule, env, task, actions)
            with self._env() as env:
                obs = _snapshot(self._reset(rule, env, task))
                self._observe_twice(env, obs, f"right after reset({_label(task)})", "reset")
                for i, action in enumerate(actions[: len(reference) - 1], 1):
                    frame = _Frame.of(self._step(rule, env, action, f"step {i} of {_label(task)}"))
                    found = _frame_difference(reference[i], frame)
                    if found is not None:
                        raise ConformanceError(
                            rule,
                            f"step {i} of {_label(task)} differs when observe() is called between steps ({found}, "
                            "without vs with observe calls); observe() must not advance or perturb the env",
                        )
                    if frame.ended:
                        break
                    self._observe_twice(env, frame.obs, f"after step {i} of {_label(task)}", f"step {i}")

    def _observe_twice(self, env: Environment, expected: Any, when: str, source: str) -> None:
        rule = Rule.OBSERVE_PURE
        first = _snapshot(_call(rule, f"observe() {when}", env.observe))
        second = _snapshot(_call(rule, f"observe() {when}", env.observe))
        found = first_difference(first, second, "obs")
        if found is not None:
            raise ConformanceError(
                rule, f"two observe() calls in a row {when} returned different observations: {found}"
            )
        found = first_difference(expected, first, "obs")
        if found is not None:
            raise ConformanceError(rule, f"observe() {when} differs from what {source} returned ({found})")

    def rule_observe_terminal(self) -> None:
        rule = Rule.OBSERVE_TERMINAL
        with self._env() as env:
            found = self._find_end(rule, env)
            if found is None:
                self._no_end(rule, "observe() after the end")
                return
            task, _, frames = found
            for call in ("first", "second"):
                obs = _call(rule, "observe() after the end", env.observe)
                difference = first_difference(frames[-1].obs, _snapshot(obs), "obs")
                if difference is not None:
                    raise ConformanceError(
                        rule,
                        f"after {_label(task)} ended at step {len(frames) - 1}, the {call} observe() differs from the "
                        f"terminal StepResult.obs ({difference}, terminal vs observed)",
                    )

    def rule_hold_action(self) -> None:
        rule = Rule.HOLD_ACTION
        with self._env() as env:
            if not env.capabilities.hold_action:
                return
            task = self.tasks[0]
            self._reset(rule, env, task)
            action = _call(rule, "hold_action()", env.hold_action)
            found = _space_problem(self.spec.action_space, action, "hold_action()", exact_dtype=False)
            if found is not None:
                raise ConformanceError(rule, found)
            self._step(rule, env, action, f"step 1 of {_label(task)} with the hold action")

    def rule_close(self) -> None:
        rule = Rule.CLOSE
        env = self._make_env()
        _call(rule, "close() on a fresh env", env.close)
        env = self._make_env()
        try:
            self._learn(env)
            task = self.tasks[0]
            self._reset(rule, env, task)
            self._step(rule, env, self._actions(task)[0], f"step 1 of {_label(task)}")
        except BaseException:
            with contextlib.suppress(Exception):
                env.close()
            raise
        _call(rule, "close() after an episode", env.close)


ENVIRONMENT_RULES: tuple[Rule, ...] = (
    Rule.SPEC,
    Rule.SAMPLED_ACTIONS,
    Rule.STEP_RESULT,
    Rule.OBSERVATION_SPACE,
    Rule.OBSERVATION_STABLE,
    Rule.DETERMINISTIC,
    Rule.SEED_VARIES,
    Rule.RESET_ENSURE_LIVE,
    Rule.OBSERVE_PURE,
    Rule.OBSERVE_TERMINAL,
    Rule.HOLD_ACTION,
    Rule.CLOSE,
)
"""The environment rules, in the order `check_environment` checks them (causes before consequences)."""


def check_environment(
    make_env: Callable[[], Environment],
    tasks: Sequence[TaskInstance] | None = None,
    *,
    randomized: bool = True,
    steps: int = DEFAULT_STEPS,
    policy: Policy | None = None,
) -> None:
    """Check every environment rule; raise the first `ConformanceError`.

    - `make_env`: builds a fresh env (called several times: some rules compare two fresh instances)
    - `tasks`: the TaskInstances to check on; by default two tasks of the env's benchmark with different seeds
    - `randomized`: False for an env whose episodes do not depend on the seed (e.g. `NullEnv`); skips `seed-varies`
    - `steps`: actions per rollout, capped by `spec.max_episode_steps`
    - `policy`: drives episodes to their end for the rules about ended episodes; without one, seeded random actions
      are tried, and a `ConformanceWarning` says so when no episode ended
    """
    checker = _EnvironmentChecker(make_env, tasks, randomized=randomized, steps=steps, policy=policy)
    for rule in ENVIRONMENT_RULES:
        checker.check(rule)


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
        raise NotImplementedError(f"{type(self).__name__} must implement make_env()")

    def make_tasks(self) -> Sequence[TaskInstance] | None:
        """The tasks to check on; None means two default tasks with different seeds."""
        return None

    def make_policy(self) -> Policy | None:
        """A policy that finishes episodes, for the rules about ended episodes; None means random actions."""
        return None

    def _check_rule(self, rule: Rule) -> None:
        _EnvironmentChecker(
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


# -- agents -----------------------------------------------------------------------------------------------------------


class _ActProbe:
    """Stands in for the agent inside the Kernel and checks what each `act` returns before the Kernel coerces it.

    Everything else is forwarded, so the Kernel sees the agent's own `reset`, `on_step`, `requirements`, … (and
    misses exactly the hooks the agent lacks). The first problem is recorded, not raised: raising inside `act`
    would turn it into an `error` episode and blur which rule broke.
    """

    def __init__(self, agent: Any, space: spaces.Space[Any]) -> None:
        self._agent = agent
        self._space = space
        self.name = agent_name(agent)
        self.calls = 0
        self.problem: str | None = None

    def act(self, obs: Any) -> Any:
        self.calls += 1
        value = self._agent.act(obs)
        if self.problem is None:
            found = _chunk_problem(value, self._space)
            if found is not None:
                self.problem = f"act() call {self.calls}: {found}"
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._agent, name)


class _Episode(NamedTuple):
    task: TaskInstance
    outcome: EpisodeOutcome
    actions: list[tuple[int, Any, bool]]


def _detail_tail(detail: str | None, lines: int = 6) -> str:
    if not detail:
        return ""
    return "\n    " + "\n    ".join(detail.strip().splitlines()[-lines:])


class _AgentChecker:
    """One method per agent rule; every episode runs through the real Kernel, as in an evaluation."""

    def __init__(
        self,
        make_agent: Callable[[], Any],
        make_env: Callable[[], Environment],
        tasks: Sequence[TaskInstance] | None,
        *,
        max_steps: int | None,
    ) -> None:
        if tasks is not None and not tasks:
            raise ValueError("tasks must not be empty (pass None for the default tasks)")
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
        self._make_agent = make_agent
        self._make_env = make_env
        self._given_tasks = None if tasks is None else tuple(tasks)
        self._tasks: tuple[TaskInstance, ...] | None = self._given_tasks
        self._max_steps = max_steps

    def check(self, rule: Rule) -> None:
        method: Callable[[], None] | None = getattr(self, "rule_" + rule.name.lower(), None)
        if method is None:
            raise ValueError(f"{rule.value!r} is not an agent rule")
        method()

    @contextlib.contextmanager
    def _pair(self) -> Iterator[tuple[Any, Environment, tuple[TaskInstance, ...]]]:
        env = self._make_env()
        try:
            spec = _spec_of(env)
            if self._tasks is None:
                self._tasks = _default_tasks(spec)
            agent = self._make_agent()
            yield agent, env, self._tasks
        finally:
            with contextlib.suppress(Exception):
                env.close()

    def _all_tasks(self) -> tuple[TaskInstance, ...]:
        if self._tasks is None:
            env = self._make_env()
            try:
                self._tasks = _default_tasks(_spec_of(env))
            finally:
                with contextlib.suppress(Exception):
                    env.close()
        return self._tasks

    def _episodes(self, agent: Any, env: Environment, tasks: Sequence[TaskInstance]) -> list[_Episode]:
        """Run `tasks` in order with one Kernel; check each episode's chunks and status; return the action events."""
        probe = _ActProbe(agent, env.spec.action_space)
        recorder = MemoryRecorder()
        bus = EventBus(run_id="conformance")
        bus.subscribe(recorder)
        try:
            kernel = Kernel(env, probe, max_steps=self._max_steps or env.spec.max_episode_steps or 100, bus=bus)
        except IncompatibleComponents as exc:
            raise ConformanceError(Rule.AGENT_BINDS, str(exc)) from exc
        episodes: list[_Episode] = []
        try:
            for task in tasks:
                recorder.events.clear()
                outcome = kernel.run(task)
                if probe.problem is not None:
                    raise ConformanceError(Rule.AGENT_ACTIONS, f"in {_label(task)}, {probe.problem}")
                if outcome.status is EpisodeStatus.ERROR:
                    raise ConformanceError(
                        Rule.AGENT_EPISODES,
                        f"{_label(task)} ended as error after {outcome.steps} steps: {outcome.reason}"
                        + _detail_tail(outcome.detail),
                    )
                if outcome.status is EpisodeStatus.INFRA_INVALID:
                    raise ConformanceError(
                        Rule.AGENT_EPISODES,
                        f"{_label(task)} ended as infra_invalid after {outcome.steps} steps: {outcome.reason} — the "
                        "environment failed, not the agent; check it with check_environment first"
                        + _detail_tail(outcome.detail),
                    )
                actions = [(event.step, event.action, event.hold) for event in recorder.of("action")]
                episodes.append(_Episode(task, outcome, actions))
        finally:
            kernel.close()
        return episodes

    def rule_agent_binds(self) -> None:
        with self._pair() as (agent, env, _):
            try:
                check_compatible(env.spec, agent)
            except IncompatibleComponents as exc:
                raise ConformanceError(Rule.AGENT_BINDS, str(exc)) from exc

    def rule_agent_actions(self) -> None:
        with self._pair() as (agent, env, tasks):
            self._episodes(agent, env, tasks)

    rule_agent_episodes = rule_agent_actions  # the same episodes answer both; each raises under its own rule

    def rule_agent_deterministic(self) -> None:
        for task in self._all_tasks():
            with self._pair() as (agent, env, _):
                (first,) = self._episodes(agent, env, [task])
            with self._pair() as (agent, env, _):
                (second,) = self._episodes(agent, env, [task])
            found = _actions_difference(first.actions, second.actions)
            if found is not None:
                raise ConformanceError(
                    Rule.AGENT_DETERMINISTIC,
                    f"two fresh (agent, env) pairs on {_label(task)} acted differently at {found}; draw randomness "
                    "only from ctx.seed (ctx.rng), never from a global or unseeded generator",
                )

    def rule_agent_reset(self) -> None:
        with self._pair() as (agent, env, tasks):
            order = [*tasks, _reseeded(tasks[0], 1), tasks[0]]
            episodes = self._episodes(agent, env, order)
        found = _actions_difference(episodes[0].actions, episodes[-1].actions)
        if found is not None:
            between = ", ".join(_label(task) for task in order[1:-1])
            raise ConformanceError(
                Rule.AGENT_RESET,
                f"{_label(tasks[0])} run again after {between} gave other actions than its first run, at {found}; "
                "reset(ctx) must clear per-episode state and re-seed randomness from ctx.seed",
            )


def _actions_difference(a: Sequence[tuple[int, Any, bool]], b: Sequence[tuple[int, Any, bool]]) -> str | None:
    for (step, x, hold_x), (_, y, hold_y) in zip(a, b, strict=False):
        found = first_difference(x, y, "action") or first_difference(hold_x, hold_y, "hold")
        if found is not None:
            return f"step {step} ({found})"
    if len(a) != len(b):
        return f"the episode length ({len(a)} vs {len(b)} actions)"
    return None


AGENT_RULES: tuple[Rule, ...] = (
    Rule.AGENT_BINDS,
    Rule.AGENT_ACTIONS,
    Rule.AGENT_DETERMINISTIC,
    Rule.AGENT_RESET,
)
"""What `check_agent` runs, in order. `agent-episodes` is judged on the same episodes as `agent-actions`."""


def check_agent(
    make_agent: Callable[[], Any],
    make_env: Callable[[], Environment],
    tasks: Sequence[TaskInstance] | None = None,
    *,
    max_steps: int | None = None,
) -> None:
    """Check every agent rule against the env `make_env` builds; raise the first `ConformanceError`.

    The env is trusted (check it with `check_environment` first): a nondeterministic env makes any agent look
    nondeterministic. `max_steps` is the Kernel's step budget (default: the env's `max_episode_steps`, else 100).
    """
    checker = _AgentChecker(make_agent, make_env, tasks, max_steps=max_steps)
    for rule in AGENT_RULES:
        checker.check(rule)


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
        raise NotImplementedError(f"{type(self).__name__} must implement make_agent()")

    def make_env(self) -> Environment:
        raise NotImplementedError(f"{type(self).__name__} must implement make_env()")

    def make_tasks(self) -> Sequence[TaskInstance] | None:
        """The tasks to run; None means two default tasks with different seeds."""
        return None

    def _check_rule(self, rule: Rule) -> None:
        _AgentChecker(self.make_agent, self.make_env, self.make_tasks(), max_steps=self.max_steps).check(rule)

    def test_agent_binds(self) -> None:
        self._check_rule(Rule.AGENT_BINDS)

    def test_agent_actions_in_space(self) -> None:
        self._check_rule(Rule.AGENT_ACTIONS)

    def test_agent_episodes_run(self) -> None:
        self._check_rule(Rule.AGENT_EPISODES)

    def test_agent_deterministic(self) -> None:
        self._check_rule(Rule.AGENT_DETERMINISTIC)

    def test_agent_survives_reset(self) -> None:
        self._check_rule(Rule.AGENT_RESET)
