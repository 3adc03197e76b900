"""The Kernel owns the episode loop: Agent → ActionChunk → ChunkExecutor → SafetyShield → Environment → Trace.

`Kernel.run(task)` returns an `EpisodeOutcome` with an honest status for anything that happens inside an episode —
agent, environment, shield or trace failures included; only bind-time problems (`IncompatibleComponents`, bad
arguments) raise, from the constructor.

The frame of `run` and `signal` is every loop's (core/episode_loop.py), the episode's machinery the scaffold's
(core/scaffold.py), the realtime episodes their clock's (core/realtime_loop.py); the Kernel keeps what is its own: the
env, the agent's calls (on a worker thread under the wall clock), the sync loop and the step itself.
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
from hylo.core.chunk import EnsembleExecutor
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.episode import FAULTS, EndEpisode, detail_of, noted, raised
from hylo.core.episode_loop import EpisodeLoop, step_budget
from hylo.core.errors import IncompatibleComponents, InvalidAction, OverLimit, SignalFailed, SimulationDiverged
from hylo.core.isolation import ProcessAgent
from hylo.core.realtime_loop import RealtimeLoop, VirtualClockLoop, WallClockLoop
from hylo.core.scaffold import EpisodeScaffold, RealtimeCounts
from hylo.core.shield import SafetyShield
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.timing import Clock, RealtimeTiming, Strategy, SyncTiming, Timing, parse_timing
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, TaskInstance
from hylo.core.worker import AgentWorker

log = logging.getLogger(__name__)

_PLAIN_INFO = (dict, MappingProxyType)
"""The mappings a step's info usually is, told apart without the (slower) abstract-class check."""


