"""Where episodes run: inline, or in a pool of isolated worker processes.

A pool takes one `EpisodeJob` at a time per idle worker (a dynamic queue: a slow episode never holds back the
others) and hands back finished `EpisodeResult`s. The process pool isolates every worker: one that dies mid-episode
(segfault, `os._exit`, SIGKILL, out of memory) costs that episode only — it comes back `infra_invalid` with the
reason — and the worker is replaced. An episode past one of its limits (`hylo.eval.limits`: an env call past its
own, the agent past its allowance) ends its worker too: the pool reads the record the worker keeps in shared memory
and charges the party whose call crossed the limit — the env's is `infra_invalid` (`env timeout`), the agent's
`error` (`agent timeout`, or `timeout` past `--act-timeout`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from typing import Any, Protocol, cast

from hylo.core.child import kill, signal_name, spawn_process
from hylo.core.errors import HyloError, HyloFailure
from hylo.core.status import EpisodeStatus
from hylo.eval.limits import RECORD_SIZE, EpisodeLimits, headroom, judge, read
from hylo.eval.process_setup import WorkerFailed, limit_threads, serve_as_batched_worker
from hylo.eval.worker import EpisodeJob, EpisodeResult, EpisodeWorker, WorkerConfig, lost_episode

START_ATTEMPTS = 3
"""How often a worker that dies while starting is spawned again before the pool gives up."""

START_TIMEOUT_S = 300.0
"""How long a worker may take to build its env manager before it counts as a failed start."""

STOP_GRACE_S = 10.0
"""How long a worker may take to close its env at the end before it is killed."""


class Pool(Protocol):
    """A set of workers that run episodes."""

    size: int

    def start(self) -> None:
        """Start every worker; raise `WorkerFailed` when they cannot be built."""

    def idle(self) -> int:
        """How many workers can take a job now."""

    def busy(self) -> int:
        """How many jobs are running."""

    def submit(self, job: EpisodeJob) -> bool:
        """Hand a job to an idle worker; False when it could not take it after all (it died idle: requeue it)."""

    def poll(self, timeout: float) -> list[EpisodeResult]:
        """Finished attempts (waiting at most `timeout` seconds for one)."""

    def close(self, *, kill: bool = False) -> None:
        """Shut every worker down (`kill`: at once, abandoning running jobs)."""


LOOK_AGAIN_S = 0.05
"""The least a pool waits before it looks at a busy worker's record again; it looks when `headroom` says that a limit
may have been passed, not before."""


class InlinePool:
    """One worker in this process: no isolation, nothing to start. It cannot kill a call that runs past its limit;
    the worker ends the episode with the same verdict when the call returns."""

    size = 1

    def __init__(self, worker: EpisodeWorker) -> None:
        self.worker = worker
        self._job: EpisodeJob | None = None

    def start(self) -> None:
        self.worker.initialize()

    def idle(self) -> int:
        return 0 if self._job is not None else 1

    def busy(self) -> int:
        return 1 - self.idle()

    def submit(self, job: EpisodeJob) -> bool:
        self._job = job
        return True

    def poll(self, timeout: float) -> list[EpisodeResult]:
        job, self._job = self._job, None
        return [] if job is None else [self.worker.run(job)]

    def close(self, *, kill: bool = False) -> None:
        self.worker.shutdown()


# -- worker processes --------------------------------------------------------------------------------------------------


def _worker_main(conn: multiprocessing.connection.Connection, config: WorkerConfig, name: str, record: Any) -> None:
    """A worker process: build once, run the jobs it is sent, close once.

    It dies with the pool, even a SIGKILLed one, and leads a process group of its own (`spawn_process`): a
    terminal's Ctrl-C or a scheduler's SIGTERM to the run's group reaches the pool only (which stops its workers
    itself, so no episode is mistaken for a dead worker), and the pool kills a worker together with whatever it
    started."""
    if config.policy_host is not None:
        serve_as_batched_worker()
    worker = EpisodeWorker(config, name=name, record=record)
    try:
        worker.initialize()
        limit_threads()
    except Exception as exc:
        plain = isinstance(exc, HyloError) and not isinstance(exc, HyloFailure)  # a failure is named by its type
        conn.send(("failed", str(exc) if plain else f"{type(exc).__name__}: {exc}"))
        return
    try:
        conn.send(("ready", os.getpid()))
        while True:
            message = conn.recv()
            if message[0] == "stop":
                break
            try:
                result = worker.run(message[1])
            except Exception:  # a defect in the runner, not in the episode: the pool aborts the run
                conn.send(("crash", traceback.format_exc()))
                break
            conn.send(("result", result.serialized()))
    except (EOFError, OSError):  # the pool is gone
        return
    finally:
        worker.shutdown()


def exit_reason(exitcode: int | None) -> str:
    """What a worker's exit code says about how it died."""
    if exitcode is None:
        return "worker died"
    name = signal_name(exitcode)
    if name is not None:
        why = {
            "SIGKILL": " (killed, or out of memory)",
            "SIGSEGV": " (a segmentation fault in the simulator or the agent)",
            "SIGBUS": " (a bus error in the simulator or the agent)",
            "SIGABRT": " (aborted)",
        }.get(name, "")
        return f"worker died: {name}{why}"
    return f"worker died: exit code {exitcode}"


