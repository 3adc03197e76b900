"""The evaluation runner behind `hylo eval` and `hylo.evaluate()`.

It resolves the spec (benchmark, split, tasks, agent, step budgets), opens or resumes the run's EvalLog, places
every episode through the benchmark's env panel, runs it on the Kernel and hands its row and trace to the EvalLog
writer (each episode is committed whole or not at all). Episodes already in the log are not run again; the result
lists every episode of the run, ordered by (task, index) whatever order they ran in.

The plan is walked, not listed (`hylo.eval.episode_plan`): the runner draws the next episode when a worker is idle,
asks the log about a slice of the plan at a time, and holds only the episodes running and the attempts waiting for a
retry, so that what planning costs does not grow with the run.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any, Protocol

from hylo.agents.registry import LIVE_PREFIX, make_agent
from hylo.core.errors import shown
from hylo.core.status import EpisodeStatus
from hylo.eval.batched import BatchedPool, check_batched, check_live, policy_host
from hylo.eval.batching import PolicyHost
from hylo.eval.batching.local_host import LocalPolicyHost
from hylo.eval.code_identity import CodeIdentity, changes_text, diff_code, live_code
from hylo.eval.episode_plan import EpisodePlan
from hylo.eval.limits import EpisodeLimits, task_limits
from hylo.eval.pool import InlinePool, Pool, ProcessPool
from hylo.eval.process_setup import WorkerFailed
from hylo.eval.resolve import EvalError, check_memory, choose_backend, code_of, make_timing, resolve, run_id_for
from hylo.eval.spec import MAX_NAME, EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeResult, EpisodeWorker, WorkerConfig
from hylo.evallog.logdir import FILENAME, check_log_dir
from hylo.evallog.provenance import Background, git_commit, package_versions
from hylo.evallog.realtime_metrics import RealtimeFigures, episode_realtime, run_realtime
from hylo.evallog.rows import EpisodeRow, RunInfo, records
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EvalLog, RunBusy
from hylo.evallog.writer import EvalLogWriter, RunAborted
from hylo.stats.success import SeedClusters, Summary, seed_clusters, summarize, summarize_by_task

logger = logging.getLogger(__name__)

PLAN_SLICE = 1000
"""How many planned episodes the runner asks the run's log about at a time: what walking the plan holds at once."""


@dataclass(frozen=True)
class Progress:
    """What a progress display is told after each episode."""

    done: int
    total: int
    successes: int
    executed: int
    row: EpisodeRow | None = None


ProgressCallback = Callable[[Progress], None]
ResultCallback = Callable[[EpisodeResult], None]
"""Told each episode's final attempt as it comes back, with its trace (`hylo eval --rerun` records it)."""


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
    seed_clusters: SeedClusters | None = None
    """A run of several seeds: its episodes clustered by (task, index) (`hylo.stats.success.seed_clusters`)."""
    batching: dict[str, Any] | None = None
    """A batched run's policy-host figures (`--batch`): calls, mean batch size, queue wait, host utilisation."""
    realtime: RealtimeFigures | None = None
    """A run under realtime timing: its episodes' realtime figures pooled (`hylo.evallog.realtime_metrics`)."""

    @property
    def statuses(self) -> dict[str, int]:
        return self.summary.status_counts

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "log_dir": str(self.log_dir),
            "spec": self.spec,
            "executed_now": self.executed_now,
            "episodes": [_episode_json(row) for row in self.episodes],
            "summary": {
                **self.summary.to_json(),
                "per_task": {task: summary.to_json() for task, summary in self.per_task.items()},
            },
        }
        if self.seed_clusters is not None:
            data["seed_clusters"] = self.seed_clusters.to_json()
        if self.batching is not None:
            data["batching"] = self.batching
        if self.realtime is not None:
            data["realtime"] = self.realtime.to_json()
        return data


def _episode_json(row: EpisodeRow) -> dict[str, Any]:
    """An episode as `hylo eval --json` lists it, with its realtime figures under realtime timing."""
    data: dict[str, Any] = {
        "episode_id": row.episode_id,
        "task": row.task,
        "seed": row.seed,
        "status": row.status.value,
        "reason": row.reason,
        "steps": row.steps,
        "success": row.success,
    }
    realtime = episode_realtime(row)
    if realtime is not None:
        data["realtime"] = realtime
    return data


