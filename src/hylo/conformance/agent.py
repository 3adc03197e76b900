"""The agent rules, and `check_agent`, which checks them all. Every episode runs through the real Kernel."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium.spaces as spaces
import numpy as np

from hylo.conformance.compare import first_difference
from hylo.conformance.errors import ConformanceError, Rule
from hylo.conformance.spec import space_problem, spec_of
from hylo.conformance.tasks import default_tasks, label, reseeded
from hylo.core.agent import acts_in_batches, agent_name, check_compatible, notify, shared_hook
from hylo.core.bus import EventBus, MemoryRecorder
from hylo.core.chunk import ActionChunk, as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.errors import IncompatibleComponents
from hylo.core.kernel import Kernel
from hylo.core.signals import ContainerSet
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import StepResult, TaskInstance


def _chunk_problem(value: Any, space: spaces.Space[Any]) -> str | None:
    """Why what `act` returned is not a chunk (or a single action) of actions in `space`, or None."""
    if value is None:
        return "returned None, not an ActionChunk or an action"
    if isinstance(value, ActionChunk):
        for i, action in enumerate(value.actions):
            found = space_problem(space, action, f"chunk.actions[{i}]", exact_dtype=False)
            if found is not None:
                return f"{found} (in a chunk of {len(value)})"
        return None
    found = space_problem(space, value, "the returned action", exact_dtype=False)
    if found is not None and isinstance(value, (list, tuple, np.ndarray)):
        found += "; to return several actions, wrap them in ActionChunk"
    return found


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


class _BatchProbe:
    """Stands in for the agent inside the Kernel and asks a twin of it, built by the same factory, for a batch of one
    at every `act`: the twin is reset with a context of its own (same seed, task and spec) and told every step, as
    the policy host tells a shared agent. The first difference is recorded, not raised (see `_ActProbe`)."""

    def __init__(self, agent: Any, twin: Any) -> None:
        self._agent = agent
        self._twin = twin
        self._twin_ctx: EpisodeContext | None = None
        self._on_step = shared_hook(twin, "on_step")
        self._on_end = shared_hook(twin, "on_episode_end")
        self.name = agent_name(agent)
        self.calls = 0
        self.problem: str | None = None

    def reset(self, ctx: EpisodeContext) -> None:
        notify([self._agent], "reset", ctx)
        self._twin_ctx = EpisodeContext(
            seed=ctx.seed,
            env_spec=ctx.env_spec,
            task=ctx.task,
            containers=ContainerSet(getattr(self._twin, "containers", ()) or ()),
        )
        notify([self._twin], "reset", self._twin_ctx)

    def act(self, obs: Any) -> Any:
        self.calls += 1
        value = self._agent.act(obs)
        if self.problem is None and self._twin_ctx is not None:
            self.problem = _batch_problem(value, self._twin.act_batch([obs], [self._twin_ctx]), self.calls)
        return value

    def on_step(self, result: StepResult) -> None:
        notify([self._agent], "on_step", result)
        if self._on_step is not None and self._twin_ctx is not None:
            self._on_step(result, self._twin_ctx)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        notify([self._agent], "on_episode_end", outcome)
        if self._on_end is not None and self._twin_ctx is not None:
            self._on_end(outcome, self._twin_ctx)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._agent, name)


def _batch_problem(single: Any, batch: Any, call: int) -> str | None:
    """How `act_batch([obs], [ctx])` differs from `act(obs)` (`single`), or None."""
    if isinstance(batch, (str, bytes)) or not isinstance(batch, Sequence) or len(batch) != 1:
        size = len(batch) if isinstance(batch, Sequence) else type(batch).__name__
        return f"act() call {call}: act_batch of one observation returned {size!r}, not a sequence of one chunk"
    try:
        mine, theirs = as_chunk(single), as_chunk(batch[0])
    except (TypeError, ValueError) as exc:
        return f"act() call {call}: act_batch returned an invalid chunk: {exc}"
    found = first_difference(list(mine.actions), list(theirs.actions), "actions")
    if found is None and mine.execution_steps != theirs.execution_steps:
        found = f"execution_steps {mine.execution_steps} vs {theirs.execution_steps}"
    return None if found is None else f"act() call {call}: act and act_batch of one differ ({found})"


_Actions = list[tuple[int, Any, bool]]
"""One episode's action events as (step, action, hold): what two episodes of the same task are compared on."""


def _detail_tail(detail: str | None, lines: int = 6) -> str:
    if not detail:
        return ""
    return "\n    " + "\n    ".join(detail.strip().splitlines()[-lines:])