@dataclass
class _Slot:
    name: str
    process: SpawnProcess
    conn: multiprocessing.connection.Connection
    record: Any  # shared floats: where the worker's episode is (hylo.eval.limits)
    replacement: bool = False
    ready: bool = False
    job: EpisodeJob | None = None
    started: float = 0.0  # wall clock (for the row)
    look: float = 0.0  # monotonic: when to read the record next
    limits: EpisodeLimits | None = None
    pid: int | None = None
    failed_starts: int = 0
    spawned: float = 0.0  # monotonic
    start_error: str | None = None


class SlotPool:
    """What the process and Ray pools share: `size` slots, each a worker that is `ready` or not and runs at most one
    `job` within its task's limits; a replaced worker keeps its slot's index and gets the next generation's name."""

    def __init__(self, config: WorkerConfig, size: int, limits: Mapping[str, EpisodeLimits]) -> None:
        self.config = config
        self.size = size
        self.limits = dict(limits)
        self._slots: list[Any] = []
        self._generation: dict[int, int] = {}
        self._results: list[EpisodeResult] = []
        self.replaced = 0

    def _name(self, prefix: str, index: int) -> str:
        """`w0` for a slot's first worker, then `w0.2`, `w0.3`, … for its replacements."""
        generation = self._generation.get(index, 0) + 1
        self._generation[index] = generation
        return f"{prefix}{index}" if generation == 1 else f"{prefix}{index}.{generation}"

    def idle(self) -> int:
        return sum(slot.ready and slot.job is None for slot in self._slots)

    def busy(self) -> int:
        return sum(slot.job is not None for slot in self._slots)

    def _idle_slot(self) -> Any:
        return next(slot for slot in self._slots if slot.ready and slot.job is None)

    def _assign(self, slot: Any, job: EpisodeJob) -> None:
        """The slot runs `job` from now, within its task's limits."""
        slot.job, slot.started = job, time.time()
        slot.limits = self.limits[job.task.task]
        slot.look = time.monotonic()

    def _wait_s(self, timeout: float) -> float:
        """How long the pool may wait for a message before it must look at a busy worker's record."""
        now = time.monotonic()
        looks: list[float] = [slot.look - now for slot in self._slots if slot.job is not None]
        return max(0.0, min([timeout, *looks]))


