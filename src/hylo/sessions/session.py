"""An interactive session: a placement and an env that live across several executions of one graph.

A session owns one thread, which builds its env and runner, runs every execution and makes every panel call, so the
simulator (a MuJoCo GL context, a server-mode subprocess' connection) is only ever touched from that thread. Other
threads (the HTTP server) hand it commands and get futures back. While an execution runs, commands are taken
between two iterations (the runner's `gate`), so a panel read or a Pause waits at most one env step; while it is
paused, the gate blocks on the commands.

Play / Pause / Step / Stop are the panel's intents, carried out by `hylo.panels.intents.carry_out` (as the batch
runner's are) with the session as its target; `hylo.sessions.playback` says what each does to the execution.

Placement is sticky: Play again without touching the panel replays the same episode (the graph's `reset` re-arms the
episode the last execution finished). A field change that moves the episode is refused while an execution runs
(`SessionConflict`, HTTP 409); while paused, the paused execution ends first; then the panel's `episode_reset` reaches
the runner (episode-lifetime containers cleared, run-lifetime ones kept).

This module is a little over the usual size on purpose: what is left here is the session thread's loop and the
commands it takes, kept in one place so the one-thread rule can be read and checked at once (its state, inbox,
playback and parts live beside it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any, TypeVar

from hylo.core.bus import EventBus
from hylo.core.errors import HyloError, SignalFailed
from hylo.core.jsonable import jsonable
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import TaskInstance
from hylo.graph.executor import ExecutionStopped
from hylo.panels.base import BaseEnvPanel, PanelReply, PanelState, SideEffect
from hylo.panels.budget import resolve_step_budget
from hylo.sessions.feed import FrameSlot, LiveFeed
from hylo.sessions.inbox import CLOSE, Command, Inbox, Later
from hylo.sessions.parts import SessionParts
from hylo.sessions.playback import Delivered, Delivery, Playback, Start
from hylo.sessions.state import ENABLED, SessionConflict, SessionGone, SessionSetup, SessionState

__all__ = ["Session", "SessionConflict", "SessionGone", "SessionSetup", "SessionState"]

log = logging.getLogger(__name__)

T = TypeVar("T")

BUILD_TIMEOUT_S = 600.0
"""How long a session may take to build its env, agents and server-mode subprocesses."""

CLOSE_TIMEOUT_S = 30.0
"""How long closing a session waits for its thread (an env or agent call in progress) before leaving it."""


class Session:
    """One interactive session. Build it with `start()` (blocks until its env and runner exist, raising what the
    build raised); drive it with `load`, `options`, `change_field` and `act` (each returns a future); `close()` it."""

    def __init__(
        self,
        session_id: str,
        setup: SessionSetup,
        panel: BaseEnvPanel | None,
        *,
        number: int,
        on_closed: Callable[[Session], None] | None = None,
    ) -> None:
        """`panel`: the local panel the session places its episodes with; None when its env nodeset runs in server
        mode, where the session uses the proxy of the subprocess' own panel (`panel` once started). `number` tags its
        subprocesses (`<nodeset>#<number>`); `on_closed` is called from its thread once everything is closed."""
        self.id = session_id
        self.setup = setup
        self.number = number
        self.panel: BaseEnvPanel | None = panel
        self._remote_panel = panel is None
        self.state = SessionState.STARTING
        self.feed = LiveFeed()
        self.frames = FrameSlot()
        self.bus = EventBus(run_id=f"session-{session_id}")
        self.bus.subscribe(self.feed)
        self.created_at = time.time()
        self.error: str | None = None
        self.executions = 0
        self.episode_id: str | None = None
        self.last_outcome: EpisodeOutcome | None = None
        self.last_execution: dict[str, Any] | None = None
        self.containers: dict[str, Any] = {}
        self._inbox = Inbox()
        self._playback = Playback()
        self._closing = False
        self._closing_lock = threading.Lock()
        self._on_closed = on_closed
        self._paused_s = 0.0  # time the current execution spent paused
        self._parts = SessionParts(f"session {session_id}")
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name=f"hylo-session-{session_id}", daemon=True)
        self._built: concurrent.futures.Future[None] = concurrent.futures.Future()

    # -- lifecycle (any thread) -------------------------------------------------------------------------------------

    def start(self, timeout: float = BUILD_TIMEOUT_S) -> None:
        """Start the session's thread and wait until it has built everything; raises the build's error."""
        self._thread.start()
        self._built.result(timeout)

    def begin_close(self) -> None:
        """Ask the session to end any execution (before its next iteration) and close; returns at once."""
        with self._closing_lock:
            if self._closing:
                return
            self._closing = True
            self._inbox.put(CLOSE)
        self._playback.stop("the session was closed")
        if not self.closed:
            self.state = SessionState.CLOSING

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> bool:
        """End any execution, close the runner (and its subprocesses) and the env; idempotent. Returns whether
        everything is closed: False when the session's thread is still in an env or agent call after `timeout`
        seconds (it closes when that call returns; the session says `closing` until then)."""
        self.begin_close()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("session %s: its thread did not end within %g s", self.id, timeout)
                return False
        return not self._thread.is_alive()

    @property
    def closed(self) -> bool:
        return self.state in (SessionState.CLOSED, SessionState.FAILED)

    @property
    def step(self) -> int:
        """The env steps of the current execution (of the last one when idle)."""
        runner = self._parts.runner
        return runner.steps_taken if runner is not None else 0

    # -- commands (any thread) ------------------------------------------------------------------------------------

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn` in the session's thread: at once when idle or paused, between two iterations while running."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._closing_lock:  # nothing is queued behind the close, where no one would take it
            if not self._closing and not self.closed:
                self._inbox.put(Command(fn, future))
                return future
        future.set_exception(SessionGone(f"session {self.id} is {self.state.value}"))
        return future

    def load(self) -> concurrent.futures.Future[PanelState]:
        """The panel's `on_load`."""
        return self.submit(lambda: self._state(self._panel().on_load()))

    def options(self, name: str) -> concurrent.futures.Future[PanelReply]:
        """The panel's `on_options(name)` (a refusal raises `PanelRefused`)."""
        return self.submit(lambda: self._reply(self._panel().on_options(name)))

    def change_field(self, name: str, value: Any) -> concurrent.futures.Future[Delivered]:
        """The panel's `on_field_change`, its `signal` intent forwarded to the runner. Refused while an execution
        runs if the field moves the episode (`SessionConflict`); a paused execution is ended first. A value the
        panel refuses raises `PanelRefused`."""
        pending: list[PanelReply] = []
        return self.submit(lambda: self._change_field(name, value, pending))

    def act(self, name: str) -> concurrent.futures.Future[Delivered]:
        """The panel's `on_action`, its intent carried out (Play, Pause, Step, Stop, a signal). Refused when the
        action is not enabled in the session's state (`SessionConflict`), or unknown (`PanelRefused`)."""
        return self.submit(lambda: self._act(name))

    # -- the session's thread -------------------------------------------------------------------------------------

    def _main(self) -> None:
        self._aloop = asyncio.new_event_loop()
        try:
            self._build()
        except BaseException as exc:
            self.state = SessionState.FAILED
            self.error = f"{type(exc).__name__}: {exc}"
            self._teardown()
            self._built.set_exception(exc)
            self._closed()
            return
        self.state = SessionState.IDLE
        self._built.set_result(None)
        try:
            while True:
                item = self._inbox.get()
                if item is CLOSE:
                    break
                assert isinstance(item, Command)
                self._inbox.run(item)
        finally:
            self._teardown()
            self.state = SessionState.CLOSED
            self.feed.note("session.state", state=self.state.value)
            self._inbox.fail_pending(f"session {self.id} is closed")
            self._closed()

    def _closed(self) -> None:
        if self._on_closed is not None:
            try:
                self._on_closed(self)
            except Exception as exc:
                log.warning("session %s: its on_closed callback failed: %r", self.id, exc)

    def _build(self) -> None:
        runner = self._parts.build(self.setup, number=self.number, bus=self.bus)
        runner.gate = self._gate
        runner.observer = self._observe
        runner.on_nodes = self._nodes
        if self.panel is None:
            self.panel = self._parts.panel
            if self.panel is None:
                raise HyloError(f"the {self.setup.benchmark.name} env nodeset of this session's graph has no panel")
        self.containers = jsonable(runner.containers.snapshot())

    def _teardown(self) -> None:
        self._parts.close()
        if self._aloop is not None:
            self._aloop.close()

    def _drain(self) -> None:
        for item in self._inbox.queued():
            if item is CLOSE:
                self._inbox.put(CLOSE)  # for the main loop, once this execution has ended
                self._playback.stop("the session was closed")
                return
            assert isinstance(item, Command)
            self._inbox.run(item)
            if self._playback.halt is not None:
                return

    def _gate(self, i: int) -> None:
        """Called by the runner before iteration `i`: take the commands, then go on, pause or stop."""
        self._drain()
        playback = self._playback
        while True:
            if self._closing:
                playback.stop("the session was closed")
            if playback.halt is not None:
                raise ExecutionStopped(f"stopped: {playback.halt} after {self.step} steps")
            if playback.proceed():
                self._set_state(SessionState.RUNNING)
                return
            if self.state is not SessionState.PAUSED:
                self._set_state(SessionState.PAUSED)
                self._snapshot()
                if self._parts.runner is not None:
                    self._parts.runner.report_nodes()  # what a paused execution shows: its last iteration
            waited = time.perf_counter()
            item = self._inbox.get()
            self._paused_s += time.perf_counter() - waited
            if item is CLOSE:
                self._inbox.put(CLOSE)
                playback.stop("the session was closed")
                continue
            assert isinstance(item, Command)
            self._inbox.run(item)

    def _set_state(self, state: SessionState) -> None:
        if self.state is not state:
            self.state = state
            self.feed.note("session.state", state=state.value, step=self.step, episode_id=self.episode_id)

    def _snapshot(self) -> None:
        """Keep the containers' values for readers (the session's thread only: the runner is between two steps)."""
        if self._parts.runner is not None:
            self.containers = jsonable(self._parts.runner.containers.snapshot())

    def _nodes(self, message: dict[str, Any]) -> None:
        """The execution's node states and edge values (`hylo.graph.watch`), as a `graph.nodes` event."""
        self.feed.note("graph.nodes", **message)

    def _observe(self, obs: Any) -> None:
        try:
            self.frames.offer(obs, self.step)
        except Exception as exc:  # a view of the execution, never its end
            log.debug("session %s: no frame from %r: %r", self.id, type(obs).__name__, exc)

    def _control_state(self) -> SessionState:
        return self._playback.control_state(self.state)

    def _hook(self, call: Coroutine[Any, Any, T], kind: type[T]) -> T:
        assert self._aloop is not None
        answer = self._aloop.run_until_complete(call)
        if not isinstance(answer, kind):
            raise HyloError(f"panel {self._panel().name!r} answered {answer!r}, not a {kind.__name__}")
        return answer

    def _reply(self, call: Coroutine[Any, Any, PanelReply]) -> PanelReply:
        return self._hook(call, PanelReply)

    def _state(self, call: Coroutine[Any, Any, PanelState]) -> PanelState:
        return self._hook(call, PanelState)

    def _panel(self) -> BaseEnvPanel:
        if self.panel is None:
            raise SessionGone(f"session {self.id} has no panel")
        return self.panel

    # -- panel intents (the session's thread) -------------------------------------------------------------------

    def _change_field(self, name: str, value: Any, pending: list[PanelReply]) -> Delivered:
        panel = self._panel()
        if pending:  # the paused execution has ended: the move's signal reaches the runner now
            return self._deliver(pending[0])
        spec = panel.field(name)
        moves = spec is not None and spec.moves_episode
        state = self._control_state()
        if moves and state is SessionState.RUNNING:
            raise SessionConflict(
                f"field {name!r} of panel {panel.name!r} would move the episode while an execution is running "
                f"(step {self.step} of {self.episode_id}); Pause or Stop it first"
            )
        reply = self._reply(panel.on_field_change(name, value))
        if moves and state is SessionState.PAUSED and reply.effect is SideEffect.SIGNAL:
            pending.append(reply)  # the episode moved: the paused execution (of the old one) ends first
            self._playback.halt = f"the episode was moved ({name} changed)"
            raise Later
        return self._deliver(reply)

    def _act(self, name: str) -> Delivered:
        panel = self._panel()
        action = panel.action(name)
        if action is not None:
            enabled = ENABLED.get(action.enabled_when)
            state = self._control_state()
            if enabled is not None and state not in enabled:
                raise SessionConflict(
                    f"action {name!r} of panel {panel.name!r} is enabled when {action.enabled_when}; the session "
                    f"is {state.value}"
                )
        return self._deliver(self._reply(panel.on_action(name)))

    def _deliver(self, reply: PanelReply) -> Delivered:
        """Carry out a hook's intent (`carry_out`, with the session as its target): a signal reaches the runner
        (`forwarded`; a failure is `signal_error`, the hook's own change stands), a run intent drives the execution
        (`carried_out`)."""
        return Delivery(forward=self._forward, press=self._carry_out).of(reply)

    def _carry_out(self, effect: SideEffect) -> None:
        start = self._playback.press(effect, self.state)
        if start is Start.BEGIN:
            self._begin()
        elif start is Start.RESUME:
            self._set_state(SessionState.RUNNING)

    def _forward(self, signal: str) -> None:
        """Deliver a panel's signal intent to the runner, traced under the episode the panel places now."""
        runner = self._parts.runner
        assert runner is not None
        if self.state is SessionState.IDLE:
            self.bus.place(self._placed().episode_id)
        try:
            runner.signal(Signal(signal))
        except SignalFailed as exc:
            raise HyloError(f"the {signal} signal failed: {exc.reason}") from exc
        except ValueError:
            raise HyloError(f"{signal!r} is not a signal; signals: {[s.value for s in Signal]}") from None
        finally:
            self._snapshot()
        self.feed.note("session.signal", signal=signal)

    def _placed(self) -> TaskInstance:
        task_instance = getattr(self._panel(), "task_instance", None)
        if not callable(task_instance):
            raise HyloError(f"panel {self._panel().name!r} cannot say which episode it places")
        task = task_instance()
        if not isinstance(task, TaskInstance):
            raise HyloError(f"panel {self._panel().name!r} placed {task!r}, not a TaskInstance")
        return task

    def _begin(self) -> None:
        """Queue a new execution of the placed episode (it runs once the current command is done)."""
        self._playback.halt = None
        self._paused_s = 0.0
        self._set_state(SessionState.RUNNING)
        self._inbox.put(Command(self._execute, concurrent.futures.Future()))

    def _execute(self) -> None:
        runner = self._parts.runner
        assert runner is not None
        try:
            task = self._placed()
            loaded = self._state(self._panel().on_load())
            graph_budget = self.setup.plan.graph.step_budget
            if self._remote_panel and graph_budget is not None:
                loaded = replace(loaded, step_budget=None)  # a subprocess' panel knows the benchmark's, not the graph's
            runner.max_steps = resolve_step_budget(
                self.setup.step_budget, loaded, graph_budget or self.setup.benchmark.default_step_budget(task.task)
            )
        except BaseException as exc:
            self.error = f"could not start an execution: {type(exc).__name__}: {exc}"
            self.feed.note("session.error", message=self.error)
            self._set_state(SessionState.IDLE)
            return
        self.episode_id = task.episode_id
        self.executions += 1
        self.error = None
        started = time.perf_counter()
        try:
            outcome = runner.run(task)
        except Exception as exc:  # a defect of the runner itself: the session lives on
            log.exception("session %s: the execution of %s failed", self.id, task.episode_id)
            self.error = f"the execution of {task.episode_id} failed: {type(exc).__name__}: {exc}"
            self.feed.note("session.error", message=self.error)
            self._playback.rearm()
            self._set_state(SessionState.IDLE)
            return
        wall = time.perf_counter() - started - self._paused_s  # the time it ran
        self._after(task, outcome, wall)

    def _after(self, task: TaskInstance, outcome: EpisodeOutcome, wall: float) -> None:
        runner = self._parts.runner
        assert runner is not None
        env = self._parts.env
        if env is not None and env.render_images and self.setup.render:
            try:
                self.frames.offer(env.observe(), outcome.steps)  # the terminal frame (a pure read)
            except Exception as exc:
                log.debug("session %s: no terminal frame: %r", self.id, exc)
        self.last_outcome = outcome
        self.last_execution = {
            "episode_id": task.episode_id,
            "steps": outcome.steps,
            "wall_s": round(wall, 6),
            "steps_per_s": round(outcome.steps / wall, 3) if wall > 0 else None,
        }
        self._snapshot()
        self._playback.rearm()
        self.feed.note("session.outcome", episode_id=task.episode_id, **outcome.to_json())
        self._set_state(SessionState.IDLE)

    # -- views (any thread) -------------------------------------------------------------------------------------

    def brief(self) -> dict[str, Any]:
        """The state a live stream sends with each message."""
        frame = self.frames.latest
        return {
            "id": self.id,
            "state": self.state.value,
            "step": self.step,
            "episode_id": self.episode_id,
            "executions": self.executions,
            "last_outcome": self.last_outcome.to_json() if self.last_outcome is not None else None,
            "frame": None
            if frame is None
            else {"number": frame.number, "step": frame.step, "camera": frame.camera, "url": self.frame_url(frame)},
        }

    def describe(self) -> dict[str, Any]:
        """What `GET /api/sessions/{id}` answers: the brief state, what the session runs and its details."""
        runner = self._parts.runner
        containers = self.containers
        if runner is not None and self.state is SessionState.RUNNING and runner.checkpoints:
            with contextlib.suppress(IndexError):  # cleared by a new execution meanwhile
                containers = jsonable(runner.checkpoints[-1][1])
        setup = self.setup
        return {
            **self.brief(),
            "benchmark": setup.benchmark.name,
            "graph": setup.plan.graph.name,
            "agent": setup.agent,
            "panel": self.panel.name if self.panel is not None else None,
            "last_execution": self.last_execution,
            "containers": containers,
            "events": self.feed.position,
            "error": self.error,
            "created_at": self.created_at,
        }

    def frame_url(self, frame: Any) -> str:
        return f"/api/sessions/{self.id}/frame?n={frame.number}"
