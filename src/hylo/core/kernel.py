"""The Kernel owns the episode loop (004 §2): Agent → ActionChunk → ChunkExecutor → SafetyShield → Environment → Trace.

`Kernel.run(task)` returns an `EpisodeOutcome` with an honest status for anything that happens inside an episode —
agent, environment, shield or trace failures included; only bind-time problems (`IncompatibleComponents`, bad
arguments) raise, from the constructor.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from hylo.core.agent import agent_name, check_compatible
from hylo.core.bus import EventBus
from hylo.core.chunk import ActionChunk, EnsembleExecutor
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.episode import FAULTS, EndEpisode, detail_of, noted, raised
from hylo.core.errors import (
    AgentTimeout,
    IncompatibleComponents,
    InvalidAction,
    OverLimit,
    SignalFailed,
    SimulationDiverged,
)
from hylo.core.jsonable import snapshot
from hylo.core.latency import episode_rng, steps_for
from hylo.core.scaffold import EpisodeScaffold, RealtimeCounts
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.timing import Clock, RealtimeTiming, Strategy, SyncTiming, Timing, check_horizon, parse_timing
from hylo.core.types import Action, EnvSpec, Observation, TaskInstance
from hylo.core.worker import AgentWorker, Call

log = logging.getLogger(__name__)

_PLAIN_INFO = (dict, MappingProxyType)
"""The mappings a step's info usually is, told apart without the (slower) abstract-class check."""