class _Pending:
    """The attempts a dispatch has still to start: the plan's, drawn one at a time as workers become idle, then the
    retries queued meanwhile. With a gate (an A/B comparison, whose runs are sized to its bounded pairs) every
    attempt is queued at once, in the gate's order, and the first one it lets start goes (a retried attempt queued
    behind later episodes may be the one the gate waits for)."""

    def __init__(self, todo: Iterable[EpisodeJob], gate: DispatchGate | None) -> None:
        self.gate = gate
        self._queued: deque[EpisodeJob] = deque(gate.order(list(todo))) if gate is not None else deque()
        self._planned: Iterator[EpisodeJob] = iter(()) if gate is not None else iter(todo)
        self._retries: deque[EpisodeJob] = deque()

    def __bool__(self) -> bool:
        if self._queued or self._retries:
            return True
        job = next(self._planned, None)
        if job is None:
            return False
        self._queued.append(job)
        return True

    def take(self) -> EpisodeJob | None:
        """The next attempt to start; None when there is none, or the gate holds every one back."""
        if self.gate is not None:
            return self._gated(self.gate)
        if self._queued:
            return self._queued.popleft()
        job = next(self._planned, None)
        if job is None and self._retries:
            return self._retries.popleft()
        return job

    def _gated(self, gate: DispatchGate) -> EpisodeJob | None:
        if gate.stopped:
            return None
        for position, job in enumerate(self._queued):
            if gate.may_start(job):
                del self._queued[position]
                return job
        return None

    def put_back(self, job: EpisodeJob) -> None:
        """`job` was not started after all (its worker died idle): it goes first."""
        self._queued.appendleft(job)

    def retry(self, job: EpisodeJob) -> None:
        """Queue another attempt of an episode, after every attempt already waiting."""
        (self._queued if self.gate is not None else self._retries).append(job)


def evaluate(
    spec: EvalSpec | str | None = None, /, *, progress: ProgressCallback | None = None, **kwargs: Any
) -> EvalResult:
    """Run (or resume) an evaluation and return its result.

    `hylo.evaluate("babyai", agent="expert", tasks=["GoToLocal"], episodes=20)` takes the arguments of `hylo eval`
    (`tasks`, `env_args`, `agent_args`, `max_steps`, `act_timeout`, `shield`, `timing`, `log_dir`, `run_id`,
    `fresh`, `video`, ...) or a ready `EvalSpec`.

    `agent` may also be an agent object (a training loop's policy: any hylo agent, or a LeRobot policy wrapped in
    `hylo.agents.lerobot.LeRobotAgent`): it is evaluated where it is, never pickled or built again. With one worker
    its episodes run in this process; with `workers=N` they run in N processes whose calls this process serves
    (`act_batch`, as a policy host does). The run's identity is the object's code and the digest of its weights.
    """
    live = kwargs.get("agent")
    if live is not None and not isinstance(live, str):
        kwargs["agent"] = live_agent_name(live)
    else:
        live = None
    if isinstance(spec, EvalSpec):
        if kwargs:  # validated like any spec: an override cannot smuggle in a bad value
            spec = EvalSpec.model_validate({**spec.model_dump(), **kwargs})
    elif isinstance(spec, str):
        spec = EvalSpec(benchmark=spec, **kwargs)
    else:
        spec = EvalSpec(**kwargs)
    return Evaluation(spec, progress=progress, live=live).run()


def live_agent_name(agent: object) -> str:
    """The name a run of a live agent object records: `live:` and its class's `module:qualname`."""
    if not callable(getattr(agent, "act", None)):
        raise EvalError(
            f"agent {shown(agent, 80)} is neither a name nor an agent object (it has no act method); a LeRobot "
            "policy is wrapped as hylo.agents.lerobot.LeRobotAgent(policy, preprocessor, postprocessor)",
            field="agent",
        )
    cls = type(agent)
    return f"{LIVE_PREFIX}{cls.__module__}:{cls.__qualname__}"[:MAX_NAME]


