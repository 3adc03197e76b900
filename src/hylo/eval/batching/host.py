"""The policy-host process: one agent, many episodes, `act_batch` calls of at most B requests.

Each env worker connects once over a Unix socket (`proxy.HostedAgent`) and sends its episode's calls, tagged by a
serial number: `reset`, `act`, `on_step`, `on_episode_end`, and lifecycle signals (which need no answer). The host
keeps one client per connection, with its state containers and an event bus of its own, and one `EpisodeContext` per
running episode; the agent's hooks are called with that episode's context (`shared_hook`). `act` requests wait in a
`Batcher`; every call of the agent on them is `act_batch`, a batch of one included, never `act`.

When `act_batch` raises, every request of that batch gets the error (each episode ends `error`, with the reason the
agent gave) and the agent is built again; the running episodes keep their contexts and go on with the new one.
The loop is single-threaded (threads only accept connections and check their key, `handshake.Door`: a peer that
does not prove the key within seconds is dropped, and never delays the others): the agent is never called
concurrently.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection as mpc
import os
import queue
import threading
import time
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass, field
from typing import Any

from hylo.core.agent import AgentBase, acts_in_batches, agent_name, containers_of, requirements_of, shared_hook
from hylo.core.bus import EventBus
from hylo.core.child import error_payload
from hylo.core.context import EpisodeContext
from hylo.core.errors import HyloError
from hylo.core.events import BaseEvent
from hylo.core.signals import ContainerSet, Signal
from hylo.eval.batching.batcher import Batcher, Request
from hylo.eval.batching.handshake import Door
from hylo.eval.batching.wire import recv_message, send_message

CALLS, REQUESTS, QUEUE_S, BUSY_S, CALL_STARTED, FIRST_REQUEST, LAST_ANSWER = range(7)
"""The slots of the figures the host keeps in shared memory for its supervisor (floats): calls of `act_batch`,
requests they answered, the requests' summed queue wait, the seconds spent inside calls, when the call in progress
started (0 between calls), when the run's first request arrived and when the last call ended (monotonic clock,
which every process of the machine shares). They outlive a host: its replacement adds to them."""
FIGURES_SIZE = 7


class NotBatched(HyloError):
    """An agent without `act_batch` asked to serve a batched run (or one that reads privileged simulator state)."""


@dataclass
class _Client:
    """One worker's connection: its containers and bus live as long as the connection, its context per episode."""

    conn: mpc.Connection
    containers: ContainerSet
    bus: EventBus = field(default_factory=EventBus)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ctx: EpisodeContext | None = None
    tracing: bool = False
    signal_error: dict[str, Any] | None = None
    orphaned: dict[str, Any] | None = None
    """Set when the agent was rebuilt while this worker's episode ran outside the failed batch: the new agent never
    saw that episode's reset or steps, so its next call fails instead of acting on state it does not have."""

    def collect(self, event: BaseEvent) -> None:
        self.events.append((event.event, event.model_dump(include={"content", "name", "value"})))


def check_batchable(agent: Any) -> None:
    """Refuse an agent a policy host cannot serve, naming why."""
    name = agent_name(agent)
    if not acts_in_batches(agent):
        raise NotBatched(
            f"agent {name!r} has no act_batch(observations, contexts): --batch needs an agent that acts on a batch "
            "of observations (README, Batched inference); run it without --batch"
        )
    requirements = requirements_of(agent)
    if requirements is not None and getattr(requirements, "privileged_state", False):
        raise NotBatched(f"agent {name!r} reads privileged simulator state, which a policy host cannot reach")


def hooks_of(agent: Any) -> dict[str, bool]:
    """Which of its calls a worker must send at all (a no-op hook costs no round trip per step)."""
    on_step = getattr(type(agent), "on_step", None)
    overrides = callable(getattr(agent, "on_step", None)) and on_step is not getattr(AgentBase, "on_step", None)
    signals = bool(containers_of(agent)) or callable(getattr(agent, "on_signal", None))
    return {"on_step": overrides, "signals": signals}


