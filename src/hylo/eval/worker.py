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

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from threadpoolctl import threadpool_limits

from hylo.agents.registry import make_agent
from hylo.core.agent import agent_name, gets_images, requires_images
from hylo.core.bus import EventBus
from hylo.core.environment import Environment, EnvWrapper
from hylo.core.errors import HyloError, OverLimit, SignalFailed
from hylo.core.kernel import Kernel
from hylo.core.shield import SafetyShield
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, Observation, StepResult, TaskInstance
from hylo.cpus import usable_cpus
from hylo.envs.benchmark import Benchmark
from hylo.envs.headless import without_cuda_devices
from hylo.eval.batching.proxy import HostedAgent, HostEndpoint
from hylo.eval.limits import OBSERVE, RESET, STEP, EpisodeLimits, Meter, Verdict, task_limits
from hylo.eval.resolve import make_timing, resolve
from hylo.eval.spec import EvalSpec
from hylo.evallog.recording import FrameTap, TraceBuffer, TraceEntry, serialize
from hylo.evallog.rollouts import RolloutTap, rollout_path
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.video import video_name
from hylo.graph.agent_nodes import build_agents, close_agents, graph_needs_images
from hylo.graph.assemble import assemble_runner
from hylo.graph.compile import Plan
from hylo.graph.executor import NodesetCrashed
from hylo.graph.node import Role
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.placement import PanelDriver, PlacingPanel
from hylo.panels.remote import RemotePanelError

if TYPE_CHECKING:
    from hylo.graph.executor import RemoteNodesets

T = TypeVar("T")

logger = logging.getLogger(__name__)


class WorkerFailed(HyloError):
    """A worker could not start (bad agent arguments, a benchmark it cannot build); the message says why."""


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to build its env manager: the resolved spec (split, tasks and run id fixed), the per-task
    step budgets, where the run keeps its files, whether its episode ids keep the long form (a run logged before
    its benchmark had a short one), and the policy host it sends its agent's calls to (`--batch`)."""

    spec: EvalSpec
    run_id: str
    run_dir: Path
    budgets: dict[str, int]
    long_episode_ids: bool = False
    policy_host: HostEndpoint | None = None  # `--batch`: the agent is the host's, this worker holds a proxy of it


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
    trace: list[TraceEntry] | list[bytes]

    def serialized(self) -> EpisodeResult:
        """The same result with its trace as JSON lines (cheaper to send to another process)."""
        if self.trace and not isinstance(self.trace[0], bytes):
            return EpisodeResult(self.row, serialize(self.trace))
        return self


