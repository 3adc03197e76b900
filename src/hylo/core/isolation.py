"""Hard timeouts: the agent runs in a child process that is killed when a call overruns its deadline.

A thread cannot be killed, so a hung `act` in a thread would hang the run forever; a process can. After a kill the
next episode starts a fresh child (built again by the factory), so the run goes on. What the agent raises in its
process comes back by type (`hylo.core.child`): its own `AgentTimeout` (a remote call of its that timed out) is the
episode's `timeout`, as it would be in process.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import multiprocessing.connection as mpc
from collections.abc import Callable
from typing import Any

from hylo.core.agent import AgentBase, AgentRequirements, agent_name, containers_of, requirements_of
from hylo.core.bus import EventBus
from hylo.core.child import RemoteError, error_payload, kill, reap, rebuild_error, spawn_process
from hylo.core.context import EpisodeContext
from hylo.core.errors import AgentTimeout, HyloError
from hylo.core.events import EVENT_TYPES, BaseEvent
from hylo.core.signals import ContainerSet, Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation, StepResult


class AgentCrashed(HyloError):
    """The agent's process died (segfault, out of memory, killed)."""


RemoteAgentError = RemoteError
"""What an agent's exception of a type that does not decide a status becomes in the parent (`hylo.core.child`)."""


def _identity(agent: Any) -> Any:
    return agent


def _overrides(agent: Any, method: str) -> bool:
    """Whether the agent does something in `method` (AgentBase's no-op hooks need no round trip)."""
    impl = getattr(type(agent), method, None)
    return callable(getattr(agent, method, None)) and impl is not getattr(AgentBase, method, None)


def _child_main(conn: mpc.Connection, factory: Callable[[], Any]) -> None:
    # It leads its own process group (a kill also ends whatever the agent started: a server, a shell) and dies with
    # its parent (an orphaned agent must not keep a GPU or a CPU busy forever): `spawn_process` sees to both.
    try:
        child = _ChildAgent(factory())
        conn.send(("ready", child.hello()))
    except Exception as exc:
        conn.send(("err", error_payload(exc)))
        return
    while True:
        try:
            op, payload = conn.recv()
        except EOFError:
            return
        if op == "close":
            return
        if op == "signal":
            child.signal(payload)
        else:
            child.answer(conn, op, payload)


class _ChildAgent:
    """The agent in its child process, and what the child does with each message the parent sends it."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.requirements = requirements_of(agent)
        self.containers = ContainerSet(containers_of(agent))
        self.on_signal: Callable[[Signal], Any] | None = getattr(agent, "on_signal", None)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.bus = EventBus()
        self.signal_error: dict[str, Any] | None = None
        self.collect = self._collect  # one bound method: subscribed and unsubscribed as the same subscriber

    def hello(self) -> tuple[str, AgentRequirements | None, dict[str, bool]]:
        """The agent's name, requirements and hooks, for the parent."""
        signals = bool(len(self.containers)) or self.on_signal is not None
        return (
            agent_name(self.agent),
            self.requirements,
            {"on_step": _overrides(self.agent, "on_step"), "signals": signals},
        )

    def _collect(self, event: BaseEvent) -> None:
        self.events.append((event.event, event.model_dump(include={"content", "name", "value"})))

    def signal(self, payload: Any) -> None:
        self.containers.on_signal(payload)
        if self.on_signal is not None:
            try:
                self.on_signal(Signal(payload))
            except Exception as exc:  # reported with the next reply: the parent sends signals without waiting
                self.signal_error = error_payload(exc)

    def answer(self, conn: mpc.Connection, op: str, payload: Any) -> None:
        """Run the call `op` and send its value with the events it emitted, or the error it raised."""
        self.events.clear()
        if self.signal_error is not None:  # the agent failed on a signal since the last call: that call fails with it
            conn.send(("err", self.signal_error))
            self.signal_error = None
            return
        try:
            value = self._call(op, payload)
            conn.send(("ok", (value, list(self.events))))
        except Exception as exc:
            conn.send(("err", error_payload(exc)))

    def _call(self, op: str, payload: Any) -> Any:
        if op == "reset":
            return self._reset(payload)
        if op == "act":
            return self.agent.act(payload)
        if op == "on_step":
            return getattr(self.agent, "on_step", lambda r: None)(payload)
        if op == "on_episode_end":
            return getattr(self.agent, "on_episode_end", lambda o: None)(payload)
        raise ValueError(f"unknown operation {op!r}")

    def _reset(self, payload: Any) -> Any:
        seed, env_spec, task, tracing, clock = payload
        bus = self.bus
        if tracing and not bus.active:
            bus.subscribe(self.collect)
        elif not tracing and bus.active:
            bus.unsubscribe(self.collect)
        bus.begin_episode(task.episode_id)
        context = EpisodeContext(
            seed=seed, env_spec=env_spec, task=task, containers=self.containers, bus=bus, clock=clock
        )
        return getattr(self.agent, "reset", lambda ctx: None)(context)