class Host:
    """The serving loop of one host process (see the module's docstring)."""

    def __init__(
        self,
        control: mpc.Connection,
        listener: mpc.Listener,
        authkey: bytes,
        factory: Callable[[], Any],
        batcher: Batcher,
        figures: MutableSequence[float],
    ) -> None:
        """`listener` is made without a key: the connections it accepts prove `authkey` at the door."""
        self.control = control
        self.listener = listener
        self.factory = factory
        self.batcher = batcher
        self.figures = figures
        self.agent = self._build()
        self.hello = (agent_name(self.agent), requirements_of(self.agent), hooks_of(self.agent))
        self.clients: dict[int, _Client] = {}
        self._incoming: queue.SimpleQueue[mpc.Connection] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        self._door = Door(listener, authkey, self._arrived)

    def _build(self) -> Any:
        agent = self.factory()
        check_batchable(agent)
        self._on_step = shared_hook(agent, "on_step")
        self._on_end = shared_hook(agent, "on_episode_end")
        self._reset = getattr(agent, "reset", None)
        self._on_signal = getattr(agent, "on_signal", None)
        return agent

    # -- connections ------------------------------------------------------------------------------------------------

    def _arrived(self, conn: mpc.Connection) -> None:
        """A connection proved the key: the serving loop greets it."""
        self._incoming.put(conn)
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"c")

    def _admit(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._wake_r, 4096)
        while True:
            try:
                conn = self._incoming.get_nowait()
            except queue.Empty:
                return
            client = _Client(conn, ContainerSet(containers_of(self.agent)))
            if self._send(client, ("hello", 0, self.hello)):
                self.clients[id(conn)] = client

    def _drop(self, client: _Client) -> None:
        self.batcher.drop(id(client.conn))
        self.clients.pop(id(client.conn), None)
        with contextlib.suppress(OSError):
            client.conn.close()

    def _send(self, client: _Client, message: tuple[Any, ...]) -> bool:
        try:
            send_message(client.conn, message)
        except (OSError, EOFError, BrokenPipeError):
            self._drop(client)
            return False
        return True

    # -- the loop ---------------------------------------------------------------------------------------------------

    def serve(self) -> None:
        threading.Thread(target=self._door.serve, daemon=True, name="hylo-host-accept").start()
        while True:
            running = sum(client.ctx is not None for client in self.clients.values())
            timeout = self.batcher.due_in(time.monotonic(), running)
            waitables: list[Any] = [self.control, self._wake_r, *(c.conn for c in self.clients.values())]
            ready = mpc.wait(waitables, timeout)
            for item in ready:
                if item is self.control:
                    return  # a stop, or the supervisor is gone
                if item == self._wake_r:
                    self._admit()
                    continue
                client = self.clients.get(id(item))
                if client is not None:
                    self._receive(client)
            running = sum(client.ctx is not None for client in self.clients.values())
            while self.batcher.due_in(time.monotonic(), running) == 0.0:
                self._act(self.batcher.take())

    def close(self) -> None:
        self._door.closing = True
        with contextlib.suppress(OSError):
            self.listener.close()
        for client in list(self.clients.values()):
            self._drop(client)

    def _receive(self, client: _Client) -> None:
        try:
            op, serial, payload = recv_message(client.conn)
        except (OSError, EOFError):
            self._drop(client)  # its worker is gone: so is its episode
            return
        if op == "signal":
            self._signal(client, payload)
            return
        if op in ("act", "on_step") and client.orphaned is not None:
            self._send(client, ("err", serial, client.orphaned))
            return
        if op == "act":
            if client.ctx is None:
                failure = error_payload(HyloError("act before reset: the host holds no episode for this worker"))
                self._send(client, ("err", serial, failure))
            else:
                now = time.monotonic()
                if not self.figures[FIRST_REQUEST]:
                    self.figures[FIRST_REQUEST] = now
                self.batcher.add(Request(id(client.conn), serial, payload, now))
            return
        client.events.clear()
        if client.signal_error is not None:  # the agent failed on a signal since the last call: this call fails
            failure, client.signal_error = client.signal_error, None
            self._send(client, ("err", serial, failure))
            return
        try:
            value = self._hook(client, op, payload)
        except Exception as exc:
            self._send(client, ("err", serial, error_payload(exc)))
            return
        self._send(client, ("ok", serial, (value, list(client.events), None)))

    def _hook(self, client: _Client, op: str, payload: Any) -> Any:
        if op == "reset":
            seed, env_spec, task, tracing, clock = payload
            if tracing and not client.tracing:
                client.bus.subscribe(client.collect)
            elif not tracing and client.tracing:
                client.bus.unsubscribe(client.collect)
            client.tracing = tracing
            client.orphaned = None
            client.bus.begin_episode(task.episode_id)
            client.ctx = EpisodeContext(
                seed=seed, env_spec=env_spec, task=task, containers=client.containers, bus=client.bus, clock=clock
            )
            return None if self._reset is None else self._reset(client.ctx)
        if op == "on_step":
            if self._on_step is not None and client.ctx is not None:
                self._on_step(payload, client.ctx)
            return None
        if op == "on_episode_end":
            ctx, client.ctx = client.ctx, None
            self.batcher.drop(id(client.conn))  # an act it gave up waiting for
            if self._on_end is not None and ctx is not None:
                self._on_end(payload, ctx)
            return None
        raise ValueError(f"unknown operation {op!r}")

    def _signal(self, client: _Client, value: str) -> None:
        client.containers.on_signal(value)
        if self._on_signal is not None:
            try:
                self._on_signal(Signal(value))
            except Exception as exc:  # reported with the next answer: signals are sent without waiting
                client.signal_error = error_payload(exc)

    def _act(self, batch: list[Request]) -> None:
        """One `act_batch` call on `batch`, answered to every episode in it."""
        clients = [self.clients[request.client] for request in batch]
        contexts = [client.ctx for client in clients]
        for client in clients:
            client.events.clear()
        started = time.monotonic()
        self.figures[CALL_STARTED] = started
        try:
            chunks = list(self.agent.act_batch([r.obs for r in batch], contexts))
            if len(chunks) != len(batch):
                raise ValueError(f"act_batch returned {len(chunks)} chunks for {len(batch)} observations")
        except Exception as exc:
            self._settle(batch, started)
            failure = error_payload(exc)
            for request, client in zip(batch, clients, strict=True):
                self._send(client, ("err", request.serial, failure))
            self.agent = self._build()  # a failed agent is not trusted with the next batch
            self._orphan(set(map(id, clients)), exc)
            return
        call_s = self._settle(batch, started)
        for request, client, chunk in zip(batch, clients, chunks, strict=True):
            info = (len(batch), started - request.received, call_s)
            self._send(client, ("ok", request.serial, (chunk, list(client.events), info)))

    def _orphan(self, failed: set[int], exc: Exception) -> None:
        """The episodes running outside a failed batch lost their state with the agent: each fails at its next call."""
        why = error_payload(HyloError(
            f"the policy agent was rebuilt after another episode's act_batch raised {exc!r}; the new agent holds "
            "none of this episode's state"
        ))  # fmt: skip
        for client in self.clients.values():
            if client.ctx is not None and id(client) not in failed:
                client.orphaned = why

    def _settle(self, batch: list[Request], started: float) -> float:
        ended = time.monotonic()
        figures = self.figures
        figures[CALL_STARTED] = 0.0
        figures[CALLS] += 1
        figures[REQUESTS] += len(batch)
        figures[QUEUE_S] += sum(started - request.received for request in batch)
        figures[BUSY_S] += ended - started
        figures[LAST_ANSWER] = ended
        return ended - started


def host_main(
    control: mpc.Connection,
    address: str,
    authkey: bytes,
    factory: Callable[[], Any],
    max_batch: int,
    wait_s: float,
    figures: MutableSequence[float],
    setup: Callable[[], None] | None,
) -> None:
    """The host process: build the agent, tell the supervisor (`ready` or `err`), serve until told to stop."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)  # a dead host's socket
        listener = mpc.Listener(address, family="AF_UNIX")  # the key is proved at the host's door
        host = Host(control, listener, authkey, factory, Batcher(max_batch, wait_s), figures)
        if setup is not None:
            setup()
    except Exception as exc:
        control.send(("err", error_payload(exc)))
        return
    control.send(("ready", os.getpid()))
    try:
        host.serve()
    finally:
        host.close()