class MeteredEnv(EnvWrapper):
    """Wraps a worker's env so that its `meter` sees every call that counts as the env's time (reset, step,
    observe) and can end the episode when one ran past its limit."""

    def __init__(self, env: Environment, meter: Meter) -> None:
        super().__init__(env)
        self.meter = meter

    def reset(self, task: TaskInstance) -> Observation:
        return self._metered(RESET, self.env.reset, task)

    def step(self, action: Action) -> StepResult:
        return self._metered(STEP, self.env.step, action)

    def observe(self) -> Observation:
        return self._metered(OBSERVE, self.env.observe)

    def _metered(self, kind: float, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` as an env call of `kind`: past its limit it is the env's timeout, whatever it raised."""
        meter = self.meter
        if not meter.enter(kind):
            return call(*args)
        try:
            return call(*args)
        finally:
            meter.leave(kind)

    def hold_action(self) -> Action:
        return self.env.hold_action()

    def privileged_state(self, name: str) -> Any:
        return self.env.privileged_state(name)

    def close(self) -> None:
        self.env.close()


class RemoteEnvCalls:
    """The calls of a server-mode env nodeset's subprocess, metered as the env's: its node's role says which call."""

    KINDS: ClassVar[dict[Role, float]] = {Role.RESET: RESET, Role.ACTUATOR: STEP}  # else a read (the step's limit)

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def begin(self, role: Role) -> bool:
        return self.meter.enter(self.KINDS.get(role, OBSERVE))

    def end(self, role: Role) -> None:
        self.meter.leave(self.KINDS.get(role, OBSERVE))


THREADS_ENV = "HYLO_WORKER_THREADS"
"""The environment variable that sets how many BLAS / OpenMP threads each worker process uses (default 1)."""

HOST_THREADS_ENV = "HYLO_HOST_THREADS"
"""The environment variable that sets how many BLAS / OpenMP threads a policy host uses (default: every CPU)."""


def limit_threads() -> None:
    """Keep a worker's BLAS and OpenMP pools to `HYLO_WORKER_THREADS` threads (default 1): N workers on N cores, each
    with a pool as wide as the machine, would fight over the cores. Call it after the simulator's libraries load."""
    set_threads(_threads(THREADS_ENV, 1))


def host_threads(default: int | None = None) -> int:
    """The BLAS and OpenMP threads a policy host gets: `HYLO_HOST_THREADS`, else `default` (None: every CPU this
    process may use). The workers whose requests are in a batch wait for its call, so their cores are the call's to
    use, as a GPU would be."""
    return _threads(HOST_THREADS_ENV, usable_cpus() if default is None else default)


def set_threads(count: int) -> None:
    """Give this process's BLAS and OpenMP pools `count` threads (after the libraries they belong to are loaded)."""
    threadpool_limits(limits=count)


def serve_as_batched_worker() -> None:
    """Make this process an env worker of a batched run; call it before anything in it could initialise CUDA.

    - It sees no CUDA device (its renderer keeps its EGL device): the agent, and the GPU, are the policy host's.
    - It is a batch process (Linux's SCHED_BATCH): a worker woken by its answer does not take the core from the
      process running on it. A policy host answers a batch's requests one after another; without this, the first
      worker it wakes takes the host's core before the others are answered, and the last answer of a batch waits for
      a worker's step. Nothing changes where there is no SCHED_BATCH (the worker runs as it would).
    """
    without_cuda_devices(os.environ)
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def _threads(variable: str, default: int) -> int:
    text = os.environ.get(variable, str(default))
    try:
        threads = int(text)
    except ValueError:
        raise WorkerFailed(f"{variable} must be a positive integer, got {text!r}") from None
    if threads < 1:
        raise WorkerFailed(f"{variable} must be a positive integer, got {text!r}")
    return threads


def images_given(agent: object, spec: EvalSpec) -> bool:
    """Whether the run gives `agent` camera images (`gets_images`, unless `--no-images` withholds them); an agent
    that requires them under `--no-images` is refused."""
    if not spec.no_images:
        return gets_images(agent)
    if requires_images(agent):
        raise WorkerFailed(f"agent {agent_name(agent)} needs camera images, and --no-images withholds them")
    return False


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
        self,
        config: WorkerConfig,
        *,
        name: str = "main",
        record: MutableSequence[float] | None = None,
        agent: object = None,
    ) -> None:
        self.config = config
        self.name = name
        self.meter = Meter(record)  # `record`: shared with the pool that watches this worker
        self.limits: dict[str, EpisodeLimits] = {}
        self.agent = agent
        self._env: Environment | None = None
        self._tap: FrameTap | None = None
        self._rollouts: RolloutTap | None = None
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
        config, spec = self.config, self.config.spec
        resolved = resolve(spec)
        resolved.benchmark.long_episode_ids = config.long_episode_ids
        built: dict[str, Any] = {}  # a graph's agents, built once, until its nodes take them
        if resolved.plan is None:
            if self.agent is None and config.policy_host is not None:
                self.agent = HostedAgent(config.policy_host, act_timeout_s=spec.act_timeout, meter=self.meter)
            elif self.agent is None:
                self.agent = make_agent(spec.agent, spec.agent_args, resolved.benchmark)
            images = images_given(self.agent, spec)
        else:
            built = build_agents(resolved.plan, resolved.benchmark)
            try:
                images = graph_needs_images(resolved.plan, built, withheld=spec.no_images)
            except BaseException:
                close_agents(built)
                raise
        first = resolved.tasks[0]
        self.limits = task_limits(spec, resolved.benchmark, config.budgets)
        try:  # a recorded rollout keeps the env's cameras, whether or not the agent is given them
            base: Environment = resolved.benchmark.make_env(render_images=images or spec.record_rollouts)
        except BaseException:
            close_agents(built)
            raise
        rollouts = RolloutTap(base) if spec.record_rollouts else None
        base = rollouts or base
        tap = FrameTap(base, images=images, size=spec.video_size) if spec.video or not images else None
        env: Environment = MeteredEnv(tap or base, self.meter)  # a frame's recording is part of the env's call
        try:
            bus = EventBus(run_id=config.run_id)
            bus.subscribe(self._trace, critical=True)
            shield = SafetyShield() if spec.shield else SafetyShield.permissive()
            kernel: Executes
            if resolved.plan is not None:
                kernel = self._graph_runner(resolved.plan, resolved.benchmark, env, shield, bus, first, built)
            else:
                kernel = Kernel(
                    env,
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
        self._env, self._tap, self._rollouts, self._kernel = env, tap, rollouts, kernel
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

        def render() -> None:
            inner = env.env if isinstance(env, MeteredEnv) else env
            if isinstance(inner, FrameTap):
                inner.images = True
            base = inner.env if isinstance(inner, FrameTap) else inner
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
            images_withheld=self.config.spec.no_images,
            env_calls=RemoteEnvCalls(self.meter),
        )
        self._served = runner.remote  # closed with the runner
        return runner

    def shutdown(self) -> None:
        """Close the panel, the Kernel, the agent (a remote policy's connection, say) and the env, once."""
        driver, kernel, env = self._driver, self._kernel, self._env
        self._driver = self._kernel = self._env = self._tap = self._rollouts = None
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
            if env is not None:
                env.close()  # the tap's too

    def run(self, job: EpisodeJob) -> EpisodeResult:
        """Place and run one episode; its failures become its status, never an exception."""
        kernel, driver, env, tap, rollouts = self._kernel, self._driver, self._env, self._tap, self._rollouts
        if kernel is None or driver is None or env is None:
            raise HyloError("EpisodeWorker.run() before initialize()")
        planned, spec = job.task, self.config.spec
        video_dir = self.config.run_dir / "videos"
        started = time.time()
        self.meter.begin(self.limits[planned.task])
        try:
            task = driver.place(planned.split, planned.task, planned.index, planned.base_seed)
        except SignalFailed as exc:  # the placement's episode_reset failed: that episode's error (or infra_invalid)
            status = EpisodeStatus(exc.status)
            task, outcome = planned, EpisodeOutcome(status, 0, exc.reason, detail=exc.detail)
        except RemotePanelError as exc:
            cause = exc.__cause__
            if isinstance(cause, OverLimit):  # a limit passed during the placement
                outcome = EpisodeOutcome(EpisodeStatus(cause.status), 0, cause.reason, detail=cause.detail)
            elif not isinstance(cause, NodesetCrashed):
                raise  # the panel itself failed: a defect, as with a local panel
            else:  # the env nodeset's subprocess died during the placement (or could not be restarted): the env's
                outcome = EpisodeOutcome(EpisodeStatus.INFRA_INVALID, 0, str(exc))
            task = planned
        else:
            if task.episode_id != planned.episode_id:
                raise HyloError(f"panel placed {task.episode_id}, the runner planned {planned.episode_id}")
            kernel.max_steps = self.config.budgets[task.task]
            if tap is not None and task.index < spec.video:
                video_dir.mkdir(parents=True, exist_ok=True)
                tap.start(video_dir / f".{video_name(task.episode_id, 'recording')}")
            if rollouts is not None:
                rollouts.start(rollout_path(self.config.run_dir, task.episode_id, job.attempt))
            outcome = kernel.run(task)
        outcome = _judged(outcome, self.meter.end(), spec.act_timeout)
        ended = time.time()
        metrics: dict[str, Any] = {**outcome.metrics, "wall_s": round(ended - started, 6)}
        if not env.capabilities.success_signal:  # its success rate measures nothing: the report says so
            metrics["success_signal"] = False
        if self._remote_panel:
            metrics["env_panel"] = driver.panel.name
        video = self._finish_video(task, outcome, video_dir, metrics) if tap is not None else None
        if rollouts is not None:
            self._finish_rollout(rollouts, job.attempt, outcome, metrics)
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
        trace = self._trace.take()
        self.meter.done()
        return EpisodeResult(row, trace)

    def _finish_video(
        self, task: TaskInstance, outcome: EpisodeOutcome, video_dir: Path, metrics: dict[str, Any]
    ) -> str | None:
        tap = self._tap
        if tap is None or tap.writer is None:
            return None
        try:
            if tap.error is not None:
                metrics["video_error"] = tap.error
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

    @staticmethod
    def _finish_rollout(rollouts: RolloutTap, attempt: int, outcome: EpisodeOutcome, metrics: dict[str, Any]) -> None:
        """Keep the episode's recorded rollout; why it could not be kept goes to `rollout_error`."""
        try:
            rollouts.finish(attempt, outcome.status.value)
        except Exception as exc:  # a rollout is a copy of the episode, not its result
            logger.warning("could not keep the rollout of attempt %d: %r", attempt, exc)
            rollouts.error = rollouts.error or f"{type(exc).__name__}: {exc}"
        if rollouts.error is not None:
            metrics["rollout_error"] = rollouts.error


def _judged(outcome: EpisodeOutcome, late: Verdict | None, act_timeout: float | None) -> EpisodeOutcome:
    """The outcome, overruled when the agent's stretch after the last env call crossed a limit (a pool would have
    killed it there); an act the Kernel found slower than `--act-timeout` names the flag."""
    if late is not None and (late.status, late.reason) != (outcome.status, outcome.reason):
        detail = f"{late.detail} (the episode had ended {outcome.status.value}: {outcome.reason})"
        return dataclasses.replace(outcome, status=late.status, reason=late.reason, detail=detail)
    if act_timeout is not None and outcome.reason == "timeout" and (outcome.detail or "").startswith("act "):
        return dataclasses.replace(outcome, detail=f"{outcome.detail}; --act-timeout sets it")
    return outcome


def lost_episode(
    job: EpisodeJob, *, worker: str, status: EpisodeStatus, reason: str, detail: str | None, started: float
) -> EpisodeResult:
    """The row of an attempt whose worker died or was stopped: no steps, no trace, the reason says what happened."""
    ended = time.time()
    outcome = EpisodeOutcome(status, 0, reason, detail=detail)
    metrics = {"wall_s": round(ended - started, 6)}
    row = EpisodeRow.of(job.task, outcome, started_at=started, ended_at=ended, metrics=metrics, attempt=job.attempt,
                        worker=worker)  # fmt: skip
    return EpisodeResult(row, [])
