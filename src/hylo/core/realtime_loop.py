"""The Kernel's realtime episodes: the world keeps stepping while a requested chunk is computed.

One loop per clock, one schedule per way of asking:

- `VirtualClockLoop`: `act` runs inline and its chunk is merged the latency's steps later (the latency model's, drawn
  from a generator seeded by the episode's seed, or the measured one).
- `WallClockLoop`: `act` runs on the agent's worker thread and its chunk is merged at the first step after it
  finished; the loop is paced at the control rate unless the env paces itself.
- `RefillSchedule` asks when the plan runs low; `ChunkedSchedule` asks every s steps (the chunked-execution protocol).

Both clocks share the step itself (`RealtimeLoop`): the plan's next action, or the env's hold action when the plan is
empty, with the watchdog on consecutive holds.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from hylo.core.chunk import ActionChunk
from hylo.core.episode import FAULTS, EndEpisode, detail_of, raised
from hylo.core.errors import AgentTimeout
from hylo.core.jsonable import snapshot
from hylo.core.latency import episode_rng, steps_for
from hylo.core.scaffold import EpisodeScaffold, RealtimeCounts
from hylo.core.status import EpisodeOutcome
from hylo.core.timing import RealtimeTiming, check_horizon
from hylo.core.types import Action, Observation
from hylo.core.worker import AgentWorker, Call


class ChunkSchedule(abc.ABC):
    """When a realtime loop asks for a chunk (none being in flight), and how a chunk merges into the plan."""

    def __init__(self) -> None:
        self.asked: int | None = None
        """The step of the last request (None before the first)."""

    @abc.abstractmethod
    def due(self, remaining: int, step: int) -> bool:
        """Whether to ask now, at `step`, with `remaining` actions left in the plan."""

    @abc.abstractmethod
    def merge(self, sc: EpisodeScaffold, chunk: ActionChunk, latency: float, charged: float | None, asked: int) -> None:
        """Merge a chunk asked for at step `asked` into the plan (`charged`: the latency the virtual clock charged)."""

    def delayed(self, steps: int) -> None:
        """A request's answer came `steps` control steps after it (measured, or charged by the virtual clock)."""
        return None  # nothing, by default


class RefillSchedule(ChunkSchedule):
    """Ask when at most `lead` actions remain: `refill_steps`, or with adaptive refill the latency seen lately when
    that is longer, so a steady policy never starves. A chunk replaces the plan from its first execution step."""

    def __init__(self, timing: RealtimeTiming) -> None:
        super().__init__()
        self.refill_steps = timing.refill_steps
        self.adaptive = bool(timing.adaptive_refill)
        self.lead = timing.refill_steps

    def due(self, remaining: int, step: int) -> bool:
        return remaining <= self.lead

    def merge(self, sc: EpisodeScaffold, chunk: ActionChunk, latency: float, charged: float | None, asked: int) -> None:
        sc.load(chunk, latency, asked, virtual_latency_s=charged)

    def delayed(self, steps: int) -> None:
        if self.adaptive:
            self.lead = max(self.refill_steps, steps)


class ChunkedSchedule(ChunkSchedule):
    """The chunked-execution protocol: ask `every` (s) steps after the last request, and at once for the first and
    whenever the plan is empty (the shield dropped it: the agent is asked to replan). A chunk is merged whole; one too
    short for the protocol's horizon at the nominal latency d ends the episode as `error`."""

    def __init__(self, timing: RealtimeTiming, dt: float) -> None:
        super().__init__()
        self.execution_steps = timing.execution_steps
        self.nominal = timing.nominal_latency_steps(dt)
        self.every = 0
        """s for the plan that runs now."""

    def due(self, remaining: int, step: int) -> bool:
        asked = self.asked
        return asked is None or remaining == 0 or step - asked >= self.every

    def merge(self, sc: EpisodeScaffold, chunk: ActionChunk, latency: float, charged: float | None, asked: int) -> None:
        every = chunk.execution_steps if self.execution_steps is None else self.execution_steps
        if self.nominal is not None:
            try:
                check_horizon(len(chunk.actions), self.nominal, every)
            except ValueError as exc:
                raise EndEpisode(sc.error(f"agent's chunk breaks the protocol: {exc}")) from None
        sc.load(chunk, latency, asked, virtual_latency_s=charged, whole=True)
        self.every = every


