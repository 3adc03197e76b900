"""A worker's env manager (000 §5): the env, agent, Kernel and panel of one worker, built once and closed once.

`EpisodeWorker.initialize()` builds them; `run(job)` places one episode through the benchmark's panel, runs it on the
Kernel and returns its row and trace (episode-scoped state is fresh per episode: the Kernel resets the agent and the
panel places the episode anew); `shutdown()` closes them. The same class runs inline, in a worker process and in a
Ray actor, so an episode's result does not depend on where it ran.

A graph run whose env nodeset is in server mode places its episodes through the panel living in this worker's
replica of that nodeset (`env_<benchmark>#<k>`, a `RemoteEnvPanelProxy`), not a local one; each row then names it in
the metric `env_panel`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hylo.core.agent import AgentRequirements
from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, SignalFailed
from hylo.core.kernel import Kernel
from hylo.core.shield import SafetyShield
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, EnvCapabilities, EnvSpec, Observation, StepResult, TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.eval.placement import PanelDriver, PlacingPanel
from hylo.eval.recording import FrameTap, TraceBuffer, serialize
from hylo.eval.spec import EvalSpec
from hylo.eval.store import EpisodeRow
from hylo.eval.video import video_name
from hylo.graph.agent_nodes import close_agents
from hylo.graph.compile import Plan
from hylo.graph.executor import NodesetCrashed
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.remote import RemotePanelError

if TYPE_CHECKING:
    from hylo.graph.executor import RemoteNodesets

logger = logging.getLogger(__name__)


class WorkerFailed(HyloError):
    """A worker could not start (bad agent arguments, a benchmark it cannot build); the message says why."""


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to build its env manager: the resolved spec (split, tasks and run id fixed), the per-task
    step budgets and where the run keeps its files."""

    spec: EvalSpec
    run_id: str
    run_dir: Path
    budgets: dict[str, int]


@dataclass(frozen=True)
class EpisodeJob:
    """One attempt of one planned episode."""

    task: TaskInstance
    attempt: int = 1


@dataclass(frozen=True)
class EpisodeResult:
    """A finished attempt: its EvalLog row and its trace, as event field dicts or (from another process, where
    they were serialized already) as JSON lines."""

    row: EpisodeRow
    trace: list[dict[str, Any]] | list[bytes]

    def serialized(self) -> EpisodeResult:
        """The same result with its trace as JSON lines (cheaper to send to another process)."""
        if self.trace and isinstance(self.trace[0], dict):
            return EpisodeResult(self.row, serialize(self.trace))
        return self


class BusyClock(Protocol):
    """When the env's current call began (monotonic seconds), 0.0 while no env call runs. A worker process shares
    it with its pool, which reads it to tell a hung env from a hung agent."""

    value: float


@dataclass
class LocalClock:
    value: float = 0.0


class BusyEnv(Environment):
    """Wraps an env to stamp `clock` while one of its calls runs."""

    def __init__(self, env: Environment, clock: BusyClock) -> None:
        self.env = env
        self.clock = clock

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    @property
    def capabilities(self) -> EnvCapabilities:
        return self.env.capabilities

    @property
    def render_images(self) -> bool:
        return bool(getattr(self.env, "render_images", False))

    @render_images.setter
    def render_images(self, on: bool) -> None:
        if hasattr(self.env, "render_images"):
            self.env.render_images = on

    def reset(self, task: TaskInstance) -> Observation:
        self.clock.value = time.monotonic()
        try:
            return self.env.reset(task)
        finally:
            self.clock.value = 0.0

    def step(self, action: Action) -> StepResult:
        self.clock.value = time.monotonic()
        try:
            return self.env.step(action)
        finally:
            self.clock.value = 0.0

    def observe(self) -> Observation:
        self.clock.value = time.monotonic()
        try:
            return self.env.observe()
        finally:
            self.clock.value = 0.0

    def hold_action(self) -> Action:
        return self.env.hold_action()

    def privileged_state(self, name: str) -> Any:
        return self.env.privileged_state(name)

    def close(self) -> None:
        self.clock.value = time.monotonic()
        try:
            self.env.close()
        finally:
            self.clock.value = 0.0


THREADS_ENV = "HYLO_WORKER_THREADS"
"""The environment variable that sets how many BLAS / OpenMP threads each worker process uses (default 1)."""