class ProcessAgent:
    """Runs an agent in a child process with a deadline per call.

    `factory` builds the agent in the child (it must be picklable: a class, a `functools.partial`, or use
    `ProcessAgent.from_instance(agent, ...)` for a picklable instance). A call to `act` or `on_step` that overruns
    `act_timeout_s` kills the child and raises `AgentTimeout`; the next episode starts a new child. The agent's
    state containers live in the child; lifecycle signals are forwarded to it. Privileged state is not available
    to an isolated agent.
    """

    def __init__(self, factory: Callable[[], Any], act_timeout_s: float, *, start_timeout_s: float = 120.0) -> None:
        if not act_timeout_s > 0:
            raise ValueError(f"act_timeout_s must be > 0, got {act_timeout_s!r}")
        self.factory = factory
        self.act_timeout_s = act_timeout_s
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self._ctx = mp.get_context("spawn")
        self._proc: Any = None
        self._conn: mpc.Connection | None = None
        self._episode_ctx: EpisodeContext | None = None
        self.name = ""
        self.requirements: AgentRequirements | None = None
        self._has_on_step = True
        self._forwards_signals = True
        self._start()

    @classmethod
    def from_instance(cls, agent: Any, act_timeout_s: float, **kwargs: Any) -> ProcessAgent:
        """Isolate an existing (picklable) agent: the child gets a copy of it."""
        return cls(functools.partial(_identity, agent), act_timeout_s, **kwargs)

    # -- process management ---------------------------------------------------------------------------------------

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        try:
            proc = spawn_process(self._ctx, _child_main, (child, self.factory), name="hylo-agent")
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._proc, self._conn = proc, parent
        status, payload = self._receive(self.start_timeout_s, "start")
        if status == "err":
            self._kill()
            raise rebuild_error(payload)
        self.name, self.requirements, hooks = payload
        self._has_on_step = hooks["on_step"]
        self._forwards_signals = hooks["signals"]

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None:
            kill(proc)  # the agent and everything it started
            reap(proc, 5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def _receive(self, timeout: float, op: str) -> tuple[str, Any]:
        conn = self._conn
        assert conn is not None
        try:
            ready = conn.poll(timeout)
            if not ready:
                self._kill()
                raise AgentTimeout(None, timeout, op)
            message: tuple[str, Any] = conn.recv()
            return message
        except (EOFError, OSError, BrokenPipeError):
            code = self._proc.exitcode if self._proc is not None else None
            self._kill()
            raise AgentCrashed(f"agent process died during {op} (exit code {code})") from None

    def _call(self, op: str, payload: Any, timeout: float) -> Any:
        if self._conn is None:
            self.restarts += 1
            self._start()
        assert self._conn is not None
        try:
            self._conn.send((op, payload))
        except (OSError, BrokenPipeError):
            self._kill()
            raise AgentCrashed(f"agent process died before {op}") from None
        status, result = self._receive(timeout, op)
        if status == "err":  # as the agent raised it: an AgentTimeout of its own is the episode's timeout
            raise rebuild_error(result)
        value, events = result
        ctx = self._episode_ctx
        if events and ctx is not None and ctx.bus.active:
            for kind, fields in events:
                ctx.bus.emit(EVENT_TYPES[kind], **fields)
        return value

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send(("close", None))
            if self._proc is not None:
                self._proc.join(2)
        self._kill()

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:
            return

    # -- the agent interface ---------------------------------------------------------------------------------------

    def reset(self, ctx: EpisodeContext) -> None:
        self._episode_ctx = ctx
        payload = (ctx.seed, ctx.env_spec, ctx.task, ctx.bus.active, ctx.clock)
        self._call("reset", payload, self.start_timeout_s)

    def act(self, obs: Observation) -> Any:
        return self._call("act", obs, self.act_timeout_s)

    def on_step(self, result: StepResult) -> None:
        if self._has_on_step:
            self._call("on_step", result._replace(info=dict(result.info)), self.act_timeout_s)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        if self._conn is not None:
            self._call("on_episode_end", outcome, self.start_timeout_s)

    def on_signal(self, signal: Signal) -> None:
        if self._forwards_signals and self._conn is not None:
            try:
                self._conn.send(("signal", signal.value))
            except (OSError, BrokenPipeError):
                self._kill()
