"""The environment rules, and `check_environment`, which checks them all."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hylo.conformance.compare import describe, first_difference, snapshot
from hylo.conformance.errors import ConformanceError, Rule, call_under
from hylo.conformance.rollout import (
    DEFAULT_STEPS,
    EnvironmentDriver,
    Frame,
    Policy,
    frame_difference,
    rollout_difference,
)
from hylo.conformance.spec import space_problem
from hylo.conformance.tasks import label, reseeded
from hylo.core.environment import Environment
from hylo.core.types import Action, StepResult, TaskInstance


def _result_problem(result: StepResult) -> str | None:
    reward = result.reward
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (int, float, np.integer, np.floating)):
        return f"reward is {describe(reward)} of type {type(reward).__name__}, not a float"
    if not math.isfinite(float(reward)):
        return f"reward is {float(reward)!r}, not finite"
    for name in ("terminated", "truncated", "success"):
        flag = getattr(result, name)
        if not isinstance(flag, (bool, np.bool_)):
            return f"{name} is {describe(flag)} of type {type(flag).__name__}, not a bool"
    info: Any = result.info  # typed as a Mapping, but it is the env's word we are checking
    if not isinstance(info, Mapping):
        return f"info is {describe(info)} of type {type(info).__name__}, not a mapping"
    return None


class EnvironmentChecker(EnvironmentDriver):
    """One method per environment rule, named after it."""

    def check(self, rule: Rule) -> None:
        method: Callable[[], None] | None = getattr(self, "rule_" + rule.name.lower(), None)
        if method is None:
            raise ValueError(f"{rule.value!r} is not an environment rule")
        method()

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
                    result = self._step(rule, env, action, f"step {i} of {label(episode)}")
                    if Frame.of(result).ended:  # go on in another episode: a fresh task, not a revival
                        episode = reseeded(task, i)
                        self._reset(rule, env, episode)

    def rule_step_result(self) -> None:
        rule = Rule.STEP_RESULT
        for task in self.tasks:
            with self._env() as env:
                self._reset(rule, env, task)
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {label(task)}")
                    found = _result_problem(result)
                    if found is not None:
                        raise ConformanceError(rule, f"step {i} of {label(task)}: {found}")
                    if Frame.of(result).ended:
                        break

    def rule_observation_space(self) -> None:
        rule = Rule.OBSERVATION_SPACE
        for task in self.tasks:
            with self._env() as env:
                self._check_obs(rule, self._reset(rule, env, task), f"the observation of reset({label(task)})")
                self._check_obs(rule, call_under(rule, "observe()", env.observe), "observe() after reset")
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {label(task)}")
                    self._check_obs(rule, result.obs, f"the observation of step {i} of {label(task)}")
                    if Frame.of(result).ended:
                        self._check_obs(rule, call_under(rule, "observe()", env.observe), "observe() after the end")
                        break

    def rule_observation_stable(self) -> None:
        rule = Rule.OBSERVATION_STABLE
        for task in self.tasks:
            with self._env() as env:
                obs = self._reset(rule, env, task)
                kept: list[tuple[str, Any, Any]] = [(f"reset({label(task)})", obs, snapshot(obs))]
                for i, action in enumerate(self._actions(task), 1):
                    result = self._step(rule, env, action, f"step {i} of {label(task)}")
                    kept.append((f"step {i} of {label(task)}", result.obs, snapshot(result.obs)))
                    if Frame.of(result).ended:
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
            found = rollout_difference(first, fresh)
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"two fresh envs reset to {label(task)} and given the same actions differ at {found}; "
                    "the env draws randomness that does not come from task.seed",
                )
            other = reseeded(task, 1)
            with self._env() as env:
                self._run(rule, env, other, self._actions(other))
                again = self._run(rule, env, task, actions)
            found = rollout_difference(first, again)
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"{label(task)} rolled out after an episode of {label(other)} differs from a fresh env's rollout "
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
                    variant = reseeded(task, k)
                    tried.append(variant.seed)
                    if rollout_difference(base, self._run(rule, env, variant, actions)) is not None:
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

    def _revive(self, env: Environment, task: TaskInstance, reference: list[Frame], action: Action, when: str) -> None:
        rule = Rule.RESET_ENSURE_LIVE
        obs = self._reset(rule, env, task, f" {when}")
        found = first_difference(reference[0].obs, snapshot(obs), "obs")
        if found is not None:
            raise ConformanceError(
                rule,
                f"reset({label(task)}) {when} returned another first observation than a fresh reset ({found}); "
                "reset must bring the env back to the placed episode, never keep or pick another",
            )
        if len(reference) > 1:
            result = self._step(rule, env, action, f"step 1 after reset({label(task)}) {when}")
            found = frame_difference(reference[1], Frame.of(result))
            if found is not None:
                raise ConformanceError(
                    rule,
                    f"after reset({label(task)}) {when}, step 1 differs from a fresh episode's step 1 ({found}); "
                    "reset must restore the whole simulator state, not only the observation",
                )

    def rule_observe_pure(self) -> None:
        rule = Rule.OBSERVE_PURE
        for task in self.tasks:
            actions = self._actions(task)
            with self._env() as env:
                reference = self._run(rule, env, task, actions)
            with self._env() as env:
                obs = snapshot(self._reset(rule, env, task))
                self._observe_twice(env, obs, f"right after reset({label(task)})", "reset")
                for i, action in enumerate(actions[: len(reference) - 1], 1):
                    frame = Frame.of(self._step(rule, env, action, f"step {i} of {label(task)}"))
                    found = frame_difference(reference[i], frame)
                    if found is not None:
                        raise ConformanceError(
                            rule,
                            f"step {i} of {label(task)} differs when observe() is called between steps ({found}, "
                            "without vs with observe calls); observe() must not advance or perturb the env",
                        )
                    if frame.ended:
                        break
                    self._observe_twice(env, frame.obs, f"after step {i} of {label(task)}", f"step {i}")

    def _observe_twice(self, env: Environment, expected: Any, when: str, source: str) -> None:
        rule = Rule.OBSERVE_PURE
        first = snapshot(call_under(rule, f"observe() {when}", env.observe))
        second = snapshot(call_under(rule, f"observe() {when}", env.observe))
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
                obs = call_under(rule, "observe() after the end", env.observe)
                difference = first_difference(frames[-1].obs, snapshot(obs), "obs")
                if difference is not None:
                    raise ConformanceError(
                        rule,
                        f"after {label(task)} ended at step {len(frames) - 1}, the {call} observe() differs from the "
                        f"terminal StepResult.obs ({difference}, terminal vs observed)",
                    )

    def rule_hold_action(self) -> None:
        rule = Rule.HOLD_ACTION
        with self._env() as env:
            if not env.capabilities.hold_action:
                return
            task = self.tasks[0]
            self._reset(rule, env, task)
            action = call_under(rule, "hold_action()", env.hold_action)
            found = space_problem(self.spec.action_space, action, "hold_action()", exact_dtype=False)
            if found is not None:
                raise ConformanceError(rule, found)
            self._step(rule, env, action, f"step 1 of {label(task)} with the hold action")

    def rule_close(self) -> None:
        rule = Rule.CLOSE
        env = self._make_env()
        call_under(rule, "close() on a fresh env", env.close)
        env = self._make_env()
        try:
            self._learn(env)
            task = self.tasks[0]
            self._reset(rule, env, task)
            self._step(rule, env, self._actions(task)[0], f"step 1 of {label(task)}")
        except BaseException:
            with contextlib.suppress(Exception):
                env.close()
            raise
        call_under(rule, "close() after an episode", env.close)


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
    checker = EnvironmentChecker(make_env, tasks, randomized=randomized, steps=steps, policy=policy)
    for rule in ENVIRONMENT_RULES:
        checker.check(rule)