class ProcessPool(SlotPool):
    """`size` worker processes (spawned: no state inherited from the parent), each owning its env manager."""

    _slots: list[_Slot]

    def __init__(self, config: WorkerConfig, size: int, limits: Mapping[str, EpisodeLimits]) -> None:
        super().__init__(config, size, limits)
        self._context = multiprocessing.get_context("spawn")
        self._error: WorkerFailed | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    def _spawn(self, index: int, *, replacement: bool, failed_starts: int = 0) -> _Slot:
        name = self._name("w", index)
        parent, child = self._context.Pipe()
        record = self._context.RawArray("d", RECORD_SIZE)
        args = (child, self.config, name, record)
        try:
            process = cast(SpawnProcess, spawn_process(self._context, _worker_main, args, name=f"hylo-{name}"))
        finally:
            child.close()
        return _Slot(name, process, parent, record, replacement, failed_starts=failed_starts, spawned=time.monotonic())

    def start(self) -> None:
        self._slots = [self._spawn(i, replacement=False) for i in range(self.size)]
        while not all(slot.ready for slot in self._slots):
            if self.replaced > START_ATTEMPTS * self.size:
                raise WorkerFailed(f"workers keep dying while the pool starts ({self.replaced} replaced)")
            self._wait(self._slots, 1.0)
            for slot in list(self._slots):
                self._check(slot)
            self._raise()

    def close(self, *, kill: bool = False) -> None:
        slots, self._slots = self._slots, []
        for slot in slots:
            if kill or slot.job is not None or not slot.ready:
                _kill(slot.process)
            else:
                try:
                    slot.conn.send(("stop",))
                except OSError:
                    _kill(slot.process)
        deadline = time.monotonic() + STOP_GRACE_S
        for slot in slots:
            slot.process.join(max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                _kill(slot.process)
                slot.process.join()
            slot.conn.close()

    # -- jobs ---------------------------------------------------------------------------------------------------------

    def submit(self, job: EpisodeJob) -> bool:
        slot = self._idle_slot()
        try:
            slot.conn.send(("run", job))
        except OSError:  # it died while idle: nothing was lost; the job goes back to the queue
            slot.process.join()
            self._replace(slot)
            return False
        self._assign(slot, job)
        return True

    def poll(self, timeout: float) -> list[EpisodeResult]:
        self._raise()
        if self.busy() or not all(slot.ready for slot in self._slots):
            self._wait(self._slots, self._wait_s(timeout))
        for slot in list(self._slots):
            self._check(slot)
        results, self._results = self._results, []
        if not results:
            self._raise()
        return results

    def _raise(self) -> None:
        """Raise a failure noticed while checking the workers (after the results collected with it were handed on)."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    @staticmethod
    def _wait(slots: list[_Slot], timeout: float | None) -> None:
        waitables: list[Any] = [slot.conn for slot in slots] + [slot.process.sentinel for slot in slots]
        multiprocessing.connection.wait(waitables, timeout)

    def _check(self, slot: _Slot) -> None:
        """Collect what a worker sent (ready, a result), or notice that it died or ran past its episode's limit."""
        alive = slot.process.is_alive()  # before reading: whatever it sent before dying is read below
        now = time.monotonic()
        try:
            while slot.conn.poll():
                kind, payload = slot.conn.recv()
                if kind == "result":
                    self._results.append(payload)
                    slot.job = None
                elif kind == "ready":
                    slot.ready, slot.pid = True, payload
                elif kind == "failed":
                    slot.start_error = str(payload)
                elif kind == "crash":
                    self._error = WorkerFailed(f"worker {slot.name} failed outside any episode:\n{payload}")
        except (EOFError, OSError):
            alive = False  # died: its exit code says how
        if not alive:
            slot.process.join()
            self._died(slot)
        elif not slot.ready and now - slot.spawned > START_TIMEOUT_S:
            slot.start_error = f"it was not built within {START_TIMEOUT_S:.0f} s"
            _kill(slot.process)  # the next check counts a failed start
        elif slot.job is not None and slot.limits is not None and now >= slot.look:
            record = read(slot.record)
            verdict = judge(record, now, slot.limits)
            if verdict is None:
                slot.look = now + max(LOOK_AGAIN_S, headroom(record, now, slot.limits))
                return
            _kill(slot.process)
            slot.process.join()
            self._lost(slot, slot.job, verdict.status, verdict.reason, f"{verdict.detail}; its worker was replaced")

    def _died(self, slot: _Slot) -> None:
        reason = exit_reason(slot.process.exitcode)
        if slot.job is not None:
            self._lost(slot, slot.job, EpisodeStatus.INFRA_INVALID, reason, f"{reason}; the worker was replaced")
        elif slot.ready:  # died while idle: nothing lost
            self._replace(slot)
        elif slot.start_error is not None and not slot.replacement:  # the first build failed: bad input, not infra
            self._error = WorkerFailed(f"worker {slot.name} could not start: {slot.start_error}")
            self._slots.remove(slot)
        elif slot.failed_starts + 1 >= START_ATTEMPTS:
            why = slot.start_error or reason
            if slot.process.exitcode == 1 and not slot.replacement:
                why += " (its traceback is above; a script that calls hylo.evaluate with workers needs an "
                why += '`if __name__ == "__main__":` guard)'
            self._error = WorkerFailed(f"worker {slot.name} could not start {START_ATTEMPTS} times: {why}")
            self._slots.remove(slot)
        else:
            self._replace(slot, failed_starts=slot.failed_starts + 1)

    def _lost(self, slot: _Slot, job: EpisodeJob, status: EpisodeStatus, reason: str, detail: str) -> None:
        self._results.append(
            lost_episode(job, worker=slot.name, status=status, reason=reason, detail=detail, started=slot.started)
        )
        self._replace(slot)

    def _replace(self, slot: _Slot, *, failed_starts: int = 0) -> None:
        """A new worker in the dead one's place; it takes jobs once it has been built (the others go on meanwhile)."""
        slot.conn.close()
        index = self._slots.index(slot)
        self.replaced += 1
        self._slots[index] = self._spawn(index, replacement=True, failed_starts=failed_starts)


def _kill(process: SpawnProcess) -> None:
    """SIGKILL a worker and the process group it leads (whatever it started dies with it)."""
    kill(process)