class AgentChecker:
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
        self._tasks: tuple[TaskInstance, ...] | None = None if tasks is None else tuple(tasks)
        self._max_steps = max_steps
        self._played = False
        self._play_problem: ConformanceError | None = None

    def check(self, rule: Rule) -> None:
        method: Callable[[], None] | None = getattr(self, "rule_" + rule.name.lower(), None)
        if method is None:
            raise ValueError(f"{rule.value!r} is not an agent rule")
        method()

    @contextlib.contextmanager
    def _pair(self) -> Iterator[tuple[Any, Environment, tuple[TaskInstance, ...]]]:
        env = self._make_env()
        try:
            spec = spec_of(env)
            if self._tasks is None:
                self._tasks = default_tasks(spec)
            agent = self._make_agent()
            yield agent, env, self._tasks
        finally:
            with contextlib.suppress(Exception):
                env.close()

    def _all_tasks(self) -> tuple[TaskInstance, ...]:
        if self._tasks is None:
            env = self._make_env()
            try:
                self._tasks = default_tasks(spec_of(env))
            finally:
                with contextlib.suppress(Exception):
                    env.close()
        return self._tasks

    def _episodes(self, agent: Any, env: Environment, tasks: Sequence[TaskInstance]) -> list[_Actions]:
        """Run `tasks` in order with one Kernel; check each episode's chunks and status; return the action events."""
        probe = _ActProbe(agent, env.spec.action_space)
        recorder = MemoryRecorder()
        bus = EventBus(run_id="conformance")
        bus.subscribe(recorder)
        try:
            kernel = Kernel(env, probe, max_steps=self._max_steps or env.spec.max_episode_steps or 100, bus=bus)
        except IncompatibleComponents as exc:
            raise ConformanceError(Rule.AGENT_BINDS, str(exc)) from exc
        episodes: list[_Actions] = []
        try:
            for task in tasks:
                recorder.events.clear()
                outcome = kernel.run(task)
                if probe.problem is not None:
                    raise ConformanceError(Rule.AGENT_ACTIONS, f"in {label(task)}, {probe.problem}")
                if outcome.status is EpisodeStatus.ERROR:
                    raise ConformanceError(
                        Rule.AGENT_EPISODES,
                        f"{label(task)} ended as error after {outcome.steps} steps: {outcome.reason}"
                        + _detail_tail(outcome.detail),
                    )
                if outcome.status is EpisodeStatus.INFRA_INVALID:
                    raise ConformanceError(
                        Rule.AGENT_EPISODES,
                        f"{label(task)} ended as infra_invalid after {outcome.steps} steps: {outcome.reason} — the "
                        "environment failed, not the agent; check it with check_environment first"
                        + _detail_tail(outcome.detail),
                    )
                episodes.append([(event.step, event.action, event.hold) for event in recorder.of("action")])
        finally:
            kernel.close()
        return episodes

    def rule_agent_binds(self) -> None:
        with self._pair() as (agent, env, _):
            try:
                check_compatible(env.spec, agent, env.capabilities)
            except IncompatibleComponents as exc:
                raise ConformanceError(Rule.AGENT_BINDS, str(exc)) from exc

    def rule_agent_actions(self) -> None:
        self._judge_played_tasks()

    def rule_agent_episodes(self) -> None:
        self._judge_played_tasks()

    def _judge_played_tasks(self) -> None:
        """Play the tasks with one Kernel, once per checker, and raise the first problem found in them.

        `agent-actions` and `agent-episodes` are judged on the same episodes, so the second rule judged costs no
        second play. A bad action ends its episode in error, so it is found first and reported under its own rule.
        """
        if not self._played:
            try:
                with self._pair() as (agent, env, tasks):
                    self._episodes(agent, env, tasks)
            except ConformanceError as error:
                # Kept as (rule, problem) only: the traceback would keep the episode's agent and env alive.
                self._play_problem = ConformanceError(error.rule, error.problem)
                self._played = True
                raise
            self._played = True
        if self._play_problem is not None:
            raise ConformanceError(self._play_problem.rule, self._play_problem.problem)

    def rule_agent_deterministic(self) -> None:
        for task in self._all_tasks():
            with self._pair() as (agent, env, _):
                (first,) = self._episodes(agent, env, [task])
            with self._pair() as (agent, env, _):
                (second,) = self._episodes(agent, env, [task])
            found = _actions_difference(first, second)
            if found is not None:
                raise ConformanceError(
                    Rule.AGENT_DETERMINISTIC,
                    f"two fresh (agent, env) pairs on {label(task)} acted differently at {found}; draw randomness "
                    "only from ctx.seed (ctx.rng), never from a global or unseeded generator",
                )

    def rule_agent_batch(self) -> None:
        with self._pair() as (agent, env, tasks):
            if not acts_in_batches(agent):
                return
            probe = _BatchProbe(agent, self._make_agent())
            bus = EventBus(run_id="conformance")
            try:
                kernel = Kernel(env, probe, max_steps=self._max_steps or env.spec.max_episode_steps or 100, bus=bus)
            except IncompatibleComponents as exc:
                raise ConformanceError(Rule.AGENT_BINDS, str(exc)) from exc
            try:
                for task in tasks:
                    kernel.run(task)
                    if probe.problem is not None:
                        raise ConformanceError(Rule.AGENT_BATCH, f"in {label(task)}, {probe.problem}")
            finally:
                kernel.close()

    def rule_agent_reset(self) -> None:
        with self._pair() as (agent, env, tasks):
            order = [*tasks, reseeded(tasks[0], 1), tasks[0]]
            episodes = self._episodes(agent, env, order)
        found = _actions_difference(episodes[0], episodes[-1])
        if found is not None:
            between = ", ".join(label(task) for task in order[1:-1])
            raise ConformanceError(
                Rule.AGENT_RESET,
                f"{label(tasks[0])} run again after {between} gave other actions than its first run, at {found}; "
                "reset(ctx) must clear per-episode state and re-seed randomness from ctx.seed",
            )


def _actions_difference(a: _Actions, b: _Actions) -> str | None:
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
    Rule.AGENT_EPISODES,
    Rule.AGENT_DETERMINISTIC,
    Rule.AGENT_RESET,
    Rule.AGENT_BATCH,
)
"""The agent rules, in the order `check_agent` checks them; `agent-episodes` is judged on the episodes played for
`agent-actions`, without playing them again."""


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
    checker = AgentChecker(make_agent, make_env, tasks, max_steps=max_steps)
    for rule in AGENT_RULES:
        checker.check(rule)