class DispatchGate(Protocol):
    """Who else decides when a run's episodes start, and when it stops handing them out: an A/B comparison, whose two
    runs go pair by pair (`hylo.experiments.ab`). The runner asks it before each start and tells it each final
    result."""

    @property
    def stopped(self) -> bool:
        """No more episodes start (those running finish and are committed)."""

    def order(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        """The order in which the run's episodes are handed out (a gated run's attempts are all listed: its size is
        the gate's to bound)."""

    def may_start(self, job: EpisodeJob) -> bool:
        """Whether `job` may start now (when not, the runner waits on `wait` and asks again)."""

    def finished(self, row: EpisodeRow) -> None:
        """An episode's final attempt is committed."""

    def wait(self, timeout: float) -> None:
        """Block until something may have changed (another run's result), at most `timeout` seconds."""


class Evaluation:
    """One invocation of a run: resolve, open or resume the EvalLog, run the missing episodes, summarise."""

    def __init__(
        self,
        spec: EvalSpec,
        *,
        progress: ProgressCallback | None = None,
        gate: DispatchGate | None = None,
        live: object | None = None,
    ) -> None:
        check_log_dir(spec.log_path, writable=True)
        self.live = live
        self.resolved = resolve(spec)
        self.spec = self.resolved.spec
        self.progress = progress
        self.on_result: ResultCallback | None = None
        self.gate = gate
        make_timing(self.spec)  # refuse bad timing options before anything starts
        check_memory(self.spec, self.resolved.benchmark)
        self.agent: object = None
        self.batching: dict[str, Any] | None = None  # a batched run's host figures, once it ran
        if live is not None:
            check_live(self.spec, self.resolved, self.backend(), live)
            self.agent = live
        elif self.spec.batch is not None:
            check_batched(self.spec, self.resolved, self.backend())
        elif self.backend() == "inline" and self.resolved.plan is None:  # pooled workers and graphs build their own
            self.agent = make_agent(self.spec.agent, self.spec.agent_args, self.resolved.benchmark)
        self._git = Background(git_commit)  # a subprocess: asked while the run binds, read when the log is made
        self.code = live_code(self.spec.agent, live) if live is not None else code_of(self.resolved)
        self.config_digest = self.spec.digest(self.resolved.budgets, self.resolved.versions)
        self.digest = self.spec.digest(self.resolved.budgets, self.resolved.versions, self.code.digest)
        self.started = False  # whether this invocation opened the run's log (after that, a failure aborts the run)
        self.run_id = run_id_for(self.spec, self.resolved.budgets, self.resolved.versions, code=self.code)
        self.run_dir = self.spec.log_path.resolve() / self.run_id
        self.long_episode_ids = False  # set when the run's log holds its episodes under the long form of their ids

    def spec_json(self) -> dict[str, Any]:
        data = self.spec.model_dump(mode="json")
        data["run_id"] = self.run_id
        data["step_budget"] = self.resolved.budgets
        data["digest"] = self.digest
        data["config_digest"] = self.config_digest
        data["code"] = self.code.to_json()
        return data

    def _plan(self) -> EpisodePlan:
        """The run's episodes, in the order they are handed out (seed, then task, then index), walked lazily."""
        resolved = self.resolved
        return EpisodePlan(resolved.benchmark, resolved.split, resolved.tasks, self.spec.seed_list, self.spec.episodes)

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
        if info.digest != self.digest and info.spec.get("config_digest") == self.config_digest:
            raise EvalError(self._code_changed(info))
        if info.digest != self.digest and "code" not in info.spec and info.digest == self.config_digest:
            raise EvalError(
                f"run {self.run_id!r} was made before runs recorded their agent's code, so whether its code changed "
                "cannot be told; resuming could mix code versions in one run: pass --fresh for a new run or another "
                "--run-id"
            )
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

    def _code_changed(self, info: RunInfo) -> str:
        """Why a run of the same configuration made with other code is not resumed, naming what changed."""
        recorded = CodeIdentity.from_json(info.spec.get("code"))
        changes = diff_code(recorded, self.code) if recorded is not None else []
        what = f": {changes_text(changes)}" if changes else ""
        return (
            f"the agent's code changed since run {self.run_id!r} was made{what}; resuming would mix code versions in "
            "one run: drop --run-id for a run of this code, or pass --fresh or another --run-id"
        )

    def run(self) -> EvalResult:
        log, planned_before = self._resume()
        planned = max(len(self._plan()), planned_before)  # a run keeps its largest plan
        reader: EvalLog | None = None  # the plan is walked against the log on a connection of its own
        try:
            if log is not None:
                self._logged_ids(log)
                reader = EvalLog.open(self.run_dir)
            todo = self._todo(reader)
            first = next(todo, None)
            # Start the workers before the run is created or claimed: an agent the env cannot serve, or a timing it
            # cannot honour, starts nothing.
            pool = self._pool() if first is not None else None
            executed, interrupted = 0, False
            try:
                if pool is not None:
                    try:
                        pool.start()
                    except WorkerFailed as exc:
                        raise EvalError(str(exc)) from None
                log = self._claim(log, planned)
                self.started = True
                # what another invocation finished while the workers were being built is not re-run
                todo = self._todo(reader) if reader is not None else chain([] if first is None else [first], todo)
                if pool is not None:
                    done, successes = self._tally(log)
                    try:
                        executed = self.dispatch(log, pool, todo, planned, done=done, successes=successes)
                    except KeyboardInterrupt:
                        interrupted = True
                        log.update_run(
                            status=RunStatus.INTERRUPTED, message="interrupted; re-run the command to resume"
                        )
                        raise
                    except BaseException as exc:
                        message = str(exc) if isinstance(exc, RunAborted) else f"{type(exc).__name__}: {exc}"
                        log.update_run(status=RunStatus.ABORTED, message=message)
                        raise
            finally:
                if pool is not None:
                    pool.close(kill=interrupted)
                    if isinstance(pool, BatchedPool):
                        self.batching = pool.figures().to_json()
            rows = log.final_episodes()
            log.update_run(status=RunStatus.COMPLETE if len(rows) >= planned else RunStatus.PARTIAL, message="")
            return self._result(rows, executed)
        finally:
            if reader is not None:
                reader.close()
            if log is not None:
                log.close()

    def _logged_ids(self, log: EvalLog) -> None:
        """Plan under the episode ids the run's log uses: a run logged before its benchmark had a short form of its
        episode ids (`gym/default/pusht-v0/...` instead of `gym:gym_pusht/PushT-v0/default/gym_pusht/...`) keeps the
        long form, so that it resumes instead of running its episodes again. One logged episode tells which."""
        _, logged = log.final_page(limit=1)
        if not logged:
            return
        row = logged[0]
        short = self._plan().instance(row.task, row.index, row.base_seed)
        if row.episode_id != short.episode_id and row.episode_id == replace(short, id_prefix="").episode_id:
            self.long_episode_ids = self.resolved.benchmark.long_episode_ids = True

    def _todo(self, log: EvalLog | None) -> Iterator[EpisodeJob]:
        """The attempts this invocation runs, in plan order, drawn as they are asked for: every planned episode not
        in `log`, and (with `retry_infra`) the next attempt of each whose last one was infra_invalid and may still be
        retried. The log is asked about `PLAN_SLICE` episodes at a time (None: a new run, whose log holds nothing
        but what this invocation runs)."""
        plan = iter(self._plan())
        while chunk := list(islice(plan, PLAN_SLICE)):
            finals = log.finals_of([task.episode_id for task in chunk]) if log is not None else {}
            for task in chunk:
                final = finals.get(task.episode_id)
                if final is None:
                    yield EpisodeJob(task)
                elif final.status is EpisodeStatus.INFRA_INVALID and final.attempt <= self.spec.retry_infra:
                    yield EpisodeJob(task, final.attempt + 1)

    def _tally(self, log: EvalLog) -> tuple[int, int]:
        """How many of the run's episodes the log holds final (not those to be retried), and how many succeeded: where
        its progress starts."""
        counts = log.status_counts()
        retried = 0
        if self.spec.retry_infra:
            retried = log.count_final(
                below_index=self.spec.episodes, status=EpisodeStatus.INFRA_INVALID, max_attempt=self.spec.retry_infra
            )
        return sum(counts.values()) - retried, counts[EpisodeStatus.SUCCESS.value]

    def backend(self) -> str:
        """Where the episodes run: `inline`, `process` or `ray` (`auto`: inline for one worker, else process)."""
        return choose_backend(self.spec)

    def episode_limits(self) -> dict[str, EpisodeLimits]:
        """Each task's limits: the agent's allowance (its step budget × the benchmark's per-step allowance, unless
        `act_timeout` limits each act), the env calls' rule (or `env_timeout`), the `episode_timeout` cap."""
        return task_limits(self.spec, self.resolved.benchmark, self.resolved.budgets)

    def _pool(self) -> Pool:
        config = WorkerConfig(self.spec, self.run_id, self.run_dir, self.resolved.budgets, self.long_episode_ids)
        host: PolicyHost | LocalPolicyHost
        if self.live is not None and (self.spec.batch is not None or self.backend() != "inline"):
            host = LocalPolicyHost(self.live, self.spec.batch or self.spec.workers, self.spec.batch_wait_ms / 1000.0)
        elif self.spec.batch is not None:
            host = policy_host(self.spec, self.backend(), self.episode_limits().values())
        else:
            return self._workers(config)
        return BatchedPool(self._workers(replace(config, policy_host=host.endpoint)), host)

    def _workers(self, config: WorkerConfig) -> Pool:
        backend = self.backend()
        if backend == "inline":
            return InlinePool(EpisodeWorker(config, agent=self.agent, resolved=self.resolved))
        if backend == "ray":
            try:  # optional: Ray, the `ray` extra
                from hylo.eval.raypool import RayPool
            except ImportError as exc:
                raise EvalError(f"--backend ray needs Ray ({exc}): pip install 'hylo[ray]'") from None

            return RayPool(config, self.spec.workers, self.episode_limits(), address=self.spec.address)
        return ProcessPool(config, self.spec.workers, self.episode_limits())

    def dispatch(
        self,
        log: EvalLog,
        pool: Pool,
        todo: Iterable[EpisodeJob],
        total: int,
        *,
        done: int = 0,
        successes: int = 0,
    ) -> int:
        """Hand the attempts to idle workers one at a time (drawn from `todo` as they go), commit each result as it
        comes, re-queue retried infra failures and stop handing out work once `max_infra_failures` is reached.
        `done` and `successes`: the run's final episodes already in the log, where its progress starts."""
        spec, gate = self.spec, self.gate
        queue = _Pending(todo, gate)
        plan = self._plan()
        n_done = done
        executed = infra = 0
        broken: str | None = None
        committer = EvalLogWriter(log)
        try:
            while (queue and broken is None and not (gate is not None and gate.stopped)) or pool.busy():
                held = False  # the gate holds every queued episode back
                while queue and broken is None and pool.idle():
                    job = queue.take()
                    if job is None:
                        held = True
                        break
                    if not pool.submit(job):  # the worker died idle: the job never started
                        queue.put_back(job)
                if held and not pool.busy():
                    assert gate is not None
                    gate.wait(0.5)
                    continue
                for result in pool.poll(0.5):
                    row = result.row
                    committer.put(row, result.trace)
                    executed += 1
                    if row.status is EpisodeStatus.INFRA_INVALID:
                        infra += 1
                        if spec.max_infra_failures is not None and infra >= spec.max_infra_failures and not broken:
                            broken = (
                                f"{infra} infra_invalid attempts reached --max-infra-failures "
                                f"{spec.max_infra_failures} (last: {row.episode_id}: {row.reason}); the "
                                "infrastructure looks broken: fix it and re-run the command to resume"
                            )
                        elif row.attempt <= spec.retry_infra and broken is None:
                            task = plan.instance(row.task, row.index, row.base_seed)
                            queue.retry(EpisodeJob(task, row.attempt + 1))
                            continue
                    n_done += 1
                    successes += row.success
                    if gate is not None:
                        gate.finished(row)
                    if self.on_result is not None:
                        self.on_result(result)
                    if self.progress is not None:
                        self.progress(Progress(n_done, total, successes, executed, row))
        finally:
            committer.close()
        if broken is not None:
            raise RunAborted(broken)
        return executed

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
            seed_clusters=seed_clusters(recs),
            batching=self.batching,
            realtime=run_realtime(rows),
        )
