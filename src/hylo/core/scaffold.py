"""The episode scaffold: what every episode loop shares — the Kernel's, a graph runner's, a served session's.

Each loop keeps only what is its own (how it steps its env, paces itself, fires its nodes); the scaffold holds the
rest, once: opening an execution (the placement's `episode_reset`, `run_start`, `episode.start`), the exchange with
the agent (asking it inline, timing and checking its answer, loading the chunk into the `ChunkExecutor`), reviewing
an action through the `SafetyShield` (one mapping from a review's fault to the episode's status), the per-step
trace, the signals (and those sent after the verdict, which cannot change it), the verdicts by name (`success`,
`termination`, `truncation`, `step_limit`, ..., as dm_env's named time steps: one mapping from a step's flags to
the episode's status), and ending the episode (`episode.end`, telling the agent, `run_end`). A failure anywhere ends
the episode by raising `EndEpisode` with its outcome, which the loop catches once (core/episode_loop.py holds the
frame that does, for the loops that run their own episodes).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hylo.core.bus import EventBus
from hylo.core.chunk import ActionChunk, ChunkExecutor, as_chunk
from hylo.core.context import EpisodeContext
from hylo.core.episode import FAULTS, EndEpisode, detail_of, noted, raised, unrecorded
from hylo.core.errors import AgentTimeout, InvalidAction, OverLimit, SafetyAbort
from hylo.core.events import (
    ActionEvent,
    AgentChunkEvent,
    EnvPrologueEvent,
    EpisodeEndEvent,
    EpisodeStartEvent,
    ObservationEvent,
    SafetyReviewEvent,
    SignalEvent,
    StepResultEvent,
)
from hylo.core.jsonable import jsonable
from hylo.core.shield import SafetyShield
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, TaskInstance

_SIGNAL_VALUES = {signal: signal.value for signal in Signal}
"""Each signal's name as the trace writes it (an enum's `value` is a property: looked up once, not per step)."""


def obs_summary(obs: Any) -> dict[str, Any]:
    """An observation as the trace shows it (a dict; any other value under `value`)."""
    summary = jsonable(obs)
    return summary if isinstance(summary, dict) else {"value": summary}


class EpisodeScaffold:
    """The machinery of one loop's episodes, reused episode after episode (the counters are reset at `open`).

    - `bus`, `shield`, `space`: where the trace goes; what reviews every action, and in which action space
    - `deliver(signal)`: hands a signal to whoever listens (containers, the agent, nodes); None when nobody does
    - `lifecycle`: whether the loop sends lifecycle signals at all (a served session does not: its harness owns
      the episode's life)
    - `auto_episode_reset`: send `episode_reset` when `open` is given a different task than last time
    - `act_timeout_s`: an agent answer slower than this ends the episode as `error`, reason `timeout`
    - `dt`: the env's control period (the trace's simulated time is `steps * dt`)
    - `clock`: what an inline `act`'s latency is measured with (seconds)

    `steps`, `interventions` and `total_return` count the open episode; `step_open` says whether an iteration is
    open (its `step_end` is still due); `scope`, when set, is the scope id of the iteration's signals (by default
    `step:<n>`, n the env step).
    """

    __slots__ = (
        "_placed", "_recorded", "_step_scope", "act_timeout_s", "auto_episode_reset", "bus", "clock", "deliver", "dt",
        "executor", "interventions", "lifecycle", "realtime", "scope", "shield", "space", "step_open", "steps",
        "total_return",
    )  # fmt: skip

    def __init__(
        self,
        bus: EventBus,
        shield: SafetyShield,
        space: Any,
        *,
        deliver: Callable[[Signal], Any] | None = None,
        lifecycle: bool = True,
        auto_episode_reset: bool = True,
        act_timeout_s: float | None = None,
        dt: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.bus = bus
        self.shield = shield
        self.space = space
        self.deliver = deliver
        self.lifecycle = lifecycle
        self.auto_episode_reset = auto_episode_reset
        self.act_timeout_s = act_timeout_s
        self.dt = dt
        self.clock = clock
        self.executor = ChunkExecutor()
        self.realtime: RealtimeCounts | None = None
        """What a realtime loop counts per episode (set by it); None under sync timing."""
        self.scope: str | None = None
        self.step_open = False
        self.steps = 0
        self.interventions = 0
        self.total_return = 0.0
        self._placed: tuple[str, str] | None = None
        self._recorded = True
        self._step_scope = ""
        """The open iteration's scope id: its `step_end` closes what its `step_start` opened, even a step that the
        shield refused (which never counted in `steps`)."""

    # -- opening --------------------------------------------------------------------------------------------------

    def begin(self, episode_id: str) -> None:
        """Start counting a new episode on the bus (its events carry `episode_id`)."""
        self.bus.begin_episode(episode_id)
        self.steps = 0
        self.interventions = 0
        self.total_return = 0.0
        self.executor.clear()
        if self.realtime is not None:
            self.realtime = RealtimeCounts(self.dt)

    def open(
        self,
        task: TaskInstance,
        *,
        agent: str,
        timing: str,
        episode_id: str | None = None,
        digest: str | None = None,
        extra: Mapping[str, Any] | None = None,
        mode: str | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        """Open the execution of the placed `task`: `episode_reset` when the placement changed, `run_start`, then
        `episode.start` (the task's fields, plus `extra`; the bind-time check's `warnings`). `episode_id` and
        `digest` default to the task's. Raises
        `EndEpisode` when a critical recorder failed in an earlier episode (nothing records this one) or a listener
        fails on a signal; call it inside the loop's `try`."""
        bus = self.bus
        episode_id = task.episode_id if episode_id is None else episode_id
        self.begin(episode_id)
        lost = unrecorded(bus)  # a critical recorder that failed before records nothing now
        self._recorded = lost is None
        if lost is not None:
            raise EndEpisode(self.infra_invalid(*lost))
        digest = task.digest if digest is None else digest
        if self.lifecycle:
            placed = (episode_id, digest)
            if self.auto_episode_reset and self._placed != placed:
                self.signal(Signal.EPISODE_RESET)
            self._placed = placed
            self.signal(Signal.RUN_START)
        if bus.active:
            fields = {
                "episode_id": episode_id,
                "benchmark": task.benchmark,
                "split": task.split,
                "task": task.task,
                "index": task.index,
                "base_seed": task.base_seed,
                "instruction": task.instruction,
                **(extra or {}),
            }
            more: dict[str, Any] = {} if mode is None else {"mode": mode}
            if warnings:
                more["warnings"] = list(warnings)
            bus.emit_trusted(
                EpisodeStartEvent,
                task=fields,
                task_digest=digest,
                seed=task.seed,
                agent=agent,
                guards=self.shield.guard_names,
                timing=timing,
                **more,
            )

    def reset_agent(self, agent: Any, ctx: EpisodeContext) -> None:
        """Hand the agent the episode's context (its `reset`, when it has one); its failure ends the episode."""
        reset = getattr(agent, "reset", None)
        if reset is not None:
            try:
                reset(ctx)
            except FAULTS as exc:
                raise EndEpisode(self.agent_failed(exc, "agent reset")) from None

    # -- chunks ---------------------------------------------------------------------------------------------------

    def check_latency(self, latency: float) -> None:
        """End the episode as `timeout` when the agent answered slower than `act_timeout_s`."""
        if self.act_timeout_s is not None and latency > self.act_timeout_s:
            raise EndEpisode(self.agent_failed(AgentTimeout(latency, self.act_timeout_s)))

    def chunk_of(self, raw: object, who: str = "agent returned") -> ActionChunk:
        """What the agent answered, as a chunk (checked when it was built), or the end of the episode as `error`."""
        try:
            return as_chunk(raw)
        except (TypeError, ValueError) as exc:
            invalid = self.error(f"{who} an invalid chunk: {exc}", detail_of(exc))
            raise EndEpisode(invalid) from None

    def answered(self, raw: object, latency: float, who: str = "agent returned") -> ActionChunk:
        """The agent's answer, which took `latency` seconds, as a chunk; or the end of the episode (too late: `timeout`;
        not a chunk: `error`)."""
        self.check_latency(latency)
        return self.chunk_of(raw, who)

    def ask(self, act: Callable[[Any], object], obs: Any) -> tuple[ActionChunk, float]:
        """Ask the agent for a chunk, inline, timing the call: (the chunk, the latency), or the end of the episode
        (the agent raised, answered too late or answered no chunk)."""
        clock = self.clock
        t0 = clock()
        try:
            raw = act(obs)
        except FAULTS as exc:
            raise EndEpisode(self.agent_failed(exc)) from None
        latency = clock() - t0
        return self.answered(raw, latency), latency

    def next_action(self, act: Callable[[Any], object], obs: Any) -> Action:
        """The plan's next action; when the plan is used up, the agent is asked for a chunk first (`ask`), and its
        chunk loaded for this step."""
        executor = self.executor
        if executor.empty:
            chunk, latency = self.ask(act, obs)
            self.load(chunk, latency, self.steps)
        return executor.next()

    def load(
        self,
        chunk: ActionChunk,
        latency: float,
        requested_at: int,
        *,
        virtual_latency_s: float | None = None,
        whole: bool = False,
    ) -> None:
        """Load a chunk computed for step `requested_at`, dropping the actions whose time has passed; trace it.
        `whole`: queue all its actions, not only its first `execution_steps` (the chunked schedule);
        `virtual_latency_s`: the latency the virtual clock charged for it."""
        delay = self.steps - requested_at
        try:
            dropped = self.executor.load(chunk, skip=delay, whole=whole)
        except ValueError as exc:
            refused = self.error(f"agent returned a chunk the plan cannot take: {exc}")
            raise EndEpisode(refused) from None
        counts = self.realtime
        if counts is not None:
            counts.merged(latency, virtual_latency_s, delay, dropped)
        if self.bus.active:
            self.bus.emit_trusted(
                AgentChunkEvent,
                size=len(chunk.actions),
                execution_steps=chunk.execution_steps,
                latency_s=latency,
                dropped=dropped,
                requested_at=requested_at,
                delay_steps=delay,
                virtual_latency_s=virtual_latency_s,
                actions=[jsonable(a) for a in chunk.actions],
            )

    # -- the shield -----------------------------------------------------------------------------------------------

    def review(self, action: Action, hold: bool = False, send: Callable[[Action], Any] | None = None) -> Any:
        """The shield's review of one action, traced (`safety.review`, then `action`), or the end of the episode.
        Returns the action to execute (`send` of it when given: a conversion whose `InvalidAction` means the action
        is malformed). A modified action counts as an intervention and drops the rest of the plan. `hold`: the
        env's own hold action, whose failure is the env's (`infra_invalid`), not the agent's."""
        bus = self.bus
        try:
            review = self.shield.review(action, self.space)
            sent = review.action if send is None else send(review.action)
        except SafetyAbort as abort:
            self.interventions += 1
            if bus.active:
                bus.emit_trusted(
                    SafetyReviewEvent, approved=False, modified=False, reasons=[abort.reason], guard=abort.guard
                )
            raise EndEpisode(self._review_failed(abort, hold)) from None
        except FAULTS as exc:
            raise EndEpisode(self._review_failed(exc, hold)) from None
        if review.modified:
            self.interventions += 1
            self.executor.clear()  # the plan was off: the agent replans at the next step
        if bus.active:
            bus.emit_group(
                (SafetyReviewEvent, {"approved": True, "modified": review.modified, "reasons": list(review.reasons)}),
                (ActionEvent, {"step": self.steps, "action": jsonable(review.action), "hold": hold}),
            )
        return sent

    def _review_failed(self, exc: BaseException, hold: bool) -> EpisodeOutcome:
        """The one mapping from a failed review to the episode's status."""
        if hold:
            if isinstance(exc, SafetyAbort):
                return self.hold_failed(f"shield rejected it: {exc}")
            return self.hold_failed(str(exc) if isinstance(exc, InvalidAction) else raised("shield review", exc))
        if isinstance(exc, SafetyAbort):
            return self.ended(EpisodeStatus.SAFETY_ABORT, f"{exc.guard}: {exc.reason}")
        if isinstance(exc, InvalidAction):  # not unsafe but malformed: the agent's bug, not a safety event
            return self.error(f"agent returned a malformed action: {exc}")
        # a guard choked on the action's form
        return self.error(raised("shield review of the agent's action", exc), detail_of(exc))

    # -- the step's trace -----------------------------------------------------------------------------------------

    def stepped(
        self,
        reward: float,
        terminated: bool,
        truncated: bool,
        success: bool,
        info: Mapping[str, Any],
        obs: Any = None,
    ) -> None:
        """Count one env step and trace its result (and the observation it produced, when given)."""
        self.steps += 1
        self.total_return += reward
        bus = self.bus
        if bus.active:
            bus.sim_time = self.steps * self.dt
            result = (
                StepResultEvent,
                {
                    "step": self.steps - 1,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "success": success,
                    "info": jsonable(info) if info else {},
                },
            )
            if obs is None:
                bus.emit_group(result)
            else:
                bus.emit_group(
                    result, (ObservationEvent, {"obs": obs_summary(obs), "terminal": terminated or truncated})
                )

    def prologue(self, actions: Sequence[Action]) -> None:
        """Trace the actions the env's reset executed before the agent's first step (none: nothing)."""
        if actions and self.bus.active:
            self.bus.emit_trusted(EnvPrologueEvent, steps=len(actions), actions=[jsonable(a) for a in actions])

    def observed(self, obs: Any, terminal: bool = False) -> None:
        """Trace an observation."""
        if self.bus.active:
            self.bus.emit_trusted(ObservationEvent, obs=obs_summary(obs), terminal=terminal)

    # -- signals --------------------------------------------------------------------------------------------------

    def signal(self, signal: Signal) -> None:
        """Send a signal to whoever listens and trace it; a listener's failure ends the episode (`EndEpisode`)."""
        if signal is Signal.STEP_START:
            self.step_open = True
            scope = self._step_scope = f"step:{self.steps}" if self.scope is None else self.scope
        elif signal is Signal.STEP_END:
            self.step_open = False
            scope = self._step_scope or (f"step:{self.steps - 1}" if self.scope is None else self.scope)
            self._step_scope = ""
        else:
            scope = ""
        if self.deliver is not None:
            self.deliver(signal)
        bus = self.bus
        if bus.active:
            bus.emit_trusted(SignalEvent, signal=_SIGNAL_VALUES[signal], scope_id=scope or bus.episode_id)

    def step_start(self) -> None:
        """Open an iteration: `step_start`, sent only when someone hears it (a listener, or the trace)."""
        if self.deliver is not None or self.bus.active:
            self.signal(Signal.STEP_START)
        else:
            self.step_open = True

    def step_end(self) -> None:
        """Close an iteration: `step_end`, sent only when someone hears it."""
        if self.deliver is not None or self.bus.active:
            self.signal(Signal.STEP_END)
        else:
            self.step_open = False

    def closing_signal(self, signal: Signal, outcome: EpisodeOutcome) -> EpisodeOutcome:
        """A signal after the verdict: a listener that fails here cannot change the verdict, only add to it."""
        try:
            self.signal(signal)
        except EndEpisode as end:
            return noted(outcome, end.outcome.reason)
        return outcome

    # -- ending ---------------------------------------------------------------------------------------------------

    def wind_up(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        """Close an iteration the episode ended in (its `step_end`), then trace `episode.end` and return the
        verdict: `infra_invalid` when a critical recorder of this episode failed, `episode.end` itself included."""
        if self.step_open:
            outcome = self.closing_signal(Signal.STEP_END, outcome)
        bus = self.bus
        recorded = self._recorded
        if recorded and bus.critical_failures:
            outcome = _recorder_failed(bus, outcome)
        if bus.active:
            try:
                bus.emit_trusted(
                    EpisodeEndEvent,
                    status=outcome.status.value,
                    success=outcome.success,
                    steps=outcome.steps,
                    reason=outcome.reason,
                    safety_interventions=outcome.safety_interventions,
                    detail=outcome.detail,
                )
            except FAULTS as exc:
                return noted(outcome, raised("tracing the episode's end", exc))
            if recorded and bus.critical_failures and outcome.status is not EpisodeStatus.INFRA_INVALID:
                outcome = _recorder_failed(bus, outcome)
        return outcome

    def finish(
        self, outcome: EpisodeOutcome, tell: Callable[[EpisodeOutcome], EpisodeOutcome] | None = None
    ) -> EpisodeOutcome:
        """End the episode: `wind_up`, `tell` the agent (or the nodes) the verdict, then `run_end`. What fails once
        the verdict is in is noted in its detail; it cannot change it."""
        outcome = self.wind_up(outcome)
        if tell is not None:
            outcome = tell(outcome)
        if self.lifecycle:
            outcome = self.closing_signal(Signal.RUN_END, outcome)
        return outcome

    @staticmethod
    def told(outcome: EpisodeOutcome, hook: Callable[[EpisodeOutcome], Any] | None, who: str) -> EpisodeOutcome:
        """Call `hook(outcome)` (e.g. the agent's `on_episode_end`); its failure is noted as `who raised ...`."""
        if hook is not None:
            try:
                hook(outcome)
            except FAULTS as exc:
                return noted(outcome, raised(who, exc))
        return outcome

    def tell_agent(self, agent: Any, outcome: EpisodeOutcome) -> EpisodeOutcome:
        """Tell `agent` the verdict (its `on_episode_end`, when it has one); its failure is noted."""
        return self.told(outcome, getattr(agent, "on_episode_end", None), "agent on_episode_end")

    # -- outcomes -------------------------------------------------------------------------------------------------

    def tally(self) -> dict[str, Any]:
        """The metrics every outcome of this loop carries (`realtime` under realtime timing)."""
        if self.realtime is None:
            return {"return": self.total_return}
        return {"return": self.total_return, "realtime": self.realtime.to_json(self.steps)}

    def ended(
        self, status: EpisodeStatus, reason: str, detail: str | None = None, *, metrics: dict[str, Any] | None = None
    ) -> EpisodeOutcome:
        """The outcome of the open episode ending now with `status`."""
        return EpisodeOutcome(
            status,
            self.steps,
            reason,
            safety_interventions=self.interventions,
            detail=detail,
            metrics=self.tally() if not metrics else {**self.tally(), **metrics},
        )

    # the verdicts by name, as dm_env's `termination` and `truncation` name a time step

    def success(self, *, metrics: dict[str, Any] | None = None) -> EpisodeOutcome:
        """The episode's task is done."""
        return self.ended(EpisodeStatus.SUCCESS, "success", metrics=metrics)

    def failure(
        self, reason: str, detail: str | None = None, *, metrics: dict[str, Any] | None = None
    ) -> EpisodeOutcome:
        """The episode ended without its task done (`reason` says how)."""
        return self.ended(EpisodeStatus.FAILURE, reason, detail, metrics=metrics)

    def termination(self, *, metrics: dict[str, Any] | None = None) -> EpisodeOutcome:
        """The env ended the episode (a terminal state) without success."""
        return self.failure("terminated", metrics=metrics)

    def truncation(self, *, metrics: dict[str, Any] | None = None) -> EpisodeOutcome:
        """The env cut the episode short (its own time limit) without success."""
        return self.failure("truncated", metrics=metrics)

    def step_limit(self, *, metrics: dict[str, Any] | None = None) -> EpisodeOutcome:
        """The loop's step budget (`max_steps`) ran out."""
        return self.failure("max_steps", metrics=metrics)

    def after_step(
        self, success: bool, terminated: bool, truncated: bool, *, metrics: dict[str, Any] | None = None
    ) -> EpisodeOutcome | None:
        """The one mapping from a step's flags to the verdict: success first, then termination, then truncation;
        None while the episode goes on."""
        if success:
            return self.success(metrics=metrics)
        if terminated:
            return self.termination(metrics=metrics)
        if truncated:
            return self.truncation(metrics=metrics)
        return None

    def error(self, reason: str, detail: str | None = None) -> EpisodeOutcome:
        """The agent (or a node standing for it) failed: the episode abstains."""
        return self.ended(EpisodeStatus.ERROR, reason, detail)

    def infra_invalid(self, reason: str, detail: str | None = None) -> EpisodeOutcome:
        """The env, the harness or hylo itself failed: the episode abstains."""
        return self.ended(EpisodeStatus.INFRA_INVALID, reason, detail)

    def agent_failed(self, exc: BaseException, who: str = "agent") -> EpisodeOutcome:
        """The agent raised (or answered too late): `error`, reason `timeout` for a timeout."""
        if isinstance(exc, AgentTimeout):
            return self.error("timeout", str(exc))
        return self.error(raised(who, exc), detail_of(exc))

    def over_limit(self, over: OverLimit) -> EpisodeOutcome:
        """A harness limit passed (the env call, the episode's time): its own status and reason."""
        return self.ended(EpisodeStatus(over.status), over.reason, over.detail)

    def hold_failed(self, why: str) -> EpisodeOutcome:
        return self.infra_invalid(f"env hold action failed: {why}")


class RealtimeCounts:
    """One realtime episode's figures: chunks requested, actions executed and held, stale actions dropped, and the
    latency (measured, and charged by the virtual clock) and delay in steps of every merged chunk."""

    __slots__ = ("chunks", "delay_steps", "dropped", "dt", "executed", "holds", "latency_s", "virtual_latency_s")

    def __init__(self, dt: float) -> None:
        self.dt = dt
        self.chunks = 0
        self.executed = 0
        self.holds = 0
        self.dropped = 0
        self.latency_s: list[float] = []
        self.virtual_latency_s: list[float] | None = []
        self.delay_steps: list[int] = []

    def merged(self, latency: float, virtual_latency_s: float | None, delay: int, dropped: int) -> None:
        self.latency_s.append(latency)
        if virtual_latency_s is None:
            self.virtual_latency_s = None
        elif self.virtual_latency_s is not None:
            self.virtual_latency_s.append(virtual_latency_s)
        self.delay_steps.append(delay)
        self.dropped += dropped

    def to_json(self, steps: int) -> dict[str, Any]:
        return {
            "dt": self.dt,
            "steps": steps,
            "executed": self.executed,
            "holds": self.holds,
            "dropped": self.dropped,
            "chunks": self.chunks,
            "latency_s": list(self.latency_s),
            "virtual_latency_s": None if self.virtual_latency_s is None else list(self.virtual_latency_s),
            "delay_steps": list(self.delay_steps),
        }


def _recorder_failed(bus: EventBus, outcome: EpisodeOutcome) -> EpisodeOutcome:
    subscriber, exc = bus.critical_failures[0]
    reason = f"trace recorder {subscriber!r} failed: {raised('recorder', exc)}"
    return dataclasses.replace(outcome, status=EpisodeStatus.INFRA_INVALID, reason=reason, detail=detail_of(exc))