class Kernel(EpisodeLoop):
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

    fault_owner = "kernel"

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
        missing = f"max_steps is required: env {spec.name!r} declares no max_episode_steps"
        self.max_steps = step_budget(max_steps, spec.max_episode_steps, missing=missing)
        self.act_timeout_s = _checked_timeout(act_timeout_s)
        self.warnings = _bound(spec, agent, env.capabilities, self.timing)  # each episode's record carries them
        self.shield = SafetyShield() if shield is None else shield
        self.shield.bind(spec.action_space)
        if hard_timeout:
            agent, self._owns_agent = _isolated(agent, act_timeout_s)
        self.agent = agent
        self.agent_name = agent_name(agent)
        self.bus = bus if bus is not None else EventBus()
        self.containers = ContainerSet(getattr(agent, "containers", ()) or ())
        self._act: Callable[[Any], Any] = agent.act
        self._on_step: Callable[[Any], Any] | None = getattr(agent, "on_step", None)
        self._on_signal: Callable[[Signal], Any] | None = getattr(agent, "on_signal", None)
        self._worker = self._wall_worker()
        self._serial = 0  # episodes run so far: tags the agent calls posted to the worker
        listens = bool(len(self.containers)) or self._on_signal is not None
        self._sc = self._scaffold(self._deliver if listens else None, auto_episode_reset)

    def _wall_worker(self) -> AgentWorker | None:
        """The agent's worker thread, under the wall clock only."""
        timing = self.timing
        if not isinstance(timing, RealtimeTiming) or timing.clock is not Clock.WALL:
            return None
        worker = AgentWorker()
        weakref.finalize(self, worker.stop)  # a Kernel dropped without close() leaves no thread behind
        return worker

    def _scaffold(self, deliver: Callable[[Signal], Any] | None, auto_episode_reset: bool) -> EpisodeScaffold:
        spec = self.spec
        sc = EpisodeScaffold(
            self.bus,
            self.shield,
            spec.action_space,
            deliver=deliver,
            auto_episode_reset=auto_episode_reset,
            act_timeout_s=self.act_timeout_s,
            dt=spec.dt,
            clock=time.perf_counter,  # the Kernel's clock times the agent's inline calls
        )
        timing = self.timing
        if isinstance(timing, RealtimeTiming):
            sc.realtime = RealtimeCounts(spec.dt)
            if timing.strategy is Strategy.ENSEMBLE:
                sc.executor = EnsembleExecutor(timing.ensemble_m)
        return sc

    # -- public -------------------------------------------------------------------------------------------------

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

    # -- the frame's parts ----------------------------------------------------------------------------------------

    def _open(self, task: TaskInstance) -> None:
        self._serial += 1
        self._sc.open(task, agent=self.agent_name, timing=self.timing.mode, warnings=self.warnings)

    def _finish(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        if self._worker is None:
            return self._sc.finish(outcome, self._tell)
        return self._finish_on_worker(self._sc.wind_up(outcome), self._worker)

    def _tell(self, outcome: EpisodeOutcome) -> EpisodeOutcome:
        return self._sc.tell_agent(self.agent, outcome)

    def _signalled(self, signal: Signal) -> None:
        worker = self._worker
        if worker is None:
            return
        if not worker.wait_idle(self.act_timeout_s):  # an act of an earlier episode still hangs
            raise SignalFailed(
                "timeout",
                f"the agent's act is still running past act_timeout_s={self.act_timeout_s}; the "
                f"{signal.value} signal waits behind it",
            )
        self._check_worker(worker)

    # -- the episode ----------------------------------------------------------------------------------------------

    def _episode(self, task: TaskInstance) -> EpisodeOutcome:
        sc = self._sc
        if self._worker is not None and not self._worker.wait_idle(self.act_timeout_s):
            return sc.error("timeout", "the agent is still inside a call from the previous episode")
        obs = self._reset_env(task)
        self._reset_agent(task)
        timing = self.timing
        if isinstance(timing, SyncTiming):
            return self._sync_loop(obs)
        return self._realtime(timing, task.seed).run(obs, self.max_steps)

    def _reset_env(self, task: TaskInstance) -> Observation:
        """Reset the env to `task` and trace what it did; the first observation, or the end of the episode."""
        sc = self._sc
        env = self.env
        try:
            obs = env.reset(task)
        except OverLimit as over:
            raise EndEpisode(sc.over_limit(over)) from None
        except FAULTS as exc:
            raise EndEpisode(sc.infra_invalid(raised("env reset", exc), detail_of(exc))) from None
        if env.spec is not self.spec:
            try:
                self._follow_spec(env.spec)
            except IncompatibleComponents as exc:
                raise EndEpisode(sc.error("incompatible", str(exc))) from None
        sc.prologue(env.prologue())
        sc.observed(obs)
        return obs

    def _reset_agent(self, task: TaskInstance) -> None:
        """Hand the agent the episode's context (its `reset`); under the wall clock in turn on its worker, after the
        signals queued before it, never beside them."""
        env = self.env
        worker = self._worker
        ctx = EpisodeContext(
            seed=task.seed,
            env_spec=self.spec,
            task=task,
            containers=self.containers,
            bus=self.bus,
            read_privileged=env.privileged_state if env.capabilities.privileged_state else None,
            clock=Clock.WALL if worker is not None else Clock.VIRTUAL,
        )
        if worker is None:
            self._sc.reset_agent(self.agent, ctx)
            return
        reset = getattr(self.agent, "reset", None)
        if reset is not None:
            call = worker.submit(reset, ctx, 0, self._serial)
            call.done.wait()
            if call.error is not None:
                raise EndEpisode(self._sc.agent_failed(call.error, "agent reset"))

    def _follow_spec(self, spec: EnvSpec) -> None:
        """An env whose spaces depend on the task (ManiSkill's state size) declares the reset task's spec: the agent is
        checked against it again, and the shield bound to its action space."""
        self.warnings = _bound(spec, self.agent, self.env.capabilities, self.timing)
        self.shield.bind(spec.action_space)
        self.spec = spec

    def _sync_loop(self, obs: Observation) -> EpisodeOutcome:
        """The world waits for every `act`."""
        sc = self._sc
        act = self._act
        max_steps = self.max_steps
        while sc.steps < max_steps:
            sc.step_start()
            obs = self._advance(sc.next_action(act, obs), False)
        return sc.step_limit()

    def _realtime(self, timing: RealtimeTiming, seed: int) -> RealtimeLoop:
        """The realtime loop of `timing`'s clock for one episode (`seed` seeds the virtual clock's latency model)."""
        env, sc, dt, worker = self.env, self._sc, self.spec.dt, self._worker
        if worker is None:
            return VirtualClockLoop(
                sc, timing, dt, seed=seed, advance=self._advance, hold_action=env.hold_action, act=self._act
            )
        return WallClockLoop(
            sc,
            timing,
            dt,
            worker=worker,
            serial=self._serial,
            check_worker=self._check_worker,
            act_timeout_s=self.act_timeout_s,
            paced=not env.capabilities.self_paced,
            advance=self._advance,
            hold_action=env.hold_action,
            act=self._act,
        )

    # -- one step -------------------------------------------------------------------------------------------------

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
            raise EndEpisode(sc.infra_invalid(str(exc), detail_of(exc))) from None
        except InvalidAction as exc:
            if hold:
                raise EndEpisode(sc.hold_failed(f"env rejected it: {exc}")) from None
            raise EndEpisode(sc.error(f"env rejected the agent's action: {exc}", detail_of(exc))) from None
        except FAULTS as exc:
            raise EndEpisode(sc.infra_invalid(raised("env step", exc), detail_of(exc))) from None
        sc.stepped(reward, terminated, truncated, success, info, obs)
        if self._on_step is not None:
            self._agent_call(self._on_step, result, "agent on_step")
        sc.step_end()
        verdict = sc.after_step(success, terminated, truncated)
        if verdict is not None:
            raise EndEpisode(verdict)
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


# -- binding ----------------------------------------------------------------------------------------------------------


def _checked_timeout(act_timeout_s: float | None) -> float | None:
    if act_timeout_s is not None and not (act_timeout_s > 0 and math.isfinite(act_timeout_s)):
        raise ValueError(f"act_timeout_s must be a finite number > 0, got {act_timeout_s!r}")
    return act_timeout_s


def _bound(spec: EnvSpec, agent: Any, capabilities: EnvCapabilities, timing: Timing) -> tuple[str, ...]:
    """Check that `agent` can run on an env of `spec` under `timing` (raises `IncompatibleComponents`); returns the
    compatibility check's warnings."""
    warnings = check_compatible(spec, agent, capabilities)
    if isinstance(timing, RealtimeTiming):
        if not capabilities.hold_action:
            raise IncompatibleComponents(
                f"realtime timing needs an environment with a hold action; {spec.name!r} declares none"
            )
        timing.check_bind(spec.dt, getattr(agent, "chunk_size", None))
    return warnings


def _isolated(agent: Any, act_timeout_s: float | None) -> tuple[Any, bool]:
    """`agent` moved into a child process of its own (hard_timeout), and whether the Kernel made that process."""
    if act_timeout_s is None:
        raise ValueError("hard_timeout needs act_timeout_s")
    requirements = getattr(agent, "requirements", None)
    if requirements is not None and requirements.privileged_state:
        raise IncompatibleComponents(
            f"{agent_name(agent)} reads privileged simulator state, which an agent isolated in its own "
            "process (hard_timeout) cannot reach"
        )
    if isinstance(agent, ProcessAgent):
        return agent, False
    return ProcessAgent.from_instance(agent, act_timeout_s=act_timeout_s), True
