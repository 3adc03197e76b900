"""The evaluation runner behind `hylo eval` and `hylo.evaluate()`.

It resolves the spec (benchmark, split, tasks, agent, step budgets), opens or resumes the run's EvalLog, places
every episode through the benchmark's env panel, runs it on the Kernel and hands its row and trace to the EvalLog
writer (each episode is committed whole or not at all). Episodes already in the log are not run again; the result
lists every episode of the run, ordered by (task, index) whatever order they ran in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hylo.core.agent import AgentRequirements
from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, SignalFailed
from hylo.core.kernel import Kernel
from hylo.core.shield import SafetyShield
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.timing import RealtimeTiming, SyncTiming, Timing
from hylo.core.types import TaskInstance
from hylo.envs.benchmark import Benchmark, get_benchmark
from hylo.eval.placement import PanelDriver
from hylo.eval.provenance import Background, git_commit, package_versions
from hylo.eval.recording import FrameTap, TraceBuffer
from hylo.eval.spec import EvalSpec
from hylo.eval.stats import Summary, summarize, summarize_by_task
from hylo.eval.store import FILENAME, EpisodeRow, EvalLog, RunBusy, RunInfo, records
from hylo.eval.video import video_name
from hylo.eval.writer import EvalLogWriter, RunAborted
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.budget import resolve_step_budget

logger = logging.getLogger(__name__)


class EvalError(HyloError):
    """A run that cannot start (bad input, a changed configuration); the message says what to do."""


@dataclass(frozen=True)
class Progress:
    """What a progress display is told after each episode."""

    done: int
    total: int
    successes: int
    executed: int
    row: EpisodeRow | None = None


ProgressCallback = Callable[[Progress], None]


@dataclass
class EvalResult:
    """A run's outcome: every episode (final attempt), ordered by (task, index), and the summaries."""

    run_id: str
    log_dir: Path
    spec: dict[str, Any]
    executed_now: int
    episodes: list[EpisodeRow]
    summary: Summary
    per_task: dict[str, Summary] = field(default_factory=dict)

    @property
    def statuses(self) -> dict[str, int]:
        return self.summary.status_counts

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "log_dir": str(self.log_dir),
            "spec": self.spec,
            "executed_now": self.executed_now,
            "episodes": [
                {
                    "episode_id": row.episode_id,
                    "task": row.task,
                    "seed": row.seed,
                    "status": row.status.value,
                    "reason": row.reason,
                    "steps": row.steps,
                    "success": row.success,
                }
                for row in self.episodes
            ],
            "summary": {
                **self.summary.to_json(),
                "per_task": {task: summary.to_json() for task, summary in self.per_task.items()},
            },
        }


def evaluate(
    spec: EvalSpec | str | None = None, /, *, progress: ProgressCallback | None = None, **kwargs: Any
) -> EvalResult:
    """Run (or resume) an evaluation and return its result.

    `hylo.evaluate("babyai", agent="expert", tasks=["GoToLocal"], episodes=20)` takes the arguments of `hylo eval`
    (`tasks`, `agent_args`, `max_steps`, `act_timeout`, `shield`, `timing`, `log_dir`, `run_id`, `fresh`,
    `video`, ...) or a ready `EvalSpec`.
    """
    if isinstance(spec, EvalSpec):
        if kwargs:  # validated like any spec: an override cannot smuggle in a bad value
            spec = EvalSpec.model_validate({**spec.model_dump(), **kwargs})
    elif isinstance(spec, str):
        spec = EvalSpec(benchmark=spec, **kwargs)
    else:
        spec = EvalSpec(**kwargs)
    return Evaluation(spec, progress=progress).run()


@dataclass(frozen=True)
class _Resolved:
    benchmark: Benchmark
    split: str
    tasks: list[str]
    budgets: dict[str, int]
    spec: EvalSpec  # split and tasks filled in


