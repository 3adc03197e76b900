"""The worker pool on Ray: the same `EpisodeWorker`s, as Ray actors, past one machine.

`RayPool` joins the cluster at `address` (a local Ray when none is given), starts one actor per worker, each owning
its env manager, and hands out one episode at a time per idle actor. An actor that dies mid-episode costs that
episode only (`infra_invalid`, the actor is replaced). The pool asks a busy actor, on a thread of its own, to judge
its episode's record (`hylo.eval.limits`) whenever a limit may have been passed; an episode found past one kills its
actor, charged to the party whose call crossed it. An actor that does not answer (a call holds its interpreter) is
judged from its last answer, the silence taken for an env call.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from hylo.core.status import EpisodeStatus
from hylo.cpus import usable_cpus
from hylo.eval.limits import EpisodeLimits, Verdict, aged, dated, headroom, judge, read, silent
from hylo.eval.pool import LOOK_AGAIN_S, START_ATTEMPTS, START_TIMEOUT_S, STOP_GRACE_S, SlotPool
from hylo.eval.process_setup import WorkerFailed, limit_threads, serve_as_batched_worker
from hylo.eval.worker import EpisodeJob, EpisodeResult, EpisodeWorker, WorkerConfig, lost_episode

LOCAL = "local"
"""The Ray address that starts a Ray of this run's own (what no address means)."""

PARTIAL_START_S = 10.0
"""How long the pool waits for every actor before it starts work with those that are built."""

WATCH_ANSWER_S = 2.0
"""How long an actor has to answer the pool's question before its silence is judged (as an env call since then)."""

ASK_AGAIN_S = 5.0
"""The longest the pool goes without asking a busy actor (the last answer is what its silence is judged from)."""

Watch = tuple[Verdict | None, float, list[float] | None]
"""An actor's answer: the verdict on its episode (None: within its limits), its headroom, and its record (times as
ages; None when it is not running the episode it was asked about)."""


