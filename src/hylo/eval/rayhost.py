"""The policy host on Ray (`--backend ray --batch B`): the process host's serving loop (`batching.host.Host`) in a
Ray actor, given `--host-gpus` GPUs, that the Ray workers' stand-in agents reach over TCP.

A Ray worker may run on another machine than the run's process, so the host cannot listen on a Unix socket beside
it: the actor listens on its node's address (a port the system picks; every connection proves the run's key before
anything is unpickled, within seconds, as on the Unix socket: `batching.handshake`), and a small beacon actor, named
in the workers' `HostEndpoint`, tells them where the host listens now, or why there is none once the supervisor gave
up. `RayPolicyHost` is `PolicyHost` with the process replaced by the actor: the same watch loop restarts a host that
died or ran a call past `act_timeout`, and the same figures end the run. Ray actors share no memory with the run, so
the actor keeps its figures and the supervisor reads them each time it looks (`WATCH_S`) and hands them to a
replacement: a host that dies loses what it did since it was last read.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.connection as mpc
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from hylo.core.child import error_payload
from hylo.eval.batching import HostEndpoint, HostFailed, PolicyHost
from hylo.eval.batching.batcher import Batcher
from hylo.eval.batching.host import CALL_STARTED, FIGURES_SIZE, Host
from hylo.eval.batching.supervisor import START_TIMEOUT_S, build_failure
from hylo.eval.process_setup import WorkerFailed
from hylo.eval.raypool import join_ray

logger = logging.getLogger(__name__)

ANSWER_S = 5.0
"""How long the host actor has to tell its figures before the supervisor looks again (a busy host may hold its
interpreter a while: silence is not death, an actor Ray reports lost is)."""

HOST_CPUS = 1
"""The CPU the host actor reserves (it runs the agent's code around the GPU call)."""


def _set(conn: mpc.Connection | socket.socket, level: int, option: int, value: int | bytes) -> None:
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        sock.setsockopt(level, option, value)
    finally:
        sock.close()


def _no_delay(conn: mpc.Connection) -> None:
    """Send each message at once: a large one goes out as a header and a body, which Nagle's algorithm would hold
    back for the peer's delayed acknowledgement (tens of ms)."""
    _set(conn, socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Listener(mpc.Listener):
    """The host's TCP listener, made without a key (its connections prove it at the host's door), whose connections
    send without delay."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, family="AF_INET")

    def accept(self) -> mpc.Connection:
        conn = super().accept()
        _no_delay(conn)
        return conn


@dataclass(frozen=True)
class RayHostEndpoint(HostEndpoint):
    """Where a Ray policy host listens: `address` names the run's beacon actor, which knows the host's address."""

    def _where(self) -> tuple[Any, str | None]:
        try:
            beacon: Any = ray.get_actor(self.address)
            where: tuple[Any, str | None] = ray.get(beacon.where.remote(), timeout=ANSWER_S)
        except (RayError, ValueError) as exc:  # ValueError: no such actor (the run is ending)
            raise ConnectionError(f"the policy host's beacon {self.address!r} did not answer: {exc}") from None
        return where

    def connect(self) -> mpc.Connection:
        address, _ = self._where()
        if address is None:
            raise ConnectionRefusedError("no policy host serves now (it is being started)")
        conn = mpc.Client(tuple(address), family="AF_INET", authkey=self.authkey)
        _no_delay(conn)
        return conn

    def why_given_up(self) -> str | None:
        try:
            return self._where()[1]
        except ConnectionError:
            return None


class _Beacon:
    """Where the run's host listens now (None while it is being started), or why the supervisor gave up."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None
        self.why: str | None = None

    def serving(self, address: tuple[str, int] | None) -> None:
        self.address = address

    def give_up(self, why: str) -> None:
        self.address, self.why = None, why

    def where(self) -> tuple[tuple[str, int] | None, str | None]:
        return self.address, self.why


class _HostActor:
    """The host: `start` builds the agent and serves on a thread of its own; the actor's methods answer meanwhile."""

    def __init__(self) -> None:
        self._figures: list[float] = [0.0] * FIGURES_SIZE
        self._stop: mpc.Connection | None = None
        self._thread: threading.Thread | None = None

    def start(
        self,
        authkey: bytes,
        factory: Callable[[], Any],
        max_batch: int,
        wait_s: float,
        figures: list[float],
        setup: Callable[[], None] | None,
    ) -> tuple[str, Any]:
        """`("ready", (address, pid))`, or `("err", payload)` naming why the agent could not be built."""
        try:
            node: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
            listener = _Listener((node, 0))
            self._figures = list(figures)  # its predecessors', added to
            stop, control = mpc.Pipe()
            host = Host(control, listener, authkey, factory, Batcher(max_batch, wait_s), self._figures)
            if setup is not None:
                setup()
        except Exception as exc:
            return "err", error_payload(exc)
        self._stop = stop
        self._thread = threading.Thread(target=self._serve, args=(host,), daemon=True, name="hylo-host-serve")
        self._thread.start()
        return "ready", (listener.address, os.getpid())

    @staticmethod
    def _serve(host: Host) -> None:
        try:
            host.serve()
        finally:
            host.close()

    def figures(self) -> tuple[list[float], float]:
        """Its figures, and how long the call in progress has run (0: none), on its own clock."""
        started = self._figures[CALL_STARTED]
        return list(self._figures), (time.monotonic() - started if started else 0.0)

    def stop(self) -> list[float]:
        """Stop serving (nothing is in flight); the final figures."""
        if self._stop is not None:
            with contextlib.suppress(OSError):
                self._stop.send(("stop",))
        if self._thread is not None:
            self._thread.join(10)
        return list(self._figures)


_HOST_OPTIONS: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
_Host = ray.remote(**_HOST_OPTIONS)(_HostActor)
_BeaconActor = ray.remote(num_cpus=0, max_restarts=0)(_Beacon)


class RayPolicyHost(PolicyHost):
    """A run's policy host as a Ray actor, and its restarts (see the module's docstring)."""

    def __init__(
        self,
        factory: Callable[[], Any],
        max_batch: int,
        wait_s: float,
        *,
        overdue_s: float | None = None,
        setup: Callable[[], None] | None = None,
        gpus: float = 0.0,
        address: str | None = None,
        workers: int = 1,
    ) -> None:
        super().__init__(factory, max_batch, wait_s, overdue_s=overdue_s, setup=setup)
        self.gpus = gpus
        self.address = address
        self.workers = workers
        self.endpoint = RayHostEndpoint(f"hylo-policy-host-{secrets.token_hex(8)}", self.endpoint.authkey)
        self._figures: Any = [0.0] * FIGURES_SIZE
        self._call_s = 0.0
        self._lost = ""
        self._beacon: Any = None
        self._owns_ray = False

    def start(self) -> None:
        """Join Ray (a local one holds the workers and the host), start the beacon, then the host."""
        try:
            self._owns_ray = join_ray(self.address, self.workers + HOST_CPUS)
        except WorkerFailed as exc:
            raise HostFailed(str(exc)) from None
        have = float(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
        if self.gpus > have:
            self.close()
            raise HostFailed(f"--host-gpus {self.gpus:g} asks for more GPUs than the Ray cluster has ({have:g})")
        self._beacon = _BeaconActor.options(name=self.endpoint.address).remote()
        super().start()

    def _spawn(self) -> None:
        actor: Any = _Host.options(num_cpus=HOST_CPUS, num_gpus=self.gpus).remote()
        started = actor.start.remote(
            self.endpoint.authkey, self.factory, self.max_batch, self.wait_s, list(self._figures), self.setup
        )
        try:
            status, payload = ray.get(started, timeout=START_TIMEOUT_S)
        except GetTimeoutError:
            ray.kill(actor, no_restart=True)
            raise HostFailed(
                f"the policy host could not start: it was not built within {START_TIMEOUT_S:.0f} s (does the Ray "
                f"cluster have a free CPU{' and ' + format(self.gpus, 'g') + ' GPU' if self.gpus else ''}?)"
            ) from None
        except RayError as exc:
            raise HostFailed(f"the policy host could not start: its Ray actor died ({type(exc).__name__})") from None
        if status != "ready":
            ray.kill(actor, no_restart=True)
            raise build_failure(payload)
        address, pid = payload
        ray.get(self._beacon.serving.remote(tuple(address)), timeout=ANSWER_S)
        self._process, self._control, self.pid = actor, None, pid

    def _alive(self, process: Any, wait_s: float) -> bool:
        self._closing.wait(wait_s)
        try:
            figures, call_s = ray.get(process.figures.remote(), timeout=ANSWER_S)
        except GetTimeoutError:
            return True  # busy: judged again at the next look
        except RayError as exc:
            self._lost = type(exc).__name__
            return False
        self._figures[:] = figures
        self._call_s = call_s
        return True

    def _death(self, process: Any) -> str:
        return f"died: its Ray actor was lost ({self._lost or 'killed'})"

    def _overdue(self) -> bool:
        return self.overdue_s is not None and self._call_s > self.overdue_s

    def _end(self, *, kill_it: bool) -> None:
        actor = self._process
        self._process = self._control = None
        self._call_s = 0.0
        self._figures[CALL_STARTED] = 0.0  # a call it died in is not its successor's
        if actor is None:
            return
        with contextlib.suppress(RayError):
            ray.get(self._beacon.serving.remote(None), timeout=ANSWER_S)
        if not kill_it:
            with contextlib.suppress(RayError):
                self._figures[:] = ray.get(actor.stop.remote(), timeout=ANSWER_S + 10)
        ray.kill(actor, no_restart=True)

    def kill(self) -> None:
        actor = self._process
        if actor is not None:
            ray.kill(actor, no_restart=True)

    def _give_up(self, why: str) -> None:
        logger.error("%s; the run's remaining episodes end as error", why)
        with contextlib.suppress(RayError):
            ray.get(self._beacon.give_up.remote(why), timeout=ANSWER_S)

    def close(self) -> None:
        super().close()
        if self._beacon is not None:
            with contextlib.suppress(RayError):
                ray.kill(self._beacon, no_restart=True)
            self._beacon = None
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
