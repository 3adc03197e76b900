"""What an env worker's Kernel holds under `--batch`: a stand-in for the agent that forwards its calls to the policy
host, tagged by a serial number, and waits for the answer to each.

The Kernel neither knows nor cares: it calls `reset`, `act`, `on_step`, `on_episode_end` as on any agent, and only
when its chunk executor is empty does it call `act` (a step served from a chunk never reaches the host). `act`
waits at most `act_timeout_s` for its answer, queue wait included (then `AgentTimeout`, and an answer that comes
later is ignored). A host that dies costs the episode in progress (`PolicyHostDied`, naming the host); the next
episode connects again, to the host the supervisor started in its place. The time a worker waits for that host is
neither the agent's nor the env's (the worker's meter `hold`s it): a host that takes its time to build its agent again
never costs an episode an agent timeout. Once the supervisor has given up on the host, every episode ends `error`
naming why, on every worker: one started after that (a replacement) is built all the same, so how a run ends never
depends on which worker was started, or asked for the host, first.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection as mpc
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from hylo.core.agent import AgentRequirements
from hylo.core.child import rebuild_error
from hylo.core.context import EpisodeContext
from hylo.core.errors import AgentTimeout, HyloFailure
from hylo.core.events import EVENT_TYPES, AgentBatchEvent
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation, StepResult
from hylo.eval.batching.wire import recv_message, send_message

CONNECT_TIMEOUT_S = 300.0
"""How long a worker keeps trying to reach the policy host (a restarted host builds its agent again first)."""

RETRY_S = 0.05
"""How long a worker waits between two attempts to connect."""

HOLD_S = CONNECT_TIMEOUT_S + 30.0
"""How long a watcher lets a worker wait for its host before it takes the worker for hung (the worker itself gives
up after `CONNECT_TIMEOUT_S`)."""

LATE_S = 0.5
"""A connection that closes this close to a call's deadline, or after it, was closed for the call's lateness: the
supervisor kills a host whose call ran past `act_timeout` (plus its grace), so the call's verdict is `timeout`."""


class PolicyHostDied(HyloFailure):
    """The policy host's process died, or could not be reached, while an episode needed it."""


class Holds(Protocol):
    """What keeps an episode's time (the worker's meter): the time a worker waits for its host is nobody's."""

    def hold(self, limit_s: float) -> bool: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class HostEndpoint:
    """Where a policy host listens: a Unix socket, and the key a worker proves itself with. The supervisor writes
    why at `given_up` when it can no longer start a host: a worker then stops trying to reach one."""

    address: str
    authkey: bytes = field(repr=False)

    @property
    def given_up(self) -> str:
        return self.address + ".given-up"

    def connect(self) -> mpc.Connection:
        """A connection to the host serving now; raises `OSError` while there is none (it is being started)."""
        return mpc.Client(self.address, family="AF_UNIX", authkey=self.authkey)

    def why_given_up(self) -> str | None:
        """Why the supervisor stopped starting hosts (None: it has not)."""
        with contextlib.suppress(OSError), open(self.given_up) as given_up:
            return given_up.read().strip()
        return None


