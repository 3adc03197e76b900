"""One agent for every connection of a batched bridge (`hylo bridge vlaeval --batch B`).

The agent is built once. Each connection's session holds a `ConnectionAgent` in its place: it keeps the connection's
`EpisodeContext` (the session makes one per episode: seed and `ctx.rng`, containers, the connection's bus), calls the
shared agent's `reset(ctx)` and `on_episode_end(outcome, ctx)` with it, and sends each `act` to `BatchedAgent`, whose
thread gathers the requests of every connection into `act_batch` calls by the rule of `hylo.eval.batching.batcher`
(at most B, closed when full, as soon as every open episode has a request waiting, or W after the oldest) — the
rule `hylo eval --batch` follows. Every act goes through `act_batch`, a batch of one included, never `act`.

The agent is never called concurrently (one lock around each of its calls). When `act_batch` raises, each request of
that batch gets its own copy of the error, so each of those episodes ends `error` with the reason an unbatched bridge
gives (`agent raised RuntimeError: ...`); the other connections go on, and so does the agent (an unbatched bridge
keeps a connection's agent after it raised, too). A connection that drops while its request is in a batch is
answered like the others; its reply is not delivered and its episode is recorded as a dropped one.
"""

from __future__ import annotations

import concurrent.futures
import copy
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from hylo.core.agent import acts_in_batches, agent_name, requirements_of, shared_hook
from hylo.core.child import error_payload, rebuild_error
from hylo.core.context import EpisodeContext
from hylo.core.errors import HyloError
from hylo.core.events import AgentBatchEvent
from hylo.core.status import EpisodeOutcome
from hylo.core.types import Observation
from hylo.eval.batching.batcher import Batcher, Request

log = logging.getLogger(__name__)


class NotBatched(HyloError):
    """The bridge was asked to batch an agent that has no `act_batch`."""


class BridgeStopped(HyloError):
    """The bridge stopped while the request waited for its batch."""


def check_batchable(agent: Any) -> None:
    """Refuse an agent without `act_batch`, naming it (there is no fallback that maps `act` over a batch: it would
    run the connections' calls one after another, slower than one agent per connection)."""
    if not acts_in_batches(agent):
        raise NotBatched(
            f"agent {agent_name(agent)!r} has no act_batch(observations, contexts): --batch needs an agent that acts "
            "on a batch of observations (README, Batched inference); run the bridge without --batch"
        )


def copy_of(exc: BaseException) -> BaseException:
    """A copy of `exc` for one of the episodes it costs: each waiting thread raises its own (raising one exception in
    several threads would splice their tracebacks together). Of the same type, message and traceback when it can be
    copied, else rebuilt by name (`hylo.core.child.rebuild_error`): the episode's reason is the same either way."""
    try:
        clone = copy.copy(exc)
        if type(clone) is not type(exc) or clone.args != exc.args:
            raise TypeError("not copied")
    except Exception:
        return rebuild_error(error_payload(exc))
    clone.__cause__, clone.__context__ = exc.__cause__, exc.__context__
    return clone.with_traceback(exc.__traceback__)


@dataclass(frozen=True)
class _Waiting:
    """What a request carries through the batcher: the observation, its episode's context, where its answer goes."""

    obs: Observation
    ctx: EpisodeContext
    answer: concurrent.futures.Future[tuple[Any, int, float, float]]


