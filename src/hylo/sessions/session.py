"""An interactive session (000 §4): a placement and an env that live across several executions of one graph.

A session owns one thread, which builds its env and runner, runs every execution and makes every panel call, so the
simulator (a MuJoCo GL context, a server-mode subprocess' connection) is only ever touched from that thread. Other
threads (the HTTP server) hand it commands and get futures back. While an execution runs, commands are taken
between two iterations (the runner's `gate`), so a panel read or a Pause waits at most one env step; while it is
paused, the gate blocks on the commands.

Play / Pause / Step / Stop are the panel's intents, carried out here:

- `run_start`: idle → a new execution of the placed episode; paused → resume.
- `run_pause`: the running execution stops before its next iteration and waits.
- `run_step`: one iteration (one env step), then paused; from idle, a new execution that pauses after its first step.
- `run_stop`: the execution ends before its next iteration, `infra_invalid` ("stopped"): not a success, not a failure.

Placement is sticky: Play again without touching the panel replays the same episode (the graph's `reset` re-arms the
episode the last execution finished). A field change that moves the episode is refused while an execution runs
(`SessionConflict`, HTTP 409); while paused, the paused execution ends first; then the panel's `episode_reset` reaches
the runner (episode-lifetime containers cleared, run-lifetime ones kept).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, SignalFailed
from hylo.core.jsonable import jsonable
from hylo.core.shield import SafetyShield
from hylo.core.signals import Signal
from hylo.core.status import EpisodeOutcome
from hylo.core.types import TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.graph.compile import Plan
from hylo.graph.executor import ExecutionStopped, GraphRunner
from hylo.panels.base import BaseEnvPanel
from hylo.panels.budget import resolve_step_budget
from hylo.sessions.feed import FrameSlot, LiveFeed

log = logging.getLogger(__name__)

T = TypeVar("T")

BUILD_TIMEOUT_S = 600.0
"""How long a session may take to build its env, agents and server-mode subprocesses."""

CLOSE_TIMEOUT_S = 30.0
"""How long closing a session waits for its thread (an env or agent call in progress) before leaving it."""


class SessionState(enum.StrEnum):
    STARTING = "starting"
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"


class SessionConflict(HyloError):
    """The request does not fit the session's state (a field change that moves the episode while an execution runs,
    Pause while idle); HTTP 409. The message says what the state is and what would work."""


class SessionGone(HyloError):
    """The session is closed (or failed to start); its message says why."""


_ENABLED: dict[str, frozenset[SessionState]] = {
    "idle": frozenset({SessionState.IDLE}),
    "running": frozenset({SessionState.RUNNING}),
    "paused": frozenset({SessionState.PAUSED}),
    "not_running": frozenset({SessionState.IDLE, SessionState.PAUSED}),
    "active": frozenset({SessionState.RUNNING, SessionState.PAUSED}),
}


class _Mode(enum.Enum):
    RUN = "run"
    STEP = "step"
    PAUSE = "pause"


class _Later(HyloError):
    """A command that can only run once the current execution has ended: it is queued again."""


@dataclass
class _Command:
    fn: Callable[[], Any]
    future: concurrent.futures.Future[Any]


_CLOSE = object()


@dataclass(frozen=True)
class SessionSetup:
    """What a session runs: a compiled graph on a benchmark, with the knobs of a run."""

    plan: Plan
    benchmark: Benchmark
    agent: str | None = None
    step_budget: int | None = None
    shield: bool = True
    render: bool = True
    act_timeout_s: float | None = None


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
        self._inbox: queue.Queue[_Command | object] = queue.Queue()
        self._mode = _Mode.RUN
        self._permits = 0
        self._halt: str | None = None  # why the execution must end at its next gate
        self._closing = False
        self._closing_lock = threading.Lock()
        self._on_closed = on_closed
        self._paused_s = 0.0  # time the current execution spent paused
        self._runner: GraphRunner | None = None
        self._env: Environment | None = None
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
            self._inbox.put(_CLOSE)
        self._halt = self._halt or "the session was closed"
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
        runner = self._runner
        return runner.steps_taken if runner is not None else 0

    # -- commands (any thread) ------------------------------------------------------------------------------------

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn` in the session's thread: at once when idle or paused, between two iterations while running."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._closing_lock:  # nothing is queued behind the close, where no one would take it
            if not self._closing and not self.closed:
                self._inbox.put(_Command(fn, future))
                return future
        future.set_exception(SessionGone(f"session {self.id} is {self.state.value}"))
        return future

    def load(self) -> concurrent.futures.Future[dict[str, Any]]:
        """The panel's `on_load`."""
        return self.submit(lambda: self._hook(self._panel().on_load()))

    def options(self, name: str) -> concurrent.futures.Future[dict[str, Any]]:
        """The panel's `on_options(name)`."""
        return self.submit(lambda: self._hook(self._panel().on_options(name)))

    def change_field(self, name: str, value: Any) -> concurrent.futures.Future[dict[str, Any]]:
        """The panel's `on_field_change`, its `signal` intent forwarded to the runner. Refused while an execution
        runs if the field moves the episode; a paused execution is ended first."""
        pending: dict[str, Any] = {}
        return self.submit(lambda: self._change_field(name, value, pending))

    def act(self, name: str) -> concurrent.futures.Future[dict[str, Any]]:
        """The panel's `on_action`, its intent carried out (Play, Pause, Step, Stop, a signal). Refused when the
        action is not enabled in the session's state."""
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
                if item is _CLOSE:
                    break
                assert isinstance(item, _Command)
                self._run_command(item)
        finally:
            self._teardown()
            self.state = SessionState.CLOSED
            self.feed.note("session.state", state=self.state.value)
            self._fail_pending()
            self._closed()

    def _closed(self) -> None:
        if self._on_closed is not None:
            try:
                self._on_closed(self)
            except Exception as exc:
                log.warning("session %s: its on_closed callback failed: %r", self.id, exc)

    def _build(self) -> None:
        from hylo.graph.agent_nodes import build_agents, close_agents, graph_needs_images
        from hylo.graph.assemble import assemble_runner, env_in_server_mode

        setup = self.setup
        benchmark = setup.benchmark
        agents = build_agents(setup.plan, benchmark, allow_import=False)
        apart = env_in_server_mode(setup.plan, benchmark)
        render = not apart and (setup.render or graph_needs_images(setup.plan, agents))
        try:
            env = benchmark.make_env(render_images=render)
        except BaseException:
            close_agents(agents)
            raise
        self._env = env
        shield = SafetyShield() if setup.shield else SafetyShield.permissive()
        runner = assemble_runner(
            setup.plan,
            benchmark,
            env,
            worker=f"s{self.number}",
            shield=shield,
            bus=self.bus,
            max_steps=setup.step_budget or setup.plan.graph.step_budget or 1,  # set anew by each execution
            act_timeout_s=setup.act_timeout_s,
            agents=agents,
            allow_import=False,
            render_images=setup.render,
        )
        self._runner = runner
        runner.gate = self._gate
        runner.observer = self._observe
        if self.panel is None:
            panel = runner.remote.env_panel(benchmark.name) if runner.remote is not None else None
            if panel is None:
                raise HyloError(f"the {benchmark.name} env nodeset of this session's graph has no panel")
            self.panel = panel
        self.containers = jsonable(runner.containers.snapshot())

    def _teardown(self) -> None:
        runner, env, aloop = self._runner, self._env, self._aloop
        try:
            if runner is not None:
                runner.close()
        except Exception as exc:
            log.warning("session %s: its runner failed to close: %r", self.id, exc)
        try:
            if env is not None:
                env.close()
        except Exception as exc:
            log.warning("session %s: its env failed to close: %r", self.id, exc)
        if aloop is not None:
            aloop.close()

    def _queued(self) -> Iterator[_Command | object]:
        """What is in the inbox now, without waiting."""
        while True:
            try:
                yield self._inbox.get_nowait()
            except queue.Empty:
                return

    def _fail_pending(self) -> None:
        for item in self._queued():
            if not isinstance(item, _Command):
                continue
            future = item.future
            if future.running() or future.set_running_or_notify_cancel():  # running: a command put back (_Later)
                future.set_exception(SessionGone(f"session {self.id} is closed"))

    def _run_command(self, command: _Command) -> None:
        if not command.future.running() and not command.future.set_running_or_notify_cancel():
            return  # its requester gave up before it ran
        try:
            result = command.fn()
        except _Later:
            self._inbox.put(command)
            return
        except BaseException as exc:
            command.future.set_exception(exc)
            return
        command.future.set_result(result)

    def _drain(self) -> None:
        for item in self._queued():
            if item is _CLOSE:
                self._inbox.put(_CLOSE)  # for the main loop, once this execution has ended
                self._halt = self._halt or "the session was closed"
                return
            assert isinstance(item, _Command)
            self._run_command(item)
            if self._halt is not None:
                return

    def _gate(self, i: int) -> None:
        """Called by the runner before iteration `i`: take the commands, then go on, pause or stop."""
        self._drain()
        while True:
            if self._closing:
                self._halt = self._halt or "the session was closed"
            if self._halt is not None:
                raise ExecutionStopped(f"stopped: {self._halt} after {self.step} steps")
            if self._mode is _Mode.RUN:
                self._set_state(SessionState.RUNNING)
                return
            if self._mode is _Mode.STEP and self._permits > 0:
                self._permits -= 1
                self._set_state(SessionState.RUNNING)
                return
            if self.state is not SessionState.PAUSED:
                self._set_state(SessionState.PAUSED)
                self._snapshot()
            waited = time.perf_counter()
            item = self._inbox.get()
            self._paused_s += time.perf_counter() - waited
            if item is _CLOSE:
                self._inbox.put(_CLOSE)
                self._halt = self._halt or "the session was closed"
                continue
            assert isinstance(item, _Command)
            self._run_command(item)

    def _set_state(self, state: SessionState) -> None:
        if self.state is not state:
            self.state = state
            self.feed.note("session.state", state=state.value, step=self.step, episode_id=self.episode_id)

    def _snapshot(self) -> None:
        """Keep the containers' values for readers (the session's thread only: the runner is between two steps)."""
        if self._runner is not None:
            self.containers = jsonable(self._runner.containers.snapshot())

    def _observe(self, obs: Any) -> None:
        try:
            self.frames.offer(obs, self.step)
        except Exception as exc:  # a view of the execution, never its end
            log.debug("session %s: no frame from %r: %r", self.id, type(obs).__name__, exc)

    def _control_state(self) -> SessionState:
        """The state the panel's actions see: a Step in progress counts as paused (Play resumes it, Step adds one)."""
        if self.state is SessionState.RUNNING and self._mode is _Mode.STEP:
            return SessionState.PAUSED
        return self.state

    def _hook(self, call: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
        assert self._aloop is not None
        result = self._aloop.run_until_complete(call)
        if not isinstance(result, dict):
            raise HyloError(f"panel {self._panel().name!r} answered {result!r}, not a dict")
        return result

    def _panel(self) -> BaseEnvPanel:
        if self.panel is None:
            raise SessionGone(f"session {self.id} has no panel")
        return self.panel

    # -- panel intents (the session's thread) -------------------------------------------------------------------

    def _change_field(self, name: str, value: Any, pending: dict[str, Any]) -> dict[str, Any]:
        panel = self._panel()
        if "result" in pending:  # the paused execution has ended: the move's signal reaches the runner now
            return self._deliver(pending["result"])
        spec = panel.field(name)
        moves = spec is not None and spec.moves_episode
        state = self._control_state()
        if moves and state is SessionState.RUNNING:
            raise SessionConflict(
                f"field {name!r} of panel {panel.name!r} would move the episode while an execution is running "
                f"(step {self.step} of {self.episode_id}); Pause or Stop it first"
            )
        result = self._hook(panel.on_field_change(name, value))
        if moves and state is SessionState.PAUSED and result.get("ok", True) and result.get("side_effect") == "signal":
            pending["result"] = result  # the episode moved: the paused execution (of the old one) ends first
            self._halt = f"the episode was moved ({name} changed)"
            raise _Later
        return self._deliver(result)

    def _act(self, name: str) -> dict[str, Any]:
        panel = self._panel()
        action = panel.action(name)
        if action is not None:
            enabled = _ENABLED.get(action.enabled_when)
            state = self._control_state()
            if enabled is not None and state not in enabled:
                raise SessionConflict(
                    f"action {name!r} of panel {panel.name!r} is enabled when {action.enabled_when}; the session "
                    f"is {state.value}"
                )
        return self._deliver(self._hook(panel.on_action(name)))

    def _deliver(self, result: dict[str, Any]) -> dict[str, Any]:
        """Carry out a hook's intent: a signal reaches the runner (`forwarded`; a failure is `signal_error`, the
        hook's own change stands), a run intent drives the execution."""
        if not result.get("ok", True):
            return result
        side_effect = str(result.get("side_effect") or "none")
        if side_effect == "signal":
            result["forwarded"] = False
            try:
                self._forward(str(result["signal_name"]))
            except HyloError as exc:
                result["signal_error"] = str(exc)
            else:
                result["forwarded"] = True
        else:
            result.update(self._carry_out(side_effect))
        return result

    def _carry_out(self, side_effect: str) -> dict[str, Any]:
        state, control = self.state, self._control_state()
        if side_effect == "run_start":
            if control is SessionState.IDLE:
                self._mode = _Mode.RUN
                self._begin()
            elif control is SessionState.PAUSED:
                self._mode = _Mode.RUN
                self._set_state(SessionState.RUNNING)
        elif side_effect == "run_step":
            if control is SessionState.IDLE:
                self._mode, self._permits = _Mode.STEP, 1
                self._begin()
            elif state is SessionState.PAUSED:
                self._mode, self._permits = _Mode.STEP, 1
            elif control is SessionState.PAUSED:  # a step in progress: one more after it
                self._permits += 1
        elif side_effect == "run_pause":
            if control is SessionState.RUNNING:
                self._mode, self._permits = _Mode.PAUSE, 0
        elif side_effect == "run_stop":
            if state in (SessionState.RUNNING, SessionState.PAUSED):
                self._halt = "Stop pressed"
        elif side_effect != "none":
            raise HyloError(f"unknown side_effect {side_effect!r}")
        return {"carried_out": side_effect}

    def _forward(self, signal: str) -> None:
        """Deliver a panel's signal intent to the runner, traced under the episode the panel places now."""
        runner = self._runner
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
        self._halt = None
        self._paused_s = 0.0
        self._set_state(SessionState.RUNNING)
        self._inbox.put(_Command(self._execute, concurrent.futures.Future()))

    def _execute(self) -> None:
        runner = self._runner
        assert runner is not None
        try:
            task = self._placed()
            loaded = self._hook(self._panel().on_load())
            graph_budget = self.setup.plan.graph.step_budget
            if self._remote_panel and graph_budget is not None:
                loaded.pop("step_budget", None)  # a subprocess' panel knows the benchmark's default, not the graph's
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
            self._halt = None
            self._mode, self._permits = _Mode.RUN, 0
            self._set_state(SessionState.IDLE)
            return
        wall = time.perf_counter() - started - self._paused_s  # the time it ran
        self._after(task, outcome, wall)

    def _after(self, task: TaskInstance, outcome: EpisodeOutcome, wall: float) -> None:
        runner = self._runner
        assert runner is not None
        env = self._env
        if env is not None and getattr(env, "render_images", False) and self.setup.render:
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
        self._halt = None
        self._mode, self._permits = _Mode.RUN, 0
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
        runner = self._runner
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