def resolve(spec: EvalSpec, *, allow_import: bool = True) -> _Resolved:
    """Check everything a run needs before anything runs; raise a clear error naming the bad value."""
    benchmark = get_benchmark(spec.benchmark, allow_import=allow_import)
    available, why = benchmark.available()
    if not available:
        raise EvalError(f"benchmark {benchmark.name!r} is not available here: {why}")
    split = benchmark.check_split(spec.split)
    tasks = benchmark.check_tasks(split, spec.tasks)
    panel = BenchmarkPanel(benchmark, split=split, task=tasks[0])
    driver = PanelDriver(panel)
    budgets: dict[str, int] = {}
    try:
        for task in tasks:
            driver.set_field("task", task)
            loaded = driver.load()
            try:
                budgets[task] = resolve_step_budget(spec.max_steps, loaded, benchmark.default_step_budget(task))
            except ValueError as exc:
                raise EvalError(str(exc)) from None
    finally:
        driver.close()
    return _Resolved(benchmark, split, tasks, budgets, spec.model_copy(update={"split": split, "tasks": tasks}))


def run_id_for(spec: EvalSpec, budgets: dict[str, int]) -> str:
    """The run a spec names: its `run_id`, else benchmark-agent-digest; with `fresh`, a new id that no run in the log
    dir has yet (refused when a named run exists)."""
    run_id = spec.run_id or spec.default_run_id(budgets)
    if spec.fresh:
        if spec.run_id is not None and (spec.log_path / run_id).exists():
            raise EvalError(f"--fresh: run {run_id!r} already exists in {spec.log_dir}; choose another --run-id")
        if spec.run_id is None:
            run_id = f"{run_id}-{time.strftime('%Y%m%d-%H%M%S')}"
            base, n = run_id, 1
            while (spec.log_path / run_id).exists():
                n += 1
                run_id = f"{base}-{n}"
    return run_id


def plan_run(spec: EvalSpec, *, allow_import: bool = True) -> EvalSpec:
    """Validate a spec without running it and fix its run: split, tasks and `run_id` filled in, `fresh` consumed.
    The agent is built once to check its name and arguments. Without `allow_import` (an HTTP request) only
    registered benchmarks and agents are accepted, never an import path. Raises a `HyloError` naming the bad value."""
    from hylo.agents.registry import make_agent

    resolved = resolve(spec, allow_import=allow_import)
    agent = make_agent(resolved.spec.agent, resolved.spec.agent_args, resolved.benchmark, allow_import=allow_import)
    close = getattr(agent, "close", None)
    if callable(close):
        close()
    make_timing(resolved.spec)
    return resolved.spec.model_copy(update={"run_id": run_id_for(resolved.spec, resolved.budgets), "fresh": False})


def make_timing(spec: EvalSpec) -> Timing:
    if spec.timing == "sync":
        if spec.timing_options:
            raise EvalError(f"timing options {sorted(spec.timing_options)} need --timing realtime")
        return SyncTiming()
    try:
        return RealtimeTiming(**spec.timing_options)
    except (TypeError, ValueError) as exc:
        raise EvalError(f"bad realtime timing options {spec.timing_options}: {exc}") from None


@dataclass
class _Bound:
    env: Environment
    tap: FrameTap | None
    kernel: Kernel
    trace: TraceBuffer
    driver: PanelDriver

    def close(self) -> None:
        try:
            self.driver.close()
            self.kernel.close()
        finally:
            (self.tap or self.env).close()


