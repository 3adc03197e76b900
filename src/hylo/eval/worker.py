"""A worker's env manager: the env, agent, Kernel and panel of one worker, built once and closed once.

`EpisodeWorker.initialize()` builds them (`hylo.eval.assembly`, as an interactive session builds its own);
`run(job)` places one episode through the benchmark's panel (`place`: the planned episode at once), runs it on the
Kernel and returns its row and trace (episode-scoped state is fresh per episode: the Kernel resets the agent and the
panel places the episode anew); `shutdown()` closes them. The same class runs inline, in a worker process and in a
Ray actor, so an episode's result does not depend on where it ran.

A graph run whose env nodeset is in server mode places its episodes through the panel living in this worker's
replica of that nodeset (`env_<benchmark>#<k>`, a `RemoteEnvPanelProxy`), not a local one; each row then names it in
the metric `env_panel`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from hylo.agents.registry import make_agent
from hylo.core.bus import EventBus
from hylo.core.environment import Environment, EnvWrapper
from hylo.core.errors import HyloError, OverLimit, SignalFailed
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.types import Action, Observation, StepResult, TaskInstance
from hylo.eval.assembly import EpisodeParts, ImagesWithheld, PanelUnavailable, Use, assemble
from hylo.eval.batching.proxy import HostedAgent, HostEndpoint
from hylo.eval.limits import OBSERVE, RESET, STEP, EpisodeLimits, Meter, Verdict, task_limits
from hylo.eval.process_setup import WorkerFailed
from hylo.eval.resolve import Resolved, make_timing, resolve
from hylo.eval.spec import EvalSpec
from hylo.evallog.recording import FrameTap, TraceBuffer, TraceEntry, serialize
from hylo.evallog.rollouts import RolloutTap, rollout_path
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.video import video_name
from hylo.graph.executor import NodesetCrashed
from hylo.graph.node import Role
from hylo.panels.placement import PanelDriver
from hylo.panels.remote import RemotePanelError

T = TypeVar("T")

logger = logging.getLogger(__name__)


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


class RemoteEnvCalls:
    """The calls of a server-mode env nodeset's subprocess, metered as the env's: its node's role says which call."""

    KINDS: ClassVar[dict[Role, float]] = {Role.RESET: RESET, Role.ACTUATOR: STEP}  # else a read (the step's limit)

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def begin(self, role: Role) -> bool:
        return self.meter.enter(self.KINDS.get(role, OBSERVE))

    def end(self, role: Role) -> None:
        self.meter.leave(self.KINDS.get(role, OBSERVE))


class _Recording:
    """The wrappers a worker puts around its env (`wrap`): a rollout recorder (`--record-rollouts`), a frame tap (a
    video, or images kept from the agent), and the meter of its limits, outermost."""

    def __init__(self, spec: EvalSpec, meter: Meter) -> None:
        self.spec = spec
        self.meter = meter
        self.rollouts: RolloutTap | None = None
        self.tap: FrameTap | None = None
        self.base: Environment | None = None

    def wrap(self, env: Environment, images: bool) -> Environment:
        spec = self.spec
        self.rollouts = RolloutTap(env) if spec.record_rollouts else None
        self.base = base = self.rollouts or env
        self.tap = FrameTap(base, images=images, size=spec.video_size) if spec.video or not images else None
        return MeteredEnv(self.tap or base, self.meter)  # a frame's recording is part of the env's call

    def render(self) -> None:
        """A graph node needs camera frames: the env renders them, and the tap hands them on."""
        if self.tap is not None:
            self.tap.images = True
        if self.base is not None:
            self.base.render_images = True  # an env that cannot render ignores it