class BatchedAgent:
    """The agent every connection shares, with its batcher and the thread that calls `act_batch`. It stands where an
    unbatched bridge has its `AgentPool`: `acquire` gives a connection its `ConnectionAgent`, `release` takes it
    back, `size` is 1 (one copy of the model), `close` closes the agent once the bridge stopped."""

    def __init__(self, agent: Any, max_batch: int, wait_s: float) -> None:
        check_batchable(agent)
        self.agent = agent
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._batcher = Batcher(max_batch, wait_s)
        self._on_end = shared_hook(agent, "on_episode_end")
        self._cond = threading.Condition()
        self._calling = threading.Lock()  # held around every call of the agent: it is never called concurrently
        self._open: set[int] = set()  # the clients with an episode open: a batch closes once all of them wait
        self._clients = itertools.count(1)
        self._serials = itertools.count(1)
        self._closing = False
        self._calls = self._requests = 0
        self._queue_s = self._busy_s = 0.0
        self._first: float | None = None
        self._last = 0.0
        self._thread = threading.Thread(target=self._serve, name="hylo-bridge-batcher", daemon=True)
        self._thread.start()

    # -- the pool's interface ---------------------------------------------------------------------------------------

    def acquire(self) -> ConnectionAgent:
        return ConnectionAgent(self, next(self._clients))

    def release(self, agent: Any) -> None:
        """A connection closed: it has no episode open any more (its session recorded it)."""
        if isinstance(agent, ConnectionAgent):
            self.opened(agent.client, False)

    @property
    def size(self) -> int:
        return 1

    def figures(self) -> dict[str, Any]:
        """What the batching did, for choosing B and W (the figures `hylo eval --batch` ends with)."""
        with self._cond:
            calls, requests, queue_s, busy_s = self._calls, self._requests, self._queue_s, self._busy_s
            serving = self._last - self._first if self._first is not None else 0.0
        return {
            "max_batch": self.max_batch,
            "wait_ms": round(self.wait_s * 1000.0, 3),
            "calls": calls,
            "requests": requests,
            "mean_batch_size": round(requests / calls, 3) if calls else 0.0,
            "mean_queue_wait_ms": round(1000.0 * queue_s / requests, 3) if requests else 0.0,
            "utilisation": round(min(1.0, busy_s / serving), 3) if serving > 0 else 0.0,
        }

    def close(self) -> None:
        """Stop batching: requests still waiting fail (`BridgeStopped`: the bridge recorded their episodes), and the
        agent is closed (its `close()`, when it has one) unless it is still in a call."""
        with self._cond:
            self._closing = True
            waiting: list[Request] = []
            while len(self._batcher):
                waiting.extend(self._batcher.take())
            self._cond.notify_all()
        for request in waiting:
            request.obs.answer.set_exception(BridgeStopped("the bridge stopped before this request's batch ran"))
        if not self._calling.acquire(timeout=1.0):
            log.warning("the agent was still acting when the bridge stopped; not closed")
            return
        try:
            close = getattr(self.agent, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    log.warning("closing agent %r raised %r", self.agent, exc)
        finally:
            self._calling.release()

    # -- what a connection's agent asks -----------------------------------------------------------------------------

    def opened(self, client: int, is_open: bool) -> None:
        """Whether `client` has an episode open: a batch waits for the requests of open episodes only."""
        with self._cond:
            if is_open:
                self._open.add(client)
            else:
                self._open.discard(client)
            self._cond.notify_all()  # one fewer to wait for may close the batch now

    def call(self, method: Any, *args: Any) -> Any:
        """Call one of the agent's hooks, never while another of its calls runs."""
        with self._calling:
            return method(*args)

    def tell_end(self, outcome: EpisodeOutcome, ctx: EpisodeContext) -> None:
        if self._on_end is not None:
            self.call(self._on_end, outcome, ctx)

    def request(self, client: int, obs: Observation, ctx: EpisodeContext) -> Any:
        """The chunk `act_batch` computed for this observation (waiting for its batch); raises what the call raised
        (a copy of it)."""
        answer: concurrent.futures.Future[tuple[Any, int, float, float]] = concurrent.futures.Future()
        with self._cond:
            if self._closing:
                raise BridgeStopped("the bridge is stopping")
            now = time.monotonic()
            if self._first is None:
                self._first = now
            self._batcher.add(Request(client, next(self._serials), _Waiting(obs, ctx, answer), now))
            self._cond.notify_all()
        chunk, size, queue_s, call_s = answer.result()
        ctx.bus.emit_trusted(AgentBatchEvent, size=size, queue_s=queue_s, call_s=call_s)
        return chunk

    # -- the batching thread ----------------------------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._closing and self._batcher.due_in(time.monotonic(), len(self._open)) != 0.0:
                    self._cond.wait(self._batcher.due_in(time.monotonic(), len(self._open)))
                if self._closing:
                    return
                batch = self._batcher.take()
            try:
                self._act(batch)
            except Exception as exc:  # a fault of the bridge's own: still answer every request, keep serving
                log.exception("answering a batch failed")
                for request in batch:
                    if not request.obs.answer.done():
                        request.obs.answer.set_exception(exc)

    def _act(self, batch: list[Request]) -> None:
        """One `act_batch` call on `batch`, each request answered with its chunk or its copy of the error."""
        waiting: list[_Waiting] = [request.obs for request in batch]
        with self._calling:
            started = time.monotonic()
            try:
                chunks = list(self.agent.act_batch([w.obs for w in waiting], [w.ctx for w in waiting]))
                if len(chunks) != len(batch):
                    raise ValueError(f"act_batch returned {len(chunks)} chunks for {len(batch)} observations")
                failure = None
            except BaseException as exc:  # whatever the agent raised costs the episodes of this batch only
                failure = exc
            ended = time.monotonic()
        with self._cond:
            self._calls += 1
            self._requests += len(batch)
            self._queue_s += sum(started - request.received for request in batch)
            self._busy_s += ended - started
            self._last = ended
        for index, (request, item) in enumerate(zip(batch, waiting, strict=True)):
            if failure is not None:
                item.answer.set_exception(copy_of(failure))
            else:
                item.answer.set_result((chunks[index], len(batch), started - request.received, ended - started))


class ConnectionAgent:
    """What one connection's session holds for the shared agent: the connection's context, its requests tagged as
    its own. Its `reset`, `act` and `on_episode_end` are the session's calls of an agent (see `ServedSession`)."""

    def __init__(self, shared: BatchedAgent, client: int) -> None:
        self.shared = shared
        self.client = client
        self.name = agent_name(shared.agent)
        self.requirements = requirements_of(shared.agent)
        self._ctx: EpisodeContext | None = None

    def reset(self, ctx: EpisodeContext) -> None:
        self._ctx = ctx
        self.shared.opened(self.client, True)
        reset = getattr(self.shared.agent, "reset", None)
        if reset is not None:
            self.shared.call(reset, ctx)

    def act(self, obs: Observation) -> Any:
        ctx = self._ctx
        if ctx is None:
            raise HyloError("act before reset: the bridge holds no episode for this connection")
        return self.shared.request(self.client, obs, ctx)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        ctx, self._ctx = self._ctx, None
        self.shared.opened(self.client, False)
        if ctx is not None:
            self.shared.tell_end(outcome, ctx)


__all__ = ["BatchedAgent", "BridgeStopped", "ConnectionAgent", "NotBatched", "check_batchable"]
