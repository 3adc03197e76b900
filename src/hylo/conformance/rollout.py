"""Rolling out episodes for the environment rules: seeded actions, snapshotted frames, comparing two rollouts."""

from __future__ import annotations

import contextlib
import copy
import functools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from hylo.conformance.compare import describe, first_difference, snapshot
from hylo.conformance.errors import ConformanceError, ConformanceWarning, Rule, call_under
from hylo.conformance.spec import space_problem, spec_of
from hylo.conformance.tasks import default_tasks, label, reseeded
from hylo.core.environment import Environment
from hylo.core.types import Action, EnvSpec, StepResult, TaskInstance, derive_seed

Policy = Callable[[Mapping[str, Any]], Action]
"""Observation -> action; used to drive episodes to their end (random actions rarely finish a reaching task)."""

DEFAULT_STEPS = 50
"""Steps per conformance rollout (capped by the env's `max_episode_steps`): enough to leave the first frame behind,
few enough that a real simulator gets through the whole suite in seconds."""

END_SEARCH_ATTEMPTS = 8
"""Random-action episodes tried, per task, to find one that ends (for the rules about ended episodes)."""


class Frame(NamedTuple):
    """One reset or step, snapshotted: what two rollouts are compared on (info is left out: it may hold timings)."""

    obs: Any
    reward: Any = 0.0
    terminated: Any = False
    truncated: Any = False
    success: Any = False

    @classmethod
    def of(cls, result: StepResult) -> Frame:
        return cls(snapshot(result.obs), result.reward, result.terminated, result.truncated, result.success)

    @property
    def ended(self) -> bool:
        """The Kernel ends an episode at its first success, even if the env would run on; so do the checks."""
        return bool(self.terminated or self.truncated or self.success)


def frame_difference(a: Frame, b: Frame) -> str | None:
    found = first_difference(a.obs, b.obs, "obs")
    if found is not None:
        return found
    for name in ("reward", "terminated", "truncated", "success"):
        found = first_difference(getattr(a, name), getattr(b, name), name)
        if found is not None:
            return found
    return None


def rollout_difference(a: Sequence[Frame], b: Sequence[Frame]) -> str | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        found = frame_difference(x, y)
        if found is not None:
            return f"{'the reset observation' if i == 0 else f'step {i}'}: {found}"
    if len(a) != len(b):
        return f"one rollout ended after {len(a) - 1} steps, the other after {len(b) - 1}"
    return None


class EnvironmentDriver:
    """Makes, resets and steps envs for the rules, turning every failure into a ConformanceError of the rule at hand.

    Every env it makes it also closes; close's own failures belong to the close rule.
    """

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
        spec = spec_of(env)
        if self._spec is None:
            self._spec = spec
            self._tasks = self._given_tasks or default_tasks(spec)
            budget = spec.max_episode_steps
            self._steps = self._wanted_steps if budget is None else min(self._wanted_steps, budget)

    def _actions(self, task: TaskInstance, attempt: int = 0) -> list[Action]:
        """A seeded action sequence from the action space: the same for every rollout of a task that compares."""
        seed = derive_seed("conformance-actions", task.seed, attempt)
        if seed not in self._action_cache:
            space = copy.deepcopy(self.spec.action_space)  # never advance the env's own space's generator
            space.seed(seed)
            self._action_cache[seed] = call_under(
                Rule.SAMPLED_ACTIONS,
                f"spec.action_space.sample() on {space}",
                lambda: [space.sample() for _ in range(self._steps)],
            )
        return self._action_cache[seed]

    def _reset(self, rule: Rule, env: Environment, task: TaskInstance, when: str = "") -> Mapping[str, Any]:
        obs: Mapping[str, Any] = call_under(rule, f"reset({label(task)}){when}", lambda: env.reset(task))
        return obs

    def _step(self, rule: Rule, env: Environment, action: Action, where: str) -> StepResult:
        sent = snapshot(action)  # the env may write into the array it receives; the sequence is reused
        result = call_under(rule, f"step({describe(action)}) at {where}", lambda: env.step(sent))
        if not isinstance(result, StepResult):
            raise ConformanceError(
                Rule.STEP_RESULT,
                f"step() at {where} returned a {type(result).__name__} {describe(result)}, not a StepResult",
            )
        return result

    def _run(self, rule: Rule, env: Environment, task: TaskInstance, actions: Sequence[Action]) -> list[Frame]:
        obs = self._reset(rule, env, task)
        frames = [Frame(snapshot(obs))]
        for i, action in enumerate(actions, 1):
            frames.append(Frame.of(self._step(rule, env, action, f"step {i} of {label(task)}")))
            if frames[-1].ended:
                break
        return frames

    def _find_end(self, rule: Rule, env: Environment) -> tuple[TaskInstance, list[Action], list[Frame]] | None:
        """An episode run to its end on `env` (which is left just after that end), or None if none ended.

        With a policy, each task is played by it; without, seeded random actions are tried on several reseeded
        variants of each task (a fresh TaskInstance each, so a faulty same-task reset cannot blur the search).
        """
        policy = self.policy
        for task in self.tasks:
            if policy is not None:
                obs = self._reset(rule, env, task)
                frames, actions = [Frame(snapshot(obs))], []
                for i in range(1, self._steps + 1):
                    action = call_under(
                        rule, f"policy(obs) at step {i} of {label(task)}", functools.partial(policy, obs)
                    )
                    actions.append(snapshot(action))
                    result = self._step(rule, env, action, f"step {i} of {label(task)} (policy)")
                    frames.append(Frame.of(result))
                    if frames[-1].ended:
                        return task, actions, frames
                    obs = result.obs
                continue
            for attempt in range(END_SEARCH_ATTEMPTS):
                variant = task if attempt == 0 else reseeded(task, attempt)
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
        found = space_problem(self.spec.observation_space, obs, "obs", exact_dtype=True)
        if found is not None:
            raise ConformanceError(rule, f"{where}: {found}")