def limit_threads() -> None:
    """Keep a worker's BLAS and OpenMP pools to `HYLO_WORKER_THREADS` threads (default 1): N workers on N cores, each
    with a pool as wide as the machine, would fight over the cores. Call it after the simulator's libraries load."""
    from threadpoolctl import threadpool_limits

    text = os.environ.get(THREADS_ENV, "1")
    try:
        threads = int(text)
    except ValueError:
        raise WorkerFailed(f"{THREADS_ENV} must be a positive integer, got {text!r}") from None
    if threads < 1:
        raise WorkerFailed(f"{THREADS_ENV} must be a positive integer, got {text!r}")
    threadpool_limits(limits=threads)


def needs_images(agent: object) -> bool:
    requirements = getattr(agent, "requirements", None)
    return isinstance(requirements, AgentRequirements) and requirements.needs_images


class Executes(Protocol):
    """What runs one placed episode: the Kernel, or a graph's runner."""

    max_steps: int
    bus: EventBus

    def run(self, task: TaskInstance) -> EpisodeOutcome: ...

    def signal(self, signal: Any) -> None: ...

    def close(self) -> None: ...


class EpisodeWorker:
    """One worker's env manager. `agent` may be given (inline, where the runner built it already)."""

    def __init__(
        self, config: WorkerConfig, *, name: str = "main", clock: BusyClock | None = None, agent: object = None
    ) -> None:
        self.config = config
        self.name = name
        self.clock: BusyClock = clock if clock is not None else LocalClock()
        self.agent = agent
        self._env: Environment | None = None
        self._tap: FrameTap | None = None
        self._kernel: Executes | None = None
        self._trace = TraceBuffer()
        self._driver: PanelDriver | None = None
        self._served: RemoteNodesets | None = None  # a graph run's server-mode nodesets
        self._remote_panel = False

    @property
    def panel_name(self) -> str | None:
        """The name of the panel this worker places its episodes through (`env_babyai`; `env_babyai#1` for the
        proxy of the panel in its replica of a server-mode env nodeset); None before `initialize()`."""
        return self._driver.panel.name if self._driver is not None else None

    def initialize(self) -> None:
        """Build the agent (unless given), the env, the Kernel (or a graph's runner) and the panel; raise
        `WorkerFailed` naming the cause when they cannot be built."""
        from hylo.agents.registry import make_agent
        from hylo.eval.runner import make_timing, resolve

        config, spec = self.config, self.config.spec
        resolved = resolve(spec)
        built: dict[str, Any] = {}  # a graph's agents, built once, until its nodes take them
        if resolved.plan is None:
            if self.agent is None:
                self.agent = make_agent(spec.agent, spec.agent_args, resolved.benchmark)
            images = needs_images(self.agent)
        else:
            from hylo.graph.agent_nodes import build_agents, graph_needs_images

            built = build_agents(resolved.plan, resolved.benchmark)
            images = graph_needs_images(resolved.plan, built)
        first = resolved.tasks[0]
        try:
            env: Environment = BusyEnv(resolved.benchmark.make_env(render_images=images), self.clock)
        except BaseException:
            close_agents(built)
            raise
        try:
            tap = FrameTap(env, agent_needs_images=images) if spec.video else None
            bus = EventBus(run_id=config.run_id)
            bus.subscribe(self._trace, critical=True)
            shield = SafetyShield() if spec.shield else SafetyShield.permissive()
            kernel: Executes
            if resolved.plan is not None:
                kernel = self._graph_runner(resolved.plan, resolved.benchmark, tap or env, shield, bus, first, built)
            else:
                kernel = Kernel(
                    tap or env,
                    self.agent,
                    shield=shield,
                    timing=make_timing(spec),
                    act_timeout_s=spec.act_timeout,
                    max_steps=config.budgets[first],
                    bus=bus,
                    auto_episode_reset=False,
                )
        except BaseException:
            env.close()
            raise
        self._env, self._tap, self._kernel = env, tap, kernel
        try:
            served = self._served.env_panel(resolved.benchmark.name) if self._served is not None else None
            panel: PlacingPanel = served or BenchmarkPanel(resolved.benchmark, split=resolved.split, task=first)
            self._driver = PanelDriver(panel, kernel)
            self._remote_panel = served is not None
            if served is not None:  # where a local panel starts: the first placement signals what it signals locally
                self._driver.preset(split=resolved.split, task=first)
        except HyloError as exc:
            self.shutdown()
            raise WorkerFailed(f"worker {self.name} cannot place episodes through its env panel: {exc}") from exc

    def _graph_runner(
        self,
        plan: Plan,
        benchmark: Benchmark,
        env: Environment,
        shield: SafetyShield,
        bus: EventBus,
        first: str,
        agents: dict[str, Any],
    ) -> Executes:
        """The runner of a graph run: its env nodes use this worker's env; its server-mode nodesets get one
        subprocess each, tagged with this worker's index."""
        from hylo.graph.assemble import assemble_runner

        def render() -> None:
            if isinstance(env, FrameTap):
                env.agent_needs_images = True
            base = env.env if isinstance(env, FrameTap) else env
            if hasattr(base, "render_images"):
                base.render_images = True

        runner = assemble_runner(
            plan,
            benchmark,
            env,
            worker=self.name,
            shield=shield,
            bus=bus,
            max_steps=self.config.budgets[first],
            act_timeout_s=self.config.spec.act_timeout,
            agents=agents,
            on_images=render,
        )
        self._served = runner.remote  # closed with the runner
        return runner

    def shutdown(self) -> None:
        """Close the panel, the Kernel, the agent (a remote policy's connection, say) and the env, once."""
        driver, kernel, env, tap = self._driver, self._kernel, self._env, self._tap
        self._driver = self._kernel = self._env = self._tap = None
        self._served = None  # closed with the runner
        try:
            if driver is not None:
                driver.close()
            if kernel is not None:
                kernel.close()
            close_agent = getattr(self.agent, "close", None)
            if kernel is not None and callable(close_agent):
                close_agent()
        finally:
            if tap is not None or env is not None:
                (tap or env).close()  # type: ignore[union-attr]

    def run(self, job: EpisodeJob) -> EpisodeResult:
        """Place and run one episode; its failures become its status, never an exception."""
        kernel, driver, env, tap = self._kernel, self._driver, self._env, self._tap
        if kernel is None or driver is None or env is None:
            raise HyloError("EpisodeWorker.run() before initialize()")
        planned, spec = job.task, self.config.spec
        video_dir = self.config.run_dir / "videos"
        started = time.time()
        try:
            task = driver.place(planned.split, planned.task, planned.index, planned.base_seed)
        except SignalFailed as exc:  # the placement's episode_reset failed: that episode's error (or infra_invalid)
            status = EpisodeStatus(exc.status)
            task, outcome = planned, EpisodeOutcome(status, False, 0, exc.reason, detail=exc.detail)
        except RemotePanelError as exc:
            if not isinstance(exc.__cause__, NodesetCrashed):
                raise  # the panel itself failed: a defect, as with a local panel
            # the env nodeset's subprocess died during the placement (or could not be restarted): the env's fault
            task, outcome = planned, EpisodeOutcome(EpisodeStatus.INFRA_INVALID, False, 0, str(exc))
        else:
            if task.episode_id != planned.episode_id:
                raise HyloError(f"panel placed {task.episode_id}, the runner planned {planned.episode_id}")
            kernel.max_steps = self.config.budgets[task.task]
            if tap is not None and task.index < spec.video:
                video_dir.mkdir(parents=True, exist_ok=True)
                tap.start(video_dir / f".{video_name(task.episode_id, 'recording')}", env.spec.control_rate_hz)
            outcome = kernel.run(task)
        ended = time.time()
        metrics: dict[str, Any] = {**outcome.metrics, "wall_s": round(ended - started, 6)}
        if self._remote_panel:
            metrics["env_panel"] = driver.panel.name
        video = self._finish_video(task, outcome, video_dir, metrics) if tap is not None else None
        row = EpisodeRow.of(
            task,
            outcome,
            started_at=started,
            ended_at=ended,
            metrics=metrics,
            attempt=job.attempt,
            worker=self.name,
            video=video,
        )
        return EpisodeResult(row, self._trace.take())

    def _finish_video(
        self, task: TaskInstance, outcome: EpisodeOutcome, video_dir: Path, metrics: dict[str, Any]
    ) -> str | None:
        tap = self._tap
        if tap is None or tap.writer is None:
            return None
        try:
            written = tap.stop()
            if written is None:
                return None
            final = video_dir / video_name(task.episode_id, outcome.status.value)
            written.replace(final)
            return str(final.relative_to(self.config.run_dir))
        except Exception as exc:  # a video is a view of the episode, not its result
            logger.warning("could not write the video of %s: %r", task.episode_id, exc)
            metrics["video_error"] = f"{type(exc).__name__}: {exc}"
            return None


def lost_episode(
    job: EpisodeJob, *, worker: str, status: EpisodeStatus, reason: str, detail: str | None, started: float
) -> EpisodeResult:
    """The row of an attempt whose worker died or was stopped: no steps, no trace, the reason says what happened."""
    ended = time.time()
    outcome = EpisodeOutcome(status, False, 0, reason, detail=detail)
    metrics = {"wall_s": round(ended - started, 6)}
    row = EpisodeRow.of(job.task, outcome, started_at=started, ended_at=ended, metrics=metrics, attempt=job.attempt,
                        worker=worker)  # fmt: skip
    return EpisodeResult(row, [])