class HostedAgent:
    """The agent of one worker under `--batch` (see the module's docstring)."""

    containers = ()  # they live in the host, one set per worker

    def __init__(
        self, endpoint: HostEndpoint, *, act_timeout_s: float | None = None, meter: Holds | None = None
    ) -> None:
        self.endpoint = endpoint
        self.act_timeout_s = act_timeout_s
        self.meter = meter
        self._conn: mpc.Connection | None = None
        self._serial = 0
        self._ctx: EpisodeContext | None = None
        self.name = ""
        self.requirements: AgentRequirements | None = None
        self._has_on_step = True
        self._forwards_signals = True
        try:
            self._connect()
        except PolicyHostDied:
            if self.endpoint.why_given_up() is None:
                raise
            # the supervisor gave up on the host before this worker was built: each of its episodes ends `error`
            # naming why (its first call raises it), as those of the workers that were built before

    # -- the connection ---------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        """Reach the host and take its greeting, retrying (a host being restarted) until `CONNECT_TIMEOUT_S`; the
        wait is no party's time in the episode."""
        meter = self.meter
        held = meter is not None and meter.hold(HOLD_S)
        try:
            self._reach()
        finally:
            if meter is not None and held:
                meter.release()

    def _reach(self) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                conn = self.endpoint.connect()
                if not conn.poll(max(0.0, deadline - time.monotonic())):
                    conn.close()
                    raise TimeoutError("it accepted the connection but did not greet this worker")
                _, _, (name, requirements, hooks) = recv_message(conn)
                break
            except (EOFError, OSError) as exc:
                why = self.endpoint.why_given_up()
                if why is not None:
                    raise PolicyHostDied(why) from None
                if time.monotonic() > deadline:
                    raise PolicyHostDied(
                        f"the policy host at {self.endpoint.address} could not be reached within "
                        f"{CONNECT_TIMEOUT_S:.0f} s: {exc or type(exc).__name__}"
                    ) from None
                time.sleep(RETRY_S)
        self._conn = conn
        self.name, self.requirements = name, requirements
        self._has_on_step, self._forwards_signals = hooks["on_step"], hooks["signals"]

    def _lost(self, op: str) -> PolicyHostDied:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._conn = None
        return PolicyHostDied(f"the policy host died during {op}; the supervisor restarts it")

    def _call(self, op: str, payload: Any, timeout: float | None) -> tuple[Any, list[Any], Any]:
        if self._conn is None:
            self._connect()
        conn = self._conn
        assert conn is not None
        self._serial += 1
        serial = self._serial
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            send_message(conn, (op, serial, payload))
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not conn.poll(left):
                    raise AgentTimeout(None, timeout or 0.0, op)
                status, answered, result = recv_message(conn)
                if answered == serial:
                    break  # else the late answer to a call this worker gave up on
        except (EOFError, OSError):
            if deadline is not None and time.monotonic() >= deadline - LATE_S:
                self._lost(op)  # the host was killed for running this call past its time: the call's timeout
                raise AgentTimeout(None, timeout or 0.0, op) from None
            raise self._lost(op) from None
        if status == "err":  # as the agent raised it: the episode's reason is the one an unbatched run gives
            raise rebuild_error(result)
        value, events, info = result
        ctx = self._ctx
        if ctx is not None and ctx.bus.active:
            for kind, fields in events:
                ctx.bus.emit(EVENT_TYPES[kind], **fields)
            if info is not None:
                size, queue_s, call_s = info
                ctx.bus.emit_trusted(AgentBatchEvent, size=size, queue_s=queue_s, call_s=call_s)
        return value, events, info

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        self._conn = None

    # -- the agent interface ----------------------------------------------------------------------------------------

    def reset(self, ctx: EpisodeContext) -> None:
        self._ctx = ctx
        payload = (ctx.seed, ctx.env_spec, ctx.task, ctx.bus.active, ctx.clock)
        try:
            self._call("reset", payload, CONNECT_TIMEOUT_S)
        except PolicyHostDied:
            # The host this worker knew died between episodes (or while it took this reset): nothing of this episode
            # has run yet, so it starts on the host the supervisor started in its place.
            self._call("reset", payload, CONNECT_TIMEOUT_S)

    def act(self, obs: Observation) -> Any:
        return self._call("act", obs, self.act_timeout_s)[0]

    def on_step(self, result: StepResult) -> None:
        if self._has_on_step:
            self._call("on_step", result._replace(info=dict(result.info)), CONNECT_TIMEOUT_S)  # as unbatched: no limit

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        if self._conn is not None:
            self._call("on_episode_end", outcome, CONNECT_TIMEOUT_S)

    def on_signal(self, signal: Signal) -> None:
        if self._forwards_signals and self._conn is not None:
            try:
                send_message(self._conn, ("signal", 0, signal.value))
            except OSError:
                self._lost("a signal")