def schedule_for(timing: RealtimeTiming, dt: float) -> ChunkSchedule:
    """The schedule `timing` names."""
    return ChunkedSchedule(timing, dt) if timing.chunked else RefillSchedule(timing)


class RealtimeLoop(abc.ABC):
    """One realtime episode. Each step: `step_start`, the clock's exchange with the agent (`exchange`), one action
    executed (the plan's next, or the env's hold action when the plan is empty), the clock's pacing (`pace`).

    - `advance(action, hold)`: review, execute and trace one action; the new observation, or the episode's end
    - `hold_action()`: the env's hold action
    - `act(obs)`: the agent's `act`
    """

    def __init__(
        self,
        sc: EpisodeScaffold,
        timing: RealtimeTiming,
        dt: float,
        *,
        advance: Callable[[Action, bool], Observation],
        hold_action: Callable[[], Action],
        act: Callable[[Any], object],
    ) -> None:
        counts = sc.realtime
        assert counts is not None
        self.sc = sc
        self.counts: RealtimeCounts = counts
        self.timing = timing
        self.dt = dt
        self.advance = advance
        self.hold_action = hold_action
        self.act = act
        self.schedule = schedule_for(timing, dt)
        self.holds = 0
        """Consecutive hold steps."""

    def run(self, obs: Observation, max_steps: int) -> EpisodeOutcome:
        """Run the episode from `obs` to its end; returns the outcome of the step budget running out."""
        sc = self.sc
        while sc.steps < max_steps:
            step = sc.steps
            sc.step_start()
            self.exchange(obs, step)
            obs = self.execute()
            self.pace()
        return sc.step_limit()

    @abc.abstractmethod
    def exchange(self, obs: Observation, step: int) -> None:
        """Merge what the agent answered and is due, and ask it again when the schedule says so."""

    def pace(self) -> None:
        """Wait for the next control step (only on the wall clock)."""
        return None  # nothing, by default

    def execute(self) -> Observation:
        """Execute the plan's next action, or the env's hold action when the plan is empty."""
        executor = self.sc.executor
        if executor.empty:
            return self.advance(self._hold(), True)
        self.holds = 0
        self.counts.executed += 1
        return self.advance(executor.next(), False)

    def _hold(self) -> Action:
        """The env's hold action; the watchdog ends the episode after `max_hold_steps` of them in a row."""
        sc = self.sc
        if self.holds >= self.timing.max_hold_steps:
            raise EndEpisode(sc.failure("watchdog", f"{self.holds} consecutive hold steps"))
        self.holds += 1
        self.counts.holds += 1
        try:
            return self.hold_action()
        except FAULTS as exc:
            raise EndEpisode(sc.infra_invalid(raised("env hold_action", exc), detail_of(exc))) from None


class _Scheduled(NamedTuple):
    """A chunk the virtual clock merges at step `at`."""

    at: int
    chunk: ActionChunk
    asked: int
    latency: float
    charged: float


