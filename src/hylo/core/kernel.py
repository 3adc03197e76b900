"""The Kernel owns the episode loop (004 §2): Agent → ActionChunk → ChunkExecutor → SafetyShield → Environment → Trace.

`Kernel.run(task)` never raises for anything that happens inside an episode: every path ends in an `EpisodeOutcome`
with an honest status. Only bind-time problems (`IncompatibleComponents`, bad arguments) raise, from the constructor.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from hylo.core.agent import agent_name, check_compatible
from hylo.core.bus import EventBus
from hylo.core.chunk import ActionChunk, ChunkExecutor, as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.errors import (
    AgentTimeout,
    IncompatibleComponents,
    InvalidAction,
    SafetyAbort,
    SimulationDiverged,
)
from hylo.core.events import (
    ActionEvent,
    AgentChunkEvent,
    EpisodeEndEvent,
    EpisodeStartEvent,
    ObservationEvent,
    SafetyReviewEvent,
    SignalEvent,
    StepResultEvent,
)
from hylo.core.jsonable import jsonable
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.timing import Clock, RealtimeTiming, SyncTiming, Timing, parse_timing
from hylo.core.types import Action, Observation, StepResult, TaskInstance


class _EndEpisode(Exception):
    """Internal: carries an episode's outcome out of the loop."""

    def __init__(self, outcome: EpisodeOutcome) -> None:
        self.outcome = outcome


def _raised(who: str, exc: BaseException) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{who} raised {type(exc).__name__}" + (f": {message}" if message else "")


def _detail(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).strip()


def _obs_summary(obs: Any) -> dict[str, Any]:
    summary = jsonable(obs)
    return summary if isinstance(summary, dict) else {"value": summary}


