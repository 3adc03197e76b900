"""The policy host seen from the run's process: started before the workers, restarted when it dies, stopped last.

`PolicyHost.start()` spawns the host (`hylo.core.child`: it dies with the run, and a kill ends whatever it started)
and waits until its agent is built; a first build that fails is the run's error (`HostFailed`: a bad agent, or one
without `act_batch`), as a worker's is. A thread then watches it: a host that dies (or whose `act_batch` call runs
past `overdue_s`, the act timeout with its grace or the agent's allowance, which every request in it has then
passed) is killed and started again, and the workers'
next episodes connect to the new one. The figures the host keeps in shared memory outlive it: `figures()` reads
them for the end of the run.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection as mpc
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hylo.core.child import kill, reap, rebuild_error, signal_name, spawn_process
from hylo.core.errors import HyloError
from hylo.eval.batching.host import (
    BUSY_S,
    CALL_STARTED,
    CALLS,
    FIGURES_SIZE,
    FIRST_REQUEST,
    LAST_ANSWER,
    QUEUE_S,
    REQUESTS,
    NotBatched,
    host_main,
)
from hylo.eval.batching.proxy import HostEndpoint

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 300.0
"""How long the host may take to build its agent (a VLA loads gigabytes of weights)."""

RESTART_ATTEMPTS = 3
"""How often in a row a host that dies while it starts is started again before the supervisor gives up (the
workers' episodes then end `error`, naming the host, until the run ends)."""

WATCH_S = 0.1
"""How often the supervisor looks at a running call's age."""


class HostFailed(HyloError):
    """The policy host could not be started; the message says why."""


@dataclass(frozen=True)
class BatchFigures:
    """What a batched run's host did, for choosing B and W (README, Batched inference)."""

    calls: int
    requests: int
    mean_batch_size: float
    mean_queue_wait_ms: float
    utilisation: float
    """The share of the time from the run's first request to its last answer that the host spent in `act_batch`."""
    restarts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "requests": self.requests,
            "mean_batch_size": round(self.mean_batch_size, 3),
            "mean_queue_wait_ms": round(self.mean_queue_wait_ms, 3),
            "host_utilisation": round(self.utilisation, 3),
            "host_restarts": self.restarts,
        }