class VirtualClockLoop(RealtimeLoop):
    """The virtual clock: `act` runs inline, and its chunk is merged the latency's steps later — the latency model's,
    drawn from a generator seeded by the episode's `seed`, or the measured one when there is no model."""

    def __init__(
        self,
        sc: EpisodeScaffold,
        timing: RealtimeTiming,
        dt: float,
        *,
        seed: int,
        advance: Callable[[Action, bool], Observation],
        hold_action: Callable[[], Action],
        act: Callable[[Any], object],
    ) -> None:
        super().__init__(sc, timing, dt, advance=advance, hold_action=hold_action, act=act)
        self.model = timing.model
        self.rng = episode_rng(seed) if self.model is not None else None
        self.scheduled: _Scheduled | None = None

    def exchange(self, obs: Observation, step: int) -> None:
        scheduled = self.scheduled
        if scheduled is not None and scheduled.at <= step:
            self.schedule.merge(self.sc, scheduled.chunk, scheduled.latency, scheduled.charged, scheduled.asked)
            self.scheduled = scheduled = None
        if scheduled is None and self.schedule.due(self.sc.executor.remaining, step):
            self._request(obs, step)

    def _request(self, obs: Observation, step: int) -> None:
        self.counts.chunks += 1
        self.schedule.asked = step
        chunk, latency = self.sc.ask(self.act, obs)
        charged, delay = self._charge(latency)
        self.schedule.delayed(delay)
        if delay == 0:
            self.schedule.merge(self.sc, chunk, latency, charged, step)
        else:
            self.scheduled = _Scheduled(step + delay, chunk, step, latency, charged)

    def _charge(self, latency: float) -> tuple[float, int]:
        """(the latency charged, in seconds; in control steps): the model's draw, or the measured `latency`."""
        if self.model is None:
            return latency, steps_for(latency, self.dt)
        assert self.rng is not None
        return self.model.draw(self.rng, self.dt)


class WallClockLoop(RealtimeLoop):
    """The wall clock: `act` runs on the agent's worker thread (`worker`, its calls tagged with the episode's
    `serial`), its chunk merged at the first step after it finished; an answer later than `act_timeout_s` ends the
    episode as `timeout`. `check_worker` ends the episode when a call posted to the worker failed. With `paced`, the
    loop sleeps to the control rate (an env that paces itself is never slept for)."""

    def __init__(
        self,
        sc: EpisodeScaffold,
        timing: RealtimeTiming,
        dt: float,
        *,
        worker: AgentWorker,
        serial: int,
        check_worker: Callable[[AgentWorker], None],
        act_timeout_s: float | None,
        paced: bool,
        advance: Callable[[Action, bool], Observation],
        hold_action: Callable[[], Action],
        act: Callable[[Any], object],
    ) -> None:
        super().__init__(sc, timing, dt, advance=advance, hold_action=hold_action, act=act)
        self.worker = worker
        self.serial = serial
        self.check_worker = check_worker
        self.act_timeout_s = act_timeout_s
        self.paced = paced
        self.pending: Call | None = None
        """The act in flight."""
        self.start = time.perf_counter()

    def exchange(self, obs: Observation, step: int) -> None:
        self.check_worker(self.worker)
        if self.pending is not None:
            self._poll(self.pending, step)
        if self.pending is None and self.schedule.due(self.sc.executor.remaining, step):
            self.pending = self.worker.submit(self.act, snapshot(obs), step, self.serial)
            self.counts.chunks += 1
            self.schedule.asked = step

    def _poll(self, pending: Call, step: int) -> None:
        """Merge the act in flight when it finished; end the episode when it failed or runs past `act_timeout_s`."""
        sc = self.sc
        if pending.done.is_set():
            if pending.error is not None:
                raise EndEpisode(sc.agent_failed(pending.error))
            chunk = sc.answered(pending.result, pending.latency)
            self.schedule.merge(sc, chunk, pending.latency, None, pending.step)
            self.schedule.delayed(step - pending.step)
            self.pending = None
        elif self.act_timeout_s is not None and time.perf_counter() - pending.submitted > self.act_timeout_s:
            raise EndEpisode(sc.agent_failed(AgentTimeout(None, self.act_timeout_s)))

    def pace(self) -> None:
        if self.paced:
            delay_s = self.start + self.sc.steps * self.dt - time.perf_counter()
            if delay_s > 0:
                time.sleep(delay_s)
