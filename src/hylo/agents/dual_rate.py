"""The dual-rate agent: a Policy at control rate and a Reasoner on events.

The Reasoner (an LLM/VLM planner, say) is slow; the Policy (a VLA) is fast. The Reasoner is triggered by
`episode_start`, `subgoal_reached`, `failure_signal` and `periodic` events and runs in its own thread; its result is
committed by an atomic swap of the subgoal, and the Policy always acts on the most recently committed subgoal.

Under the virtual clock the Reasoner's latency is a fixed number of control steps: a reasoning triggered at step s
is committed at the first action request at or after step s + `reasoner_latency_steps`, whatever the machine's speed,
so runs are deterministic (if the Reasoner is slower than that in wall time, the agent waits: simulated time does not
pass meanwhile). Under the wall clock it is committed as soon as it is done and the control loop never waits for it.
The clock follows the Kernel's (`ctx.clock`) unless one is given. The Reasoner gets its own seed, derived from the
episode's.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from hylo.core.agent import agent_name, containers_of, notify, requirements_of
from hylo.core.chunk import ActionChunk
from hylo.core.context import EpisodeContext
from hylo.core.jsonable import snapshot
from hylo.core.status import EpisodeOutcome
from hylo.core.timing import Clock, parse_clock
from hylo.core.types import Observation, StepResult, derive_seed


class Policy(Protocol):
    def act(self, obs: Observation, subgoal: Any) -> ActionChunk: ...


class Reasoner(Protocol):
    def reason(self, obs: Observation, trigger: str, subgoal: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Commit:
    """A committed subgoal: what, when (step), and why (trigger)."""

    subgoal: Any
    step: int
    trigger: str
    version: int


class _Reasoning:
    """One Reasoner call in flight, in its own thread."""

    def __init__(self, reasoner: Reasoner, obs: Observation, trigger: str, subgoal: Any, step: int) -> None:
        self.trigger = trigger
        self.step = step
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(reasoner, obs, trigger, subgoal), daemon=True, name="hylo-reasoner"
        )
        self._thread.start()

    def _run(self, reasoner: Reasoner, obs: Observation, trigger: str, subgoal: Any) -> None:
        try:
            self.result = reasoner.reason(obs, trigger, subgoal)
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()


class DualRateAgent:
    """Composes a fast Policy and a slow, event-triggered Reasoner into one agent."""

    def __init__(
        self,
        policy: Policy,
        reasoner: Reasoner,
        *,
        period_steps: int | None = None,
        clock: Clock | str | None = None,
        reasoner_latency_steps: int = 0,
        reasoner_timeout_s: float = 300.0,
        initial_subgoal: Any = None,
    ) -> None:
        if period_steps is not None and period_steps < 1:
            raise ValueError(f"period_steps must be >= 1 or None, got {period_steps}")
        if reasoner_latency_steps < 0:
            raise ValueError(f"reasoner_latency_steps must be >= 0, got {reasoner_latency_steps}")
        self.policy = policy
        self.reasoner = reasoner
        self.period_steps = period_steps
        self.clock: Clock | None = None if clock is None else parse_clock(clock)
        if not reasoner_timeout_s > 0:
            raise ValueError(f"reasoner_timeout_s must be > 0, got {reasoner_timeout_s}")
        self.reasoner_timeout_s = reasoner_timeout_s
        self.reasoner_latency_steps = reasoner_latency_steps
        self.initial_subgoal = initial_subgoal
        self.name = f"dual_rate({agent_name(policy)}+{agent_name(reasoner)})"
        self.requirements = requirements_of(policy)
        self.containers = containers_of(policy) + containers_of(reasoner)
        self.commits: list[Commit] = []
        self._committed = Commit(initial_subgoal, 0, "initial", 0)
        self._inflight: _Reasoning | None = None
        self._queued: str | None = None
        self._step = 0
        self._last_trigger_step = 0
        self._failure = False
        self._started = False
        self._clock = self.clock or Clock.VIRTUAL
        self.ctx: EpisodeContext | None = None

    @property
    def subgoal(self) -> Any:
        """The most recently committed subgoal (what the Policy acts on)."""
        return self._committed.subgoal

    def signal_failure(self) -> None:
        """Ask for a replan at the next action request (e.g. from an online critic)."""
        self._failure = True

    def reset(self, ctx: EpisodeContext) -> None:
        self._wait_inflight()
        self.ctx = ctx
        self.commits = []
        self._committed = Commit(self.initial_subgoal, 0, "initial", 0)
        self._inflight = None
        self._queued = None
        self._step = 0
        self._last_trigger_step = 0
        self._failure = False
        self._started = False
        self._clock = self.clock or ctx.clock
        notify((self.policy,), "reset", ctx)
        # Its own seed and generator: the two run on different threads, and sharing one generator would make the
        # draws depend on thread timing.
        notify((self.reasoner,), "reset", dataclasses.replace(ctx, seed=derive_seed(ctx.seed, "reasoner"), _rng=None))

    def act(self, obs: Observation) -> ActionChunk:
        self._collect()
        trigger = self._trigger(obs)
        if trigger is not None:
            if self._inflight is None:
                self._launch(obs, trigger)
                self._collect()
            else:
                self._queued = trigger  # the latest reason to replan wins; one call in flight at a time
        elif self._inflight is None and self._queued is not None:
            self._launch(obs, self._queued)
            self._collect()
        return self.policy.act(obs, self._committed.subgoal)

    def on_step(self, result: StepResult) -> None:
        self._step += 1
        if result.info.get("failure_signal"):
            self._failure = True
        notify((self.policy,), "on_step", result)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self._wait_inflight()
        notify((self.policy, self.reasoner), "on_episode_end", outcome)

    # -- internals ----------------------------------------------------------------------------------------------

    def _trigger(self, obs: Observation) -> str | None:
        if not self._started:
            self._started = True
            return "episode_start"
        if self._failure:
            self._failure = False
            return "failure_signal"
        reached = getattr(self.policy, "subgoal_reached", None)
        if reached is not None and reached(obs, self._committed.subgoal):
            return "subgoal_reached"
        if self.period_steps is not None and self._step - self._last_trigger_step >= self.period_steps:
            return "periodic"
        return None

    def _launch(self, obs: Observation, trigger: str) -> None:
        self._last_trigger_step = self._step
        self._queued = None  # this reasoning sees the latest observation: an older queued reason is answered too
        self._inflight = _Reasoning(self.reasoner, snapshot(obs), trigger, self._committed.subgoal, self._step)

    def _collect(self) -> None:
        """Commit the in-flight reasoning if its time has come (virtual) or it is done (wall)."""
        inflight = self._inflight
        if inflight is None:
            return
        if self._clock is Clock.VIRTUAL:
            if self._step < inflight.step + self.reasoner_latency_steps:
                return
            # Simulated time says it is done: waiting here costs wall time only, never simulated time.
            if not inflight.done.wait(self.reasoner_timeout_s):
                raise TimeoutError(f"reasoner did not answer within {self.reasoner_timeout_s:g} s")
        elif not inflight.done.is_set():
            return
        self._inflight = None
        if inflight.error is not None:
            raise inflight.error
        commit = Commit(inflight.result, self._step, inflight.trigger, self._committed.version + 1)
        self._committed = commit  # the atomic swap: one reference assignment
        self.commits.append(commit)
        if self.ctx is not None:
            self.ctx.emit(
                "agent.decision",
                {"subgoal": inflight.result, "trigger": inflight.trigger, "triggered_at": inflight.step},
            )

    def _wait_inflight(self) -> None:
        if self._inflight is not None:
            self._inflight.done.wait(min(5.0, self.reasoner_timeout_s))
            self._inflight = None