class Kernel:
    """Runs episodes of one agent on one environment.

    - `shield`: a `SafetyShield`; None means the default shield (non-finite → reject, out of bounds → clip)
    - `timing`: `SyncTiming()` (default), `RealtimeTiming(...)`, or "sync" / "realtime"
    - `act_timeout_s`: an `act` slower than this ends the episode as `error`, reason `timeout`
    - `hard_timeout`: run the agent in a child process so that a hung `act` is killed at `act_timeout_s`
    - `max_steps`: the step budget; defaults to the env's `max_episode_steps`
    - `bus`: the EventBus that receives the trace (subscribe recorders to it)
    - `auto_episode_reset`: emit `episode_reset` when `run` is given a different task than last time. The placement
      owner (an env panel) turns it off and calls `signal(Signal.EPISODE_RESET)` itself on a committed change.

    Under the wall clock the agent's calls all run on one worker thread, in order, so `act`, `on_step` and the
    container signals never overlap.
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
        auto_episode_reset: bool = True,
    ) -> None:
        self._owns_agent = False
        self._closed = False
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
        if act_timeout_s is not None and not (act_timeout_s > 0 and math.isfinite(act_timeout_s)):
            raise ValueError(f"act_timeout_s must be a finite number > 0, got {act_timeout_s!r}")
        self.act_timeout_s = act_timeout_s

        self.warnings = check_compatible(spec, agent, env.capabilities)  # each episode's record carries them
        if isinstance(self.timing, RealtimeTiming) and not env.capabilities.hold_action:
            raise IncompatibleComponents(
                f"realtime timing needs an environment with a hold action; {spec.name!r} declares none"
            )
        if isinstance(self.timing, RealtimeTiming):
            self.timing.check_bind(spec.dt, getattr(agent, "chunk_size", None))
        self.shield = SafetyShield() if shield is None else shield
        self.shield.bind(spec.action_space)

        if hard_timeout:
            if act_timeout_s is None:
                raise ValueError("hard_timeout needs act_timeout_s")
            requirements = getattr(agent, "requirements", None)
            if requirements is not None and requirements.privileged_state:
                raise IncompatibleComponents(
                    f"{agent_name(agent)} reads privileged simulator state, which an agent isolated in its own "
                    "process (hard_timeout) cannot reach"
                )
            from hylo.core.isolation import ProcessAgent

            if not isinstance(agent, ProcessAgent):
                agent = ProcessAgent.from_instance(agent, act_timeout_s=act_timeout_s)
                self._owns_agent = True
        self.agent = agent
        self.agent_name = agent_name(agent)
        self.bus = bus if bus is not None else EventBus()
        self.containers = ContainerSet(getattr(agent, "containers", ()) or ())
        self._act: Callable[[Any], Any] = agent.act
        self._on_step: Callable[[Any], Any] | None = getattr(agent, "on_step", None)
        self._on_signal: Callable[[Signal], Any] | None = getattr(agent, "on_signal", None)
        self._listens = bool(len(self.containers)) or self._on_signal is not None
        wall = isinstance(self.timing, RealtimeTiming) and self.timing.clock is Clock.WALL
        self._worker: AgentWorker | None = None
        if wall:
            self._worker = AgentWorker()
            weakref.finalize(self, self._worker.stop)  # a Kernel dropped without close() leaves no thread behind
        self._serial = 0  # episodes run so far: tags the agent calls posted to the worker
        self._sc = EpisodeScaffold(
            self.bus,
            self.shield,
            spec.action_space,
            deliver=self._deliver if self._listens else None,
            auto_episode_reset=auto_episode_reset,
            act_timeout_s=act_timeout_s,
            dt=spec.dt,
        )
        if isinstance(self.timing, RealtimeTiming):
            self._sc.realtime = RealtimeCounts(spec.dt)
            if self.timing.strategy is Strategy.ENSEMBLE:
                self._sc.executor = EnsembleExecutor(self.timing.ensemble_m)

    @property
    def auto_episode_reset(self) -> bool:
        return self._sc.auto_episode_reset

    @auto_episode_reset.setter
    def auto_episode_reset(self, value: bool) -> None:
        self._sc.auto_episode_reset = value

    # -- public -------------------------------------------------------------------------------------------------

    def run(self, task: TaskInstance) -> EpisodeOutcome:
        """Run one episode of `task` and return its outcome."""
        if self._closed:
            raise RuntimeError("this Kernel is closed")
        self._serial += 1
        sc = self._sc
        try:
            sc.open(task, agent=self.agent_name, timing=self.timing.mode, warnings=self.warnings)
            outcome = self._episode(task)
        except EndEpisode as end:
            outcome = end.outcome
        except FAULTS as exc:  # a fault in hylo itself, or in a trace subscriber's plumbing: not the agent's
            outcome = sc.ended(EpisodeStatus.INFRA_INVALID, raised("kernel", exc), detail_of(exc))
        if self._worker is None:
            return sc.finish(outcome, self._tell)
        return self._finish_on_worker(sc.wind_up(outcome), self._worker)

    def signal(self, signal: Signal | str) -> None:
        """Deliver a lifecycle signal from its owner (e.g. `episode_reset` from an env panel), between episodes.
        Raises `SignalFailed` (a RuntimeError) if the agent fails on it."""
        try:
            self._sc.signal(Signal(signal))
            if self._worker is not None:
                if not self._worker.wait_idle(self.act_timeout_s):  # an act of an earlier episode still hangs
                    raise SignalFailed(
                        "timeout",
                        f"the agent's act is still running past act_timeout_s={self.act_timeout_s}; the "
                        f"{Signal(signal).value} signal waits behind it",
                    )
                self._check_worker(self._worker)
        except EndEpisode as end:
            raise SignalFailed(end.outcome.reason, end.outcome.detail) from None

    def close(self) -> None:
        """Release what the Kernel started (its worker thread, the process of an agent it isolated). The env and an
        agent passed in are the caller's to close."""
        self._closed = True
        if self._worker is not None:
            self._worker.stop()
        if self._owns_agent:
            self.agent.close()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the episode ----------------------------------------------------------------------------------------------

    def _episode(self, task: TaskInstance) -> EpisodeOutcome:
        sc = self._sc
        if self._worker is not None and not self._worker.wait_idle(self.act_timeout_s):
            still = "the agent is still inside a call from the previous episode"
            return sc.ended(EpisodeStatus.ERROR, "timeout", still)
        try:
            obs = self.env.reset(task)
        except OverLimit as over:
            return sc.over_limit(over)
        except FAULTS as exc:
            return sc.ended(EpisodeStatus.INFRA_INVALID, raised("env reset", exc), detail_of(exc))
        if self.env.spec is not self.spec:
            try:
                self._follow_spec(self.env.spec)
            except IncompatibleComponents as exc:
                return sc.ended(EpisodeStatus.ERROR, "incompatible", str(exc))
        sc.prologue(self.env.prologue())
        sc.observed(obs)
        ctx = EpisodeContext(
            seed=task.seed,
            env_spec=self.spec,
            task=task,
            containers=self.containers,
            bus=self.bus,
            read_privileged=self.env.privileged_state if self.env.capabilities.privileged_state else None,
            clock=Clock.WALL if self._worker is not None else Clock.VIRTUAL,
        )
        reset = getattr(self.agent, "reset", None)
        if reset is not None:
            if self._worker is not None:  # after the signals queued before it, never beside them
                call = self._worker.submit(reset, ctx, 0, self._serial)
                call.done.wait()
                if call.error is not None:
                    return sc.agent_failed(call.error, "agent reset")
            else:
                try:
                    reset(ctx)
                except FAULTS as exc:
                    return sc.agent_failed(exc, "agent reset")
        if isinstance(self.timing, SyncTiming):
            return self._sync_loop(obs)
        return self._realtime_loop(obs, self.timing, task.seed)

    def _follow_spec(self, spec: EnvSpec) -> None:
        """An env whose spaces depend on the task (ManiSkill's state size) declares the reset task's spec: the agent is
        checked against it again, and the shield bound to its action space."""
        self.warnings = check_compatible(spec, self.agent, self.env.capabilities)
        if isinstance(self.timing, RealtimeTiming):
            self.timing.check_bind(spec.dt, getattr(self.agent, "chunk_size", None))
        self.shield.bind(spec.action_space)
        self.spec = spec

    def _sync_loop(self, obs: Observation) -> EpisodeOutcome:
        sc = self._sc
        executor = sc.executor
        bus = self.bus
        max_steps = self.max_steps
        listens = self._listens
        while sc.steps < max_steps:
            if listens or bus.active:
                sc.signal(Signal.STEP_START)
            if executor.empty:
                chunk, latency = self._call_act(obs)
                sc.load(chunk, latency, sc.steps)
            obs = self._advance(executor.next(), False)
        return sc.ended(EpisodeStatus.FAILURE, "max_steps")

    def _realtime_loop(self, obs: Observation, timing: RealtimeTiming, seed: int) -> EpisodeOutcome:
        """One loop for both realtime clocks and both schedules: the world keeps stepping while a requested chunk is
        computed.

        Virtual clock: `act` runs inline and its result is merged the latency's steps later (the latency model's,
        drawn from a generator seeded by the episode's `seed`, or the measured one). Wall clock: `act` runs on the
        agent's worker thread and is merged at the first step after it finished; the loop is paced at the control
        rate unless the env paces itself.
        """
        sc = self._sc
        executor = sc.executor
        counts = sc.realtime
        assert counts is not None
        dt = self.spec.dt
        worker = self._worker
        paced = worker is not None and not self.env.capabilities.self_paced
        model = timing.model
        rng = episode_rng(seed) if model is not None else None
        chunked = timing.chunked
        nominal = timing.nominal_latency_steps(dt) if chunked else None
        every = 0  # the chunked schedule's s for the plan that runs now
        pending: Call | None = None  # wall clock: the act in flight
        scheduled: tuple[int, ActionChunk, int, float, float] | None = None  # merge at, chunk, asked, latencies
        asked: int | None = None  # the step of the last request
        lead = timing.refill_steps  # refill: request early enough to cover the latency seen lately
        holds = 0
        start = time.perf_counter()
        while sc.steps < self.max_steps:
            step = sc.steps
            sc.signal(Signal.STEP_START)
            if worker is not None:
                self._check_worker(worker)
                if pending is not None:
                    if pending.done.is_set():
                        if pending.error is not None:
                            return sc.agent_failed(pending.error)
                        sc.check_latency(pending.latency)
                        chunk = sc.chunk_of(pending.result)
                        every = self._merge(chunk, pending.latency, None, pending.step, timing, nominal)
                        if timing.adaptive_refill:
                            lead = max(timing.refill_steps, step - pending.step)
                        pending = None
                    elif (
                        self.act_timeout_s is not None and time.perf_counter() - pending.submitted > self.act_timeout_s
                    ):
                        return sc.agent_failed(AgentTimeout(None, self.act_timeout_s))
                if pending is None and _due(chunked, executor.remaining, lead, asked, every, step):
                    pending = worker.submit(self._act, snapshot(obs), step, self._serial)
                    counts.chunks += 1
                    asked = step
            else:
                if scheduled is not None and scheduled[0] <= step:
                    every = self._merge(scheduled[1], scheduled[3], scheduled[4], scheduled[2], timing, nominal)
                    scheduled = None
                if scheduled is None and _due(chunked, executor.remaining, lead, asked, every, step):
                    counts.chunks += 1
                    asked = step
                    chunk, latency = self._call_act(obs)
                    if model is not None:
                        assert rng is not None
                        charged, delay = model.draw(rng, dt)
                    else:
                        charged, delay = latency, steps_for(latency, dt)
                    if timing.adaptive_refill:
                        lead = max(timing.refill_steps, delay)
                    if delay == 0:
                        every = self._merge(chunk, latency, charged, step, timing, nominal)
                    else:
                        scheduled = (step + delay, chunk, step, latency, charged)
            if executor.empty:
                if holds >= timing.max_hold_steps:
                    return sc.ended(EpisodeStatus.FAILURE, "watchdog", f"{holds} consecutive hold steps")
                holds += 1
                counts.holds += 1
                try:
                    hold = self.env.hold_action()
                except FAULTS as exc:
                    return sc.ended(EpisodeStatus.INFRA_INVALID, raised("env hold_action", exc), detail_of(exc))
                obs = self._advance(hold, True)
            else:
                holds = 0
                counts.executed += 1
                obs = self._advance(executor.next(), False)
            if paced:
                delay_s = start + sc.steps * dt - time.perf_counter()
                if delay_s > 0:
                    time.sleep(delay_s)
        return sc.ended(EpisodeStatus.FAILURE, "max_steps")

    def _merge(
        self,
        chunk: ActionChunk,
        latency: float,
        charged: float | None,
        asked: int,
        timing: RealtimeTiming,
        d: int | None,
    ) -> int:
        """Merge a chunk asked for at step `asked` into the plan. Returns the chunked schedule's s for it (0 under the
        refill schedule); a chunk too short for the chunked protocol's horizon ends the episode as `error`."""
        sc = self._sc
        if not timing.chunked:
            sc.load(chunk, latency, asked, virtual_latency_s=charged)
            return 0
        every = chunk.execution_steps if timing.execution_steps is None else timing.execution_steps
        if d is not None:
            try:
                check_horizon(len(chunk.actions), d, every)
            except ValueError as exc:
                raise EndEpisode(sc.ended(EpisodeStatus.ERROR, f"agent's chunk breaks the protocol: {exc}")) from None
        sc.load(chunk, latency, asked, virtual_latency_s=charged, whole=True)
        return every

    # -- one step -------------------------------------------------------------------------------------------------

    def _call_act(self, obs: Observation) -> tuple[ActionChunk, float]:
        """Ask the agent for a chunk, inline, timing the call."""
        sc = self._sc
        t0 = time.perf_counter()
        try:
            raw = self._act(obs)
        except FAULTS as exc:
            raise EndEpisode(sc.agent_failed(exc)) from None
        latency = time.perf_counter() - t0
        sc.check_latency(latency)
        return sc.chunk_of(raw), latency

    def _advance(self, action: Action, hold: bool) -> Observation:
        """Review, execute and trace one action; return the new observation or end the episode."""
        sc = self._sc
        reviewed = sc.review(action, hold)
        try:
            result = self.env.step(reviewed)
            obs, info = result.obs, result.info
            reward = float(result.reward)
            terminated, truncated, success = bool(result.terminated), bool(result.truncated), bool(result.success)
            if type(info) not in _PLAIN_INFO and not isinstance(info, Mapping):
                raise TypeError(f"StepResult.info must be a mapping, got {type(info).__name__}")
        except OverLimit as over:
            raise EndEpisode(sc.over_limit(over)) from None
        except SimulationDiverged as exc:
            raise EndEpisode(sc.ended(EpisodeStatus.INFRA_INVALID, str(exc), detail_of(exc))) from None
        except InvalidAction as exc:
            if hold:
                raise EndEpisode(sc.hold_failed(f"env rejected it: {exc}")) from None
            raise EndEpisode(
                sc.ended(EpisodeStatus.ERROR, f"env rejected the agent's action: {exc}", detail_of(exc))
            ) from None
        except FAULTS as exc:
            raise EndEpisode(sc.ended(EpisodeStatus.INFRA_INVALID, raised("env step", exc), detail_of(exc))) from None
        sc.stepped(reward, terminated, truncated, success, info, obs)
        if self._on_step is not None:
            self._agent_call(self._on_step, result, "agent on_step")
        if self._listens or self.bus.active:
            sc.signal(Signal.STEP_END)
        if success:
            raise EndEpisode(sc.ended(EpisodeStatus.SUCCESS, "success"))
        if terminated:
            raise EndEpisode(sc.ended(EpisodeStatus.FAILURE, "terminated"))
        if truncated:
            raise EndEpisode(sc.ended(EpisodeStatus.FAILURE, "truncated"))
        return obs  # type: ignore[return-value]

    # -- the agent's calls and the episode's end ------------------------------------------------------------------

    def _deliver(self, signal: Signal) -> None:
        self._agent_call(self._agent_signal, signal, "agent on_signal")

    def _agent_call(self, fn: Callable[[Any], Any], arg: Any, who: str) -> None:
        """A notification to the agent: in turn on its worker thread (wall clock), else right here."""
        if self._worker is not None:
            self._worker.post(fn, arg, who, self._serial)
            return
        try:
            fn(arg)
        except FAULTS as exc:
            raise EndEpisode(self._sc.agent_failed(exc, who)) from None

    def _agent_signal(self, signal: Signal) -> None:
        self.containers.on_signal(signal)
        if self._on_signal is not None:
            self._on_signal(signal)

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        return self._sc.told(outcome, getattr(self.agent, "on_episode_end", None), "agent on_episode_end")

    def _finish_on_worker(self, outcome: EpisodeOutcome, worker: AgentWorker) -> EpisodeOutcome:
        """Wall clock: tell the agent the verdict and close the run in turn on the agent's thread, after whatever it
        is still doing. An act stuck past act_timeout_s is left behind; the next episode waits for it, and ends as
        `timeout` if it is still stuck. What fails now is noted; it cannot change the verdict."""
        on_end = getattr(self.agent, "on_episode_end", None)
        if on_end is not None:
            worker.post(on_end, outcome, "agent on_episode_end", self._serial)
        if worker.wait_idle(self.act_timeout_s):
            self._sc.signal(Signal.RUN_END)
            worker.wait_idle(self.act_timeout_s)
            failure = worker.take_failure()
            if failure is not None and failure.episode == self._serial:
                outcome = noted(outcome, raised(failure.who, failure.error))
            elif failure is not None:
                log.warning("%s failed after its episode ended: %r", failure.who, failure.error)
        else:
            self._sc.signal(Signal.RUN_END)
        return outcome

    def _check_worker(self, worker: AgentWorker) -> None:
        failure = worker.take_failure()
        if failure is None:
            return
        if failure.episode != self._serial:  # from a call of an earlier episode that outlived it
            log.warning("%s failed after its episode ended: %r", failure.who, failure.error)
            return
        raise EndEpisode(self._sc.agent_failed(failure.error, failure.who))


def _due(chunked: bool, remaining: int, lead: int, asked: int | None, every: int, step: int) -> bool:
    """Whether a chunk is to be requested now (none being in flight): under the chunked schedule `every` steps after
    the last request, and at once for the first and whenever the plan is empty (the shield dropped it: 004 asks
    for a replan); under the refill schedule when at most `lead` actions remain."""
    if chunked:
        return asked is None or remaining == 0 or step - asked >= every
    return remaining <= lead