def join_ray(address: str | None, cpus: int) -> bool:
    """Connect this process to Ray at `address` (a local Ray of at least `cpus` CPUs when none is given), unless it
    is connected already; True when this call connected it (the caller then shuts it down)."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    address = address or LOCAL  # never a cluster found on this machine: another user may have started it
    if address == LOCAL:
        options["num_cpus"] = max(cpus, usable_cpus())
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RayError, ValueError) as exc:
        where = "start a Ray on this machine" if address == LOCAL else f"join the Ray cluster at {address!r}"
        raise WorkerFailed(f"cannot {where}: {exc}") from None
    return True


class _ActorWorker:
    """The actor: an `EpisodeWorker` on one thread, and a second thread that judges its record while it runs."""

    def __init__(self, config: WorkerConfig, name: str) -> None:
        if config.policy_host is not None:  # Ray leaves an actor that asked for no GPU every GPU of its node
            serve_as_batched_worker()
        self.worker = EpisodeWorker(config, name=name)
        self.job: tuple[str, int] | None = None

    def initialize(self) -> int:
        self.worker.initialize()
        limit_threads()
        return os.getpid()

    def run(self, job: EpisodeJob) -> EpisodeResult:
        self.job = (job.task.episode_id, job.attempt)
        try:
            return self.worker.run(job).serialized()
        finally:
            self.job = None

    def shutdown(self) -> None:
        self.worker.shutdown()

    @ray.method(concurrency_group="watch")
    def watch(self, episode_id: str, attempt: int) -> Watch:
        """The verdict on the episode this actor runs (None while it is not running that one), on its own clock."""
        now = time.monotonic()
        meter = self.worker.meter
        record = read(meter.record)
        if self.job != (episode_id, attempt) or meter.limits is None:
            return None, LOOK_AGAIN_S, None
        return judge(record, now, meter.limits), headroom(record, now, meter.limits), aged(record, now)


_ACTOR_OPTIONS: dict[str, Any] = {
    "num_cpus": 1,
    "max_restarts": 0,
    "max_task_retries": 0,
    "concurrency_groups": {"watch": 1},
}
_Actor = ray.remote(**_ACTOR_OPTIONS)(_ActorWorker)


@dataclass
class _Slot:
    name: str
    actor: Any
    starting: Any = None  # the initialize() future until the actor is built
    job: EpisodeJob | None = None
    future: Any = None
    started: float = 0.0
    look: float = 0.0  # monotonic: when to ask (or, while a question is out, when its silence is judged)
    limits: EpisodeLimits | None = None
    asking: Any = None  # the watch() future of the question that is out
    asked: float = 0.0
    last: list[float] | None = None  # the record of the last answer, on this host's clock
    failed_starts: int = 0
    replacement: bool = False
    spawned: float = field(default_factory=time.monotonic)

    @property
    def ready(self) -> bool:
        return self.starting is None


def _died(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:2000]


class RayPool(SlotPool):
    """`size` Ray actors, each owning its env manager (one CPU each)."""

    _slots: list[_Slot]

    def __init__(
        self, config: WorkerConfig, size: int, limits: Mapping[str, EpisodeLimits], *, address: str | None = None
    ) -> None:
        super().__init__(config, size, limits)
        self.address = address
        self._owns_ray = False

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        self._owns_ray = join_ray(self.address, self.size)

    def _spawn(self, index: int, *, replacement: bool = False) -> _Slot:
        name = self._name("ray", index)
        actor: Any = _Actor.remote(self.config, name)
        return _Slot(name, actor, starting=actor.initialize.remote(), replacement=replacement)

    def start(self) -> None:
        """Start the actors; return once all are built, or once one is and the others are still waiting for a CPU
        (they join when the cluster has room)."""
        self._connect()
        self._slots = [self._spawn(i) for i in range(self.size)]
        started = time.monotonic()
        while not all(slot.ready for slot in self._slots):
            waited = time.monotonic() - started
            if any(slot.ready for slot in self._slots) and waited > PARTIAL_START_S:
                return
            if waited > START_TIMEOUT_S:
                free = ray.available_resources().get("CPU", 0)  # type: ignore[no-untyped-call]
                raise WorkerFailed(
                    f"no Ray worker started within {START_TIMEOUT_S:.0f} s: does the cluster have a free CPU "
                    f"({free} available)?"
                )
            self._wait(1.0)

    def close(self, *, kill: bool = False) -> None:
        slots, self._slots = self._slots, []
        if not kill:
            done = [slot.actor.shutdown.remote() for slot in slots if slot.ready and slot.job is None]
            if done:
                ray.wait(done, num_returns=len(done), timeout=STOP_GRACE_S)
        for slot in slots:
            ray.kill(slot.actor, no_restart=True)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False

    # -- jobs ---------------------------------------------------------------------------------------------------------

    def submit(self, job: EpisodeJob) -> bool:
        slot = self._idle_slot()
        self._assign(slot, job)
        slot.last = slot.asking = None  # a question about the last episode is no longer waited for
        slot.future = slot.actor.run.remote(job)
        return True

    def poll(self, timeout: float) -> list[EpisodeResult]:
        if self.busy() or not all(slot.ready for slot in self._slots):
            self._wait(self._wait_s(timeout))
        results, self._results = self._results, []
        return results

    def _wait(self, timeout: float | None) -> None:
        futures, questions = {}, {}
        for slot in self._slots:
            if slot.starting is not None:
                futures[slot.starting] = slot
            elif slot.future is not None:
                futures[slot.future] = slot
            if slot.asking is not None:
                questions[slot.asking] = slot
        waiting = [*futures, *questions]
        if waiting:
            ready, _ = ray.wait(waiting, num_returns=1, timeout=timeout)
            if ready:  # and whatever else is ready already
                ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            for future in ready:  # results first: an episode that ended is judged by its worker
                if future in futures:
                    self._collect(futures[future], future)
            for future in ready:
                if future in questions:
                    self._answered(questions[future], future)
        now = time.monotonic()
        for slot in list(self._slots):
            if slot.job is not None and now >= slot.look:
                self._look(slot, now)
            elif not slot.ready and now - slot.spawned > START_TIMEOUT_S:
                self._failed_start(slot, f"it was not built within {START_TIMEOUT_S:.0f} s (no free CPU?)")

    def _failed_start(self, slot: _Slot, why: str) -> None:
        if slot.failed_starts + 1 >= START_ATTEMPTS:
            raise WorkerFailed(f"worker {slot.name} could not start {START_ATTEMPTS} times: {why}")
        self._replace(slot, failed_starts=slot.failed_starts + 1)

    def _collect(self, slot: _Slot, future: Any) -> None:
        if future is slot.starting:
            try:
                ray.get(future)
            except RayTaskError as exc:
                if not slot.replacement:  # the first build failed: bad input, not infrastructure
                    raise WorkerFailed(f"worker {slot.name} could not start: {exc.cause!r}") from None
                self._failed_start(slot, repr(exc.cause))
            except RayError as exc:  # died while starting
                self._failed_start(slot, _died(exc))
            else:
                slot.starting = None
            return
        job = slot.job
        slot.job = slot.future = None
        try:
            self._results.append(ray.get(future))
        except RayTaskError as exc:  # a defect in the runner, not in the episode: abort the run
            raise WorkerFailed(f"worker {slot.name} failed outside any episode: {exc}") from None
        except RayError as exc:  # the actor died (a crash, out of memory, its node lost)
            assert job is not None
            detail = f"{_died(exc)}; the worker was replaced"
            reason = f"worker died: its Ray actor was lost ({type(exc).__name__})"
            self._lost(slot, job, EpisodeStatus.INFRA_INVALID, reason, detail)

    def _look(self, slot: _Slot, now: float) -> None:
        """Ask a busy actor for its verdict, or judge its silence when a question has gone unanswered too long."""
        job, limits = slot.job, slot.limits
        assert job is not None and limits is not None
        if slot.asking is None:
            slot.asking, slot.asked = slot.actor.watch.remote(job.task.episode_id, job.attempt), now
            slot.look = now + WATCH_ANSWER_S
            return
        record = silent(slot.last, slot.asked)
        verdict = judge(record, now, limits)
        if verdict is not None:
            self._timed_out(slot, verdict)
        else:
            slot.look = now + max(LOOK_AGAIN_S, headroom(record, now, limits))

    def _answered(self, slot: _Slot, future: Any) -> None:
        slot.asking = None
        try:
            verdict, room, ages = ray.get(future)
        except RayError:  # the actor is gone: its run() says how
            return
        if slot.job is None:
            return
        now = time.monotonic()
        if ages is not None:
            slot.last = dated(ages, now)
        if verdict is not None:
            self._timed_out(slot, verdict)
        else:
            slot.look = now + min(ASK_AGAIN_S, max(LOOK_AGAIN_S, room))

    def _timed_out(self, slot: _Slot, verdict: Verdict) -> None:
        job = slot.job
        assert job is not None
        ray.kill(slot.actor, no_restart=True)
        slot.job = slot.future = slot.asking = None
        self._lost(slot, job, verdict.status, verdict.reason, f"{verdict.detail}; its worker was replaced")

    def _lost(self, slot: _Slot, job: EpisodeJob, status: EpisodeStatus, reason: str, detail: str) -> None:
        self._results.append(
            lost_episode(job, worker=slot.name, status=status, reason=reason, detail=detail, started=slot.started)
        )
        self._replace(slot)

    def _replace(self, slot: _Slot, *, failed_starts: int = 0) -> None:
        ray.kill(slot.actor, no_restart=True)
        index = self._slots.index(slot)
        self.replaced += 1
        fresh = self._spawn(index, replacement=True)
        fresh.failed_starts = failed_starts
        self._slots[index] = fresh