class Kernel:
    """Runs episodes of one agent on one environment.

    - `shield`: a `SafetyShield`; None means the default shield (non-finite → reject, out of bounds → clip)
    - `timing`: `SyncTiming()` (default), `RealtimeTiming(...)`, or "sync" / "realtime"
    - `act_timeout_s`: an `act` slower than this ends the episode as `error`, reason `timeout`
    - `hard_timeout`: run the agent in a child process so that a hung `act` is killed at `act_timeout_s`
    - `max_steps`: the step budget; defaults to the env's `max_episode_steps`
    - `bus`: the EventBus that receives the trace (subscribe recorders to it)
    """

    def __init__(
        self,
        env: Environment,
        agent: Any,
        shield: SafetyShield | None = None,
        timing: Timing | str | None = None,
        act_timeout_s: float | None = None,
        max_steps: int | None = None,
        *,
        hard_timeout: bool = False,
        bus: EventBus | None = None,
    ) -> None:
        spec = env.spec
        self.env = env
        self.spec = spec
        self.timing = parse_timing(timing)
        budget = spec.max_episode_steps if max_steps is None else max_steps
        if budget is None:
            raise ValueError(f"max_steps is required: env {spec.name!r} declares no max_episode_steps")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {budget!r}")
        self.max_steps = budget
        if act_timeout_s is not None and not act_timeout_s > 0:
            raise ValueError(f"act_timeout_s must be > 0, got {act_timeout_s!r}")
        self.act_timeout_s = act_timeout_s

        check_compatible(spec, agent)
        if isinstance(self.timing, RealtimeTiming) and not env.capabilities.hold_action:
            raise IncompatibleComponents(
                f"realtime timing needs an environment with a hold action; {spec.name!r} declares none"
            )
        self.shield = SafetyShield() if shield is None else shield
        self.shield.bind(spec.action_space)

        if hard_timeout:
            if act_timeout_s is None:
                raise ValueError("hard_timeout needs act_timeout_s")
            from hylo.core.isolation import ProcessAgent

            if not isinstance(agent, ProcessAgent):
                agent = ProcessAgent.from_instance(agent, act_timeout_s=act_timeout_s)
        self.agent = agent
        self.agent_name = agent_name(agent)
        self.bus = bus if bus is not None else EventBus()
        self.containers = ContainerSet(getattr(agent, "containers", ()) or ())
        self._act: Callable[[Any], Any] = agent.act
        self._on_step: Callable[[StepResult], Any] | None = getattr(agent, "on_step", None)
        self._on_signal: Callable[[Signal], Any] | None = getattr(agent, "on_signal", None)
        self._listens = bool(len(self.containers)) or self._on_signal is not None
        self._executor = ChunkExecutor()
        self._last_task: TaskInstance | None = None
        self._steps = 0
        self._interventions = 0
        self._return = 0.0

    # -- public -------------------------------------------------------------------------------------------------

    def run(self, task: TaskInstance) -> EpisodeOutcome:
        """Run one episode of `task` and return its outcome. Never raises for what happens inside the episode."""
        bus = self.bus
        bus.begin_episode(task.episode_id)
        if self._last_task != task:
            self._signal(Signal.EPISODE_RESET)
            self._last_task = task
        self._signal(Signal.RUN_START)
        self._steps = 0
        self._interventions = 0
        self._return = 0.0
        self._executor.clear()
        if bus.active:
            bus.emit(
                EpisodeStartEvent,
                task={
                    "episode_id": task.episode_id,
                    "benchmark": task.benchmark,
                    "split": task.split,
                    "task": task.task,
                    "index": task.index,
                    "base_seed": task.base_seed,
                    "instruction": task.instruction,
                },
                seed=task.seed,
                agent=self.agent_name,
                guards=self.shield.guard_names,
                timing=self.timing.mode,
            )
        try:
            outcome = self._episode(task)
        except _EndEpisode as end:
            outcome = end.outcome
        if bus.active:
            bus.emit(
                EpisodeEndEvent,
                status=outcome.status.value,
                success=outcome.success,
                steps=outcome.steps,
                reason=outcome.reason,
                safety_interventions=outcome.safety_interventions,
                detail=outcome.detail,
            )
        on_end = getattr(self.agent, "on_episode_end", None)
        if on_end is not None:
            try:
                on_end(outcome)
            except Exception as exc:
                # The verdict is already in; an agent that fails while tidying up cannot turn it into another.
                outcome = self._note(outcome, f"on_episode_end: {_raised('agent', exc)}")
        self._signal(Signal.RUN_END)
        return outcome

    def close(self) -> None:
        """Release what the Kernel started (an isolated agent's process); the env is the caller's to close."""
        close = getattr(self.agent, "close", None)
        if callable(close):
            close()

    # -- the episode ----------------------------------------------------------------------------------------------

    def _episode(self, task: TaskInstance) -> EpisodeOutcome:
        try:
            obs = self.env.reset(task)
        except Exception as exc:
            return self._end(EpisodeStatus.INFRA_INVALID, _raised("env reset", exc), _detail(exc))
        if self.bus.active:
            self.bus.emit(ObservationEvent, obs=_obs_summary(obs))
        ctx = EpisodeContext(
            seed=task.seed,
            env_spec=self.spec,
            task=task,
            containers=self.containers,
            bus=self.bus,
            read_privileged=self.env.privileged_state if self.env.capabilities.privileged_state else None,
        )
        reset = getattr(self.agent, "reset", None)
        if reset is not None:
            try:
                reset(ctx)
            except Exception as exc:
                return self._end(EpisodeStatus.ERROR, _raised("agent reset", exc), _detail(exc))
        timing = self.timing
        if isinstance(timing, SyncTiming):
            return self._sync_loop(obs)
        if timing.clock is Clock.VIRTUAL:
            return self._virtual_loop(obs, timing)
        return self._wall_loop(obs, timing)

    def _sync_loop(self, obs: Observation) -> EpisodeOutcome:
        executor = self._executor
        bus = self.bus
        max_steps = self.max_steps
        listens = self._listens
        while self._steps < max_steps:
            if listens or bus.active:
                self._signal(Signal.STEP_START)
            if executor.empty:
                chunk, latency = self._call_act(obs)
                executor.load(chunk, step=self._steps)
                if bus.active:
                    self._trace_chunk(chunk, latency, self._steps, 0)
            obs = self._advance(executor.next(), False)
        return self._end(EpisodeStatus.FAILURE, "max_steps")

    def _virtual_loop(self, obs: Observation, timing: RealtimeTiming) -> EpisodeOutcome:
        executor = self._executor
        dt = self.spec.dt
        pending: tuple[int, int, ActionChunk, float] | None = None
        holds = 0
        while self._steps < self.max_steps:
            step = self._steps
            self._signal(Signal.STEP_START)
            if pending is not None and pending[1] <= step:
                self._merge(pending[2], pending[0], step, pending[3])
                pending = None
            if pending is None and executor.remaining <= timing.refill_steps:
                chunk, latency = self._call_act(obs)
                ready = step + timing.latency_steps(latency, dt)
                if ready <= step:
                    self._merge(chunk, step, step, latency)
                else:
                    pending = (step, ready, chunk, latency)
            if executor.empty:
                if holds >= timing.max_hold_steps:
                    return self._end(EpisodeStatus.FAILURE, "watchdog", f"{holds} consecutive hold steps")
                holds += 1
                obs = self._advance(self.env.hold_action(), True)
            else:
                holds = 0
                obs = self._advance(executor.next(), False)
        return self._end(EpisodeStatus.FAILURE, "max_steps")

    def _wall_loop(self, obs: Observation, timing: RealtimeTiming) -> EpisodeOutcome:
        executor = self._executor
        dt = self.spec.dt
        paced = not self.env.capabilities.self_paced
        call: _ThreadedCall | None = None
        holds = 0
        start = time.perf_counter()
        try:
            while self._steps < self.max_steps:
                step = self._steps
                self._signal(Signal.STEP_START)
                if call is not None and call.done.is_set():
                    if call.error is not None:
                        return self._agent_failed(call.error)
                    latency = call.latency
                    if self.act_timeout_s is not None and latency > self.act_timeout_s:
                        return self._agent_failed(AgentTimeout(latency, self.act_timeout_s))
                    self._merge(self._coerce(call.result), call.step, step, latency)
                    call = None
                elif (
                    call is not None
                    and self.act_timeout_s is not None
                    and time.perf_counter() - call.started > self.act_timeout_s
                ):
                    return self._agent_failed(AgentTimeout(None, self.act_timeout_s))
                if call is None and executor.remaining <= timing.refill_steps:
                    call = _ThreadedCall(self._act, obs, step)
                if executor.empty:
                    if holds >= timing.max_hold_steps:
                        return self._end(EpisodeStatus.FAILURE, "watchdog", f"{holds} consecutive hold steps")
                    holds += 1
                    obs = self._advance(self.env.hold_action(), True)
                else:
                    holds = 0
                    obs = self._advance(executor.next(), False)
                if paced:
                    delay = start + self._steps * dt - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
            return self._end(EpisodeStatus.FAILURE, "max_steps")
        finally:
            if call is not None:
                # Let an in-flight act finish before the agent is reset for another episode (bounded wait).
                call.done.wait(self.act_timeout_s or 1.0)

    # -- one step -------------------------------------------------------------------------------------------------

    def _call_act(self, obs: Observation) -> tuple[ActionChunk, float]:
        t0 = time.perf_counter()
        try:
            raw = self._act(obs)
        except Exception as exc:
            raise _EndEpisode(self._agent_failed(exc)) from None
        latency = time.perf_counter() - t0
        if self.act_timeout_s is not None and latency > self.act_timeout_s:
            raise _EndEpisode(self._agent_failed(AgentTimeout(latency, self.act_timeout_s)))
        return self._coerce(raw), latency

    def _coerce(self, raw: object) -> ActionChunk:
        try:
            chunk = as_chunk(raw)
            if not chunk.actions or not 1 <= chunk.execution_steps <= len(chunk.actions):
                raise ValueError(f"{chunk!r} has no action to execute")
            return chunk
        except (TypeError, ValueError) as exc:
            raise _EndEpisode(
                self._end(EpisodeStatus.ERROR, f"agent returned an invalid chunk: {exc}", _detail(exc))
            ) from None

    def _merge(self, chunk: ActionChunk, requested_at: int, step: int, latency: float) -> None:
        dropped = self._executor.load(chunk, skip=step - requested_at, step=step)
        if self.bus.active:
            self._trace_chunk(chunk, latency, requested_at, dropped)

    def _trace_chunk(self, chunk: ActionChunk, latency: float, requested_at: int, dropped: int) -> None:
        self.bus.emit(
            AgentChunkEvent,
            size=len(chunk.actions),
            execution_steps=chunk.execution_steps,
            latency_s=latency,
            dropped=dropped,
            requested_at=requested_at,
            actions=[jsonable(a) for a in chunk.actions],
        )

    def _advance(self, action: Action, hold: bool) -> Observation:
        """Review, execute and trace one action; return the new observation or end the episode."""
        bus = self.bus
        try:
            review = self.shield.review(action, self.spec.action_space)
        except SafetyAbort as abort:
            self._interventions += 1
            if bus.active:
                bus.emit(
                    SafetyReviewEvent,
                    approved=False,
                    modified=False,
                    reasons=[abort.reason],
                    guard=abort.guard,
                )
            raise _EndEpisode(self._end(EpisodeStatus.SAFETY_ABORT, f"{abort.guard}: {abort.reason}")) from None
        if review.modified:
            self._interventions += 1
            self._executor.clear()
        if bus.active:
            bus.emit(SafetyReviewEvent, approved=True, modified=review.modified, reasons=list(review.reasons))
            bus.emit(ActionEvent, step=self._steps, action=jsonable(review.action), hold=hold)
        try:
            result = self.env.step(review.action)
        except SimulationDiverged as exc:
            raise _EndEpisode(self._end(EpisodeStatus.INFRA_INVALID, str(exc), _detail(exc))) from None
        except InvalidAction as exc:
            raise _EndEpisode(
                self._end(EpisodeStatus.ERROR, f"env rejected the agent's action: {exc}", _detail(exc))
            ) from None
        except Exception as exc:
            raise _EndEpisode(self._end(EpisodeStatus.INFRA_INVALID, _raised("env step", exc), _detail(exc))) from None
        self._steps += 1
        self._return += result.reward
        if bus.active:
            bus.sim_time = self._steps * self.spec.dt
            bus.emit(
                StepResultEvent,
                step=self._steps - 1,
                reward=float(result.reward),
                terminated=bool(result.terminated),
                truncated=bool(result.truncated),
                success=bool(result.success),
                info=jsonable(result.info) if result.info else {},
            )
            bus.emit(ObservationEvent, obs=_obs_summary(result.obs), terminal=result.terminated or result.truncated)
        if self._on_step is not None:
            try:
                self._on_step(result)
            except Exception as exc:
                raise _EndEpisode(self._agent_failed(exc, "agent on_step")) from None
        if self._listens or bus.active:
            self._signal(Signal.STEP_END)
        if result.success:
            raise _EndEpisode(self._end(EpisodeStatus.SUCCESS, "success"))
        if result.terminated:
            raise _EndEpisode(self._end(EpisodeStatus.FAILURE, "terminated"))
        if result.truncated:
            raise _EndEpisode(self._end(EpisodeStatus.FAILURE, "truncated"))
        return result.obs  # type: ignore[return-value]

    # -- helpers --------------------------------------------------------------------------------------------------

    def _signal(self, signal: Signal) -> None:
        if self._listens:
            self.containers.on_signal(signal)
            if self._on_signal is not None:
                self._on_signal(signal)
        if self.bus.active:
            if signal is Signal.STEP_START:
                scope = f"step:{self._steps}"
            elif signal is Signal.STEP_END:
                scope = f"step:{self._steps - 1}"
            else:
                scope = self.bus.episode_id
            self.bus.emit(SignalEvent, signal=signal.value, scope_id=scope)

    def _agent_failed(self, exc: BaseException, who: str = "agent") -> EpisodeOutcome:
        if isinstance(exc, AgentTimeout):
            return self._end(EpisodeStatus.ERROR, "timeout", str(exc))
        return self._end(EpisodeStatus.ERROR, _raised(who, exc), _detail(exc))

    def _end(self, status: EpisodeStatus, reason: str, detail: str | None = None) -> EpisodeOutcome:
        return EpisodeOutcome(
            status=status,
            success=status is EpisodeStatus.SUCCESS,
            steps=self._steps,
            reason=reason,
            safety_interventions=self._interventions,
            detail=detail,
            metrics={"return": self._return},
        )

    @staticmethod
    def _note(outcome: EpisodeOutcome, note: str) -> EpisodeOutcome:
        detail = f"{outcome.detail}\n{note}" if outcome.detail else note
        return EpisodeOutcome(
            outcome.status,
            outcome.success,
            outcome.steps,
            outcome.reason,
            outcome.safety_interventions,
            detail,
            outcome.metrics,
        )


class _ThreadedCall:
    """One `act` running in a daemon thread (wall-clock realtime): the loop never waits for it."""

    __slots__ = ("done", "error", "latency", "result", "started", "step")

    def __init__(self, act: Callable[[Any], Any], obs: Observation, step: int) -> None:
        self.step = step
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None
        self.latency = 0.0
        self.started = time.perf_counter()
        threading.Thread(target=self._run, args=(act, obs), daemon=True, name="hylo-act").start()

    def _run(self, act: Callable[[Any], Any], obs: Observation) -> None:
        try:
            self.result = act(obs)
        except Exception as exc:
            self.error = exc
        self.latency = time.perf_counter() - self.started
        self.done.set()