class PolicyHost:
    """One policy-host process for a run, and its restarts."""

    def __init__(
        self,
        factory: Callable[[], Any],
        max_batch: int,
        wait_s: float,
        *,
        overdue_s: float | None = None,
        setup: Callable[[], None] | None = None,
    ) -> None:
        self.factory = factory
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.overdue_s = overdue_s
        self.setup = setup
        self._dir = tempfile.mkdtemp(prefix="hylo-host-")  # short: a Unix socket's path has at most 107 bytes
        self.endpoint = HostEndpoint(os.path.join(self._dir, "host.sock"), os.urandom(32))
        self._context = multiprocessing.get_context("spawn")
        self._figures: Any = self._context.RawArray("d", FIGURES_SIZE)
        self._process: Any = None
        self._control: mpc.Connection | None = None
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self.restarts = 0
        self.pid: int | None = None

    def start(self) -> None:
        """Start the host and wait until it serves; raise `HostFailed` naming the cause when it cannot."""
        try:
            self._spawn()
        except HostFailed:
            self.close()
            raise
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="hylo-host-watch")
        self._watcher.start()

    def _spawn(self) -> None:
        parent, child = self._context.Pipe()
        args = (child, self.endpoint.address, self.endpoint.authkey, self.factory, self.max_batch, self.wait_s,
                self._figures, self.setup)  # fmt: skip
        try:
            process = spawn_process(self._context, host_main, args, name="hylo-policy-host")
        finally:
            child.close()
        ready = mpc.wait([parent, process.sentinel], START_TIMEOUT_S)
        message: tuple[str, Any] | None = None
        if parent in ready:
            with contextlib.suppress(EOFError, OSError):
                message = parent.recv()
        if message is None or message[0] != "ready":
            kill(process)
            reap(process, 5)
            parent.close()
            if message is None:
                why = "it was not built in time" if not ready else _died(process.exitcode)
                raise HostFailed(f"the policy host could not start: {why}")
            raise build_failure(message[1])
        self._process, self._control, self.pid = process, parent, message[1]

    def _watch(self) -> None:
        failures = 0
        while not self._closing.is_set():
            process = self._process
            if process is not None:  # else the last start failed: try again
                alive = self._alive(process, WATCH_S)
                overdue = self._overdue()
                if self._closing.is_set() or (alive and not overdue):
                    continue
                with self._lock:
                    if self._closing.is_set():
                        return
                    self._end(kill_it=True)
                why = f"ran an act_batch call past {self.overdue_s:g} s" if overdue else self._death(process)
                logger.warning("the policy host %s; starting a new one", why)
            with self._lock:
                if self._closing.is_set():
                    return
                try:
                    self._spawn()
                    self.restarts += 1
                    failures = 0
                except HostFailed as exc:
                    failures += 1
                    logger.warning("%s", exc)
                    if failures >= RESTART_ATTEMPTS:
                        self._give_up(f"the policy host could not be restarted {failures} times: {exc}")
                        return

    def _alive(self, process: Any, wait_s: float) -> bool:
        """Whether the host still runs, after waiting at most `wait_s` for it to end."""
        process.join(wait_s)
        return bool(process.is_alive())

    def _death(self, process: Any) -> str:
        """How the host ended."""
        return _died(process.exitcode)

    def _give_up(self, why: str) -> None:
        """Tell the workers (their episodes end `error` with `why` instead of waiting for a host that never comes)."""
        logger.error("%s; the run's remaining episodes end as error", why)
        with open(self.endpoint.given_up, "w") as given_up:
            given_up.write(why)

    def _overdue(self) -> bool:
        started = self._figures[CALL_STARTED]
        limit = self.overdue_s
        return limit is not None and started > 0 and time.monotonic() - started > limit

    def _end(self, *, kill_it: bool) -> None:
        process, control = self._process, self._control
        self._process = self._control = None
        if process is None:
            return
        self._figures[CALL_STARTED] = 0.0
        if not kill_it and control is not None:
            with contextlib.suppress(OSError):
                control.send(("stop",))
            reap(process, 10)
        kill(process)
        reap(process, 5)
        if control is not None:
            control.close()

    def kill(self) -> None:
        """Kill the host process as a crash would (the supervisor starts another)."""
        process = self._process
        if process is not None:
            kill(process)

    def close(self) -> None:
        """Stop the host (after the workers: nothing is in flight) and remove its socket."""
        self._closing.set()
        with self._lock:
            self._end(kill_it=False)
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def figures(self) -> BatchFigures:
        return figures_of(self._figures, self.restarts)


def figures_of(f: Any, restarts: int) -> BatchFigures:
    """A host's figures (its shared slots) for the end of the run."""
    calls, requests = int(f[CALLS]), int(f[REQUESTS])
    serving = f[LAST_ANSWER] - f[FIRST_REQUEST]  # from the first request to the last answer
    return BatchFigures(
        calls=calls,
        requests=requests,
        mean_batch_size=requests / calls if calls else 0.0,
        mean_queue_wait_ms=1000.0 * f[QUEUE_S] / requests if requests else 0.0,
        utilisation=min(1.0, f[BUSY_S] / serving) if serving > 0 else 0.0,
        restarts=restarts,
    )


def build_failure(payload: dict[str, Any]) -> HostFailed:
    """The run's error for a host whose agent could not be built (`payload`: what the host sent)."""
    error = rebuild_error(payload)
    plain = isinstance(error, NotBatched) or type(error).__name__ == "NotBatched"
    return HostFailed(str(error) if plain else f"the policy host could not build its agent: {error!r}")


def _died(exitcode: int | None) -> str:
    name = signal_name(exitcode)
    return f"died ({name})" if name else f"died (exit code {exitcode})"