class EpisodeWorker:
    """One worker's env manager. `agent` may be given (inline, where the runner built it already), and so may
    `resolved`, the spec resolved already in this process (inline: the runner's); else the worker resolves it."""

    def __init__(
        self,
        config: WorkerConfig,
        *,
        name: str = "main",
        record: MutableSequence[float] | None = None,
        agent: object = None,
        resolved: Resolved | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self.meter = Meter(record)  # `record`: shared with the pool that watches this worker
        self.limits: dict[str, EpisodeLimits] = {}
        self.agent = agent
        self.resolved = resolved
        self._parts: EpisodeParts | None = None
        self._driver: PanelDriver | None = None
        self._tap: FrameTap | None = None
        self._rollouts: RolloutTap | None = None
        self._trace = TraceBuffer()

    @property
    def panel_name(self) -> str | None:
        """The name of the panel this worker places its episodes through (`env_babyai`; `env_babyai#1` for the
        proxy of the panel in its replica of a server-mode env nodeset); None before `initialize()`."""
        panel = self._parts.panel if self._parts is not None else None
        return panel.name if panel is not None else None

    def initialize(self) -> None:
        """Build the agent (unless given), the env, the Kernel (or a graph's runner) and the panel; raise
        `WorkerFailed` naming the cause when they cannot be built."""
        config, spec = self.config, self.config.spec
        resolved = self.resolved if self.resolved is not None else resolve(spec)
        resolved.benchmark.long_episode_ids = config.long_episode_ids
        if resolved.plan is None and self.agent is None:
            if config.policy_host is not None:
                self.agent = HostedAgent(config.policy_host, act_timeout_s=spec.act_timeout, meter=self.meter)
            else:
                self.agent = make_agent(spec.agent, spec.agent_args, resolved.benchmark)
        first = resolved.tasks[0]
        self.limits = task_limits(spec, resolved.benchmark, config.budgets)
        bus = EventBus(run_id=config.run_id)
        bus.subscribe(self._trace, critical=True)
        recording = _Recording(spec, self.meter)
        try:
            parts = assemble(
                resolved.benchmark,
                Use.BATCH,
                worker=self.name,
                bus=bus,
                max_steps=config.budgets[first],
                plan=resolved.plan,
                agent=self.agent,
                shield=spec.shield,
                act_timeout_s=spec.act_timeout,
                timing=make_timing(spec) if resolved.plan is None else None,
                render=spec.record_rollouts,  # a recorded rollout keeps the env's cameras, given to the agent or not
                images_withheld=spec.no_images,
                wrap=recording.wrap,
                on_images=recording.render,
                env_calls=RemoteEnvCalls(self.meter),
                start=resolved.benchmark.task_instance(resolved.split, first, 0),
            )
        except ImagesWithheld as exc:
            raise WorkerFailed(str(exc)) from None
        except PanelUnavailable as exc:  # the parts are closed again, and so is the agent
            self._close_agent()
            raise WorkerFailed(f"worker {self.name} cannot place episodes through its env panel: {exc}") from exc
        assert parts.panel is not None
        self._parts, self._tap, self._rollouts = parts, recording.tap, recording.rollouts
        self._driver = PanelDriver(parts.panel, parts.executor)

    def shutdown(self) -> None:
        """Close the Kernel (or the graph's runner, with its subprocesses and their panels), the agent (a remote
        policy's connection, say) and the env, once."""
        parts = self._parts
        self._parts = self._driver = self._tap = self._rollouts = None
        if parts is None:
            return
        try:
            parts.executor.close()
            self._close_agent()
        finally:
            parts.env.close()  # the tap's too

    def _close_agent(self) -> None:
        close = getattr(self.agent, "close", None)
        if callable(close):
            close()

    def run(self, job: EpisodeJob) -> EpisodeResult:
        """Place and run one episode; its failures become its status, never an exception."""
        parts, driver, tap, rollouts = self._parts, self._driver, self._tap, self._rollouts
        if parts is None or driver is None:
            raise HyloError("EpisodeWorker.run() before initialize()")
        kernel, env = parts.executor, parts.env
        planned, spec = job.task, self.config.spec
        video_dir = self.config.run_dir / "videos"
        started = time.time()
        self.meter.begin(self.limits[planned.task])
        try:
            task = driver.place(planned)
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
        if parts.remote_panel:
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