class Evaluation:
    """One invocation of a run: resolve, open or resume the EvalLog, run the missing episodes, summarise."""

    def __init__(self, spec: EvalSpec, *, progress: ProgressCallback | None = None) -> None:
        self.resolved = resolve(spec)
        self.spec = self.resolved.spec
        self.progress = progress
        from hylo.agents.registry import make_agent

        self.agent = make_agent(self.spec.agent, self.spec.agent_args, self.resolved.benchmark)
        self.timing = make_timing(self.spec)
        self._git = Background(git_commit)  # a subprocess: asked while the run binds, read when the log is made
        self.digest = self.spec.digest(self.resolved.budgets)
        self.started = False  # whether this invocation opened the run's log (after that, a failure aborts the run)
        self.run_id = run_id_for(self.spec, self.resolved.budgets)
        self.run_dir = self.spec.log_path.resolve() / self.run_id

    def spec_json(self) -> dict[str, Any]:
        data = self.spec.model_dump(mode="json")
        data["run_id"] = self.run_id
        data["step_budget"] = self.resolved.budgets
        data["digest"] = self.digest
        return data

    def _plan(self) -> list[TaskInstance]:
        benchmark, split = self.resolved.benchmark, self.resolved.split
        return [
            benchmark.task_instance(split, task, index, self.spec.seed)
            for task in self.resolved.tasks
            for index in range(self.spec.episodes)
        ]

    def _resume(self) -> tuple[EvalLog | None, int]:
        """The run's existing log, checked for a resume (same configuration, same package versions), with the
        number of episodes it planned; (None, 0) for a new run."""
        if not (self.run_dir / FILENAME).exists():
            return None, 0
        log = EvalLog.open(self.run_dir)
        try:
            info = log.info()
            self._check_resumable(info)
        except BaseException:
            log.close()
            raise
        return log, info.n_planned

    def _claim(self, log: EvalLog | None, planned: int) -> EvalLog:
        """Create the run's log, or claim the existing one for this process (refused while another runs it)."""
        if log is None:
            return EvalLog.create(
                self.run_dir,
                run_id=self.run_id,
                benchmark=self.resolved.benchmark.name,
                split=self.resolved.split,
                agent=self.spec.agent,
                digest=self.digest,
                spec=self.spec_json(),
                n_planned=planned,
                versions=package_versions(),
                git_commit=self._git.result(),
            )
        try:
            log.claim()
        except RunBusy as exc:
            raise EvalError(f"{exc}; wait for it, or stop it and re-run to resume") from None
        log.update_run(n_planned=planned, spec=self.spec_json())
        return log

    def _check_resumable(self, info: RunInfo) -> None:
        if info.digest != self.digest:
            raise EvalError(
                f"run {self.run_id!r} was made with a different configuration (digest {info.digest}, this one "
                f"{self.digest}); pass --fresh for a new run or another --run-id"
            )
        now = package_versions()
        changed = [f"{name} {was} → {now.get(name)}" for name, was in info.versions.items() if now.get(name) != was]
        if changed:
            raise EvalError(
                f"run {self.run_id!r} was recorded with other package versions ({', '.join(changed)}); resuming would "
                "mix results across versions: pass --fresh for a new run or another --run-id"
            )

    def run(self) -> EvalResult:
        plan = self._plan()
        log, planned_before = self._resume()
        planned = max(len(plan), planned_before)  # a run keeps its largest plan
        try:
            done = log.done() if log is not None else {}
            todo = [task for task in plan if task.episode_id not in done]
            # Bind before the run is created or claimed: an agent the env cannot serve, or a timing it cannot
            # honour, starts nothing.
            bound = self._bind(todo[0].task) if todo else None
            executed = 0
            try:
                log = self._claim(log, planned)
                self.started = True
                if bound is not None:
                    try:
                        executed = self._run_episodes(log, todo, done, planned, bound)
                    except KeyboardInterrupt:
                        log.update_run(status="interrupted", message="interrupted; re-run the command to resume")
                        raise
                    except BaseException as exc:
                        log.update_run(status="aborted", message=f"{type(exc).__name__}: {exc}")
                        raise
            finally:
                if bound is not None:
                    bound.close()
            rows = log.final_episodes()
            log.update_run(status="complete" if len(rows) >= planned else "partial", message="")
            return self._result(rows, executed)
        finally:
            if log is not None:
                log.close()

    def _result(self, rows: list[EpisodeRow], executed: int) -> EvalResult:
        order = {task: i for i, task in enumerate(self.resolved.tasks)}
        rows = sorted(rows, key=lambda r: (order.get(r.task, len(order)), r.task, r.index, r.episode_id))
        recs = records(rows)
        return EvalResult(
            run_id=self.run_id,
            log_dir=self.run_dir,
            spec=self.spec_json(),
            executed_now=executed,
            episodes=rows,
            summary=summarize(recs),
            per_task=summarize_by_task(recs),
        )

    def _needs_images(self) -> bool:
        requirements = getattr(self.agent, "requirements", None)
        return isinstance(requirements, AgentRequirements) and requirements.needs_images

    def _bind(self, first_task: str) -> _Bound:
        """The env, the Kernel and the panel that place and run this invocation's episodes."""
        spec, resolved = self.spec, self.resolved
        needs_images = self._needs_images()
        env: Environment = resolved.benchmark.make_env(render_images=needs_images)
        try:
            tap = FrameTap(env, agent_needs_images=needs_images) if spec.video else None
            bus = EventBus(run_id=self.run_id)
            trace = TraceBuffer()
            bus.subscribe(trace, critical=True)
            kernel = Kernel(
                tap or env,
                self.agent,
                shield=SafetyShield() if spec.shield else SafetyShield.permissive(),
                timing=self.timing,
                act_timeout_s=spec.act_timeout,
                max_steps=resolved.budgets[first_task],
                bus=bus,
                auto_episode_reset=False,
            )
        except BaseException:
            env.close()
            raise
        panel = BenchmarkPanel(resolved.benchmark, split=resolved.split, task=first_task)
        return _Bound(env, tap, kernel, trace, PanelDriver(panel, kernel))

    def _run_episodes(
        self, log: EvalLog, todo: list[TaskInstance], done: dict[str, EpisodeRow], total: int, bound: _Bound
    ) -> int:
        spec, resolved = self.spec, self.resolved
        env, tap, kernel, trace, driver = bound.env, bound.tap, bound.kernel, bound.trace, bound.driver
        successes = sum(row.success for row in done.values())
        n_done, executed = len(done), 0
        video_dir = self.run_dir / "videos"
        committer = EvalLogWriter(log)
        try:
            for planned in todo:
                started = time.time()
                try:
                    task = driver.place(planned.split, planned.task, planned.index, planned.base_seed)
                except SignalFailed as exc:  # the agent failed on the placement's episode_reset: its episode, its error
                    task, outcome = (
                        planned,
                        EpisodeOutcome(EpisodeStatus.ERROR, False, 0, exc.reason, detail=exc.detail),
                    )
                else:
                    if task.episode_id != planned.episode_id:
                        raise RunAborted(f"panel placed {task.episode_id}, the runner planned {planned.episode_id}")
                    kernel.max_steps = resolved.budgets[task.task]
                    recording = tap is not None and task.index < spec.video
                    if recording and tap is not None:
                        video_dir.mkdir(parents=True, exist_ok=True)
                        tap.start(video_dir / f".{video_name(task.episode_id, 'recording')}", env.spec.control_rate_hz)
                    outcome = kernel.run(task)
                ended = time.time()
                metrics: dict[str, Any] = {**outcome.metrics, "wall_s": round(ended - started, 6)}
                video: str | None = None
                if tap is not None and tap.writer is not None:
                    try:
                        written = tap.stop()
                        if written is not None:
                            final = video_dir / video_name(task.episode_id, outcome.status.value)
                            written.replace(final)
                            video = str(final.relative_to(self.run_dir))
                    except Exception as exc:  # a video is a view of the episode, not its result
                        logger.warning("could not write the video of %s: %r", task.episode_id, exc)
                        metrics["video_error"] = f"{type(exc).__name__}: {exc}"
                row = EpisodeRow(
                    episode_id=task.episode_id,
                    task=task.task,
                    split=task.split,
                    index=task.index,
                    base_seed=task.base_seed,
                    seed=task.seed,
                    status=outcome.status,
                    reason=outcome.reason,
                    success=outcome.success,
                    steps=outcome.steps,
                    safety_interventions=outcome.safety_interventions,
                    metrics=metrics,
                    started_at=started,
                    ended_at=ended,
                    detail=outcome.detail,
                    worker="main",
                    video=video,
                )
                committer.put(row, trace.take())
                n_done += 1
                executed += 1
                successes += outcome.success
                if self.progress is not None:
                    self.progress(Progress(n_done, total, successes, executed, row))
        finally:
            committer.close()
        return executed
