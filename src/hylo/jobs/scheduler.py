"""The JobScheduler: a durable, prioritised queue of evaluation jobs, each run as its own `hylo eval` process when
the machine has room for what it declared.

One background thread owns every job process: it starts queued jobs (strict head of line, see
`hylo.jobs.resources`), watches them, signals the ones cancelled and records how each ended. It holds each job to
its declared `ram_gb` (`hylo.jobs.memory`): one that goes past it is stopped and ends `aborted`. A scheduler that
starts on a log dir whose last scheduler died reconciles the jobs it left `running`; only one scheduler at a time may
own a log dir.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hylo.envs.headless import without_cuda_devices
from hylo.envs.registry import get_benchmark
from hylo.eval.spec import EvalSpec
from hylo.evallog.logdir import JOBS_DIR, JOBS_LOCK
from hylo.evallog.run_status import RunStatus
from hylo.jobs.errors import JobConflict, JobNotFound, JobRefused, QueueFull, SchedulerBusy
from hylo.jobs.job import Job, JobState, JobStatus
from hylo.jobs.memory import JobCgroups, MemoryLimit, exceeded_message
from hylo.jobs.outcome import CANCELLED_RUN_MESSAGE, Outcome, outcome
from hylo.jobs.process import STDERR_FILE, STDOUT_FILE, alive, created, kill_group_of, signal_group, spawn
from hylo.jobs.progress import mark_run, run_complete, run_progress
from hylo.jobs.resources import GB, Machine, MachineProbe, Placement, admit, declared, measure_machine, never_fits
from hylo.jobs.store import ActiveRun, JobStore, QueueLimit
from hylo.jobs.validation import check_spec
from hylo.secret_env import without_secrets

logger = logging.getLogger(__name__)

LOCK_FILE = JOBS_LOCK

GONE_MESSAGE = "its process was gone when the scheduler restarted; resubmit the same spec to resume"
ORPHAN_MESSAGE = (
    "its process outlived the scheduler that started it and was stopped when the scheduler restarted; "
    "resubmit the same spec to resume"
)
COMPLETED_UNWATCHED_MESSAGE = "the run completed while no scheduler watched it"

MEMORY_LOOK_S = 1.0
"""How often the scheduler measures a running job's memory (it walks the job's process tree)."""


@dataclass
class _Running:
    """A job process this scheduler started and watches."""

    job: Job
    popen: subprocess.Popen[bytes]
    placement: Placement
    job_dir: Path
    memory: MemoryLimit
    cancel: bool = False
    stopping: bool = False
    term_sent_at: float | None = None
    killed: bool = False
    over_memory: bool = False


def _env_ram_gb(benchmark: str) -> float | None:
    """The RAM one env of `benchmark` holds, as it declares it (None: undeclared, or a benchmark that validation will
    refuse with its own message)."""
    try:
        return get_benchmark(benchmark, allow_import=False).env_ram_gb
    except Exception:
        return None


class JobScheduler:
    """The job queue of one log dir (`<log_dir>/jobs.sqlite`) and the thread that runs it.

    `machine` replaces the measured machine (a `Machine`, or a function returning one at each scheduling pass): tests
    simulate a GPU machine or a single CPU with it. `grace_s` is how long a signalled job has to stop before SIGKILL.
    `die_with_scheduler` makes job processes receive SIGTERM when the scheduler dies (Linux). `env` is the job
    processes' environment (default: this process's at each start). `max_queued` caps the jobs waiting at once
    (`QueueFull` past it; None: no cap).
    """

    def __init__(
        self,
        log_dir: Path | str,
        *,
        machine: Machine | MachineProbe | None = None,
        poll_interval: float = 0.2,
        grace_s: float = 10.0,
        die_with_scheduler: bool = True,
        env: Mapping[str, str] | None = None,
        max_queued: int | None = None,
    ) -> None:
        if max_queued is not None and (
            isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1
        ):
            raise ValueError(f"max_queued must be an int >= 1 (or None: no cap), got {max_queued!r}")
        self.max_queued = max_queued
        self.log_dir = Path(log_dir).resolve()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.poll_interval = poll_interval
        self.grace_s = grace_s
        self.die_with_scheduler = die_with_scheduler
        self._env = env
        if machine is None:
            self._probe: MachineProbe = measure_machine
        elif isinstance(machine, Machine):
            fixed = machine
            self._probe = lambda: fixed
        else:
            self._probe = machine
        self._lock_file = _own(self.log_dir / LOCK_FILE)
        self.cgroups = JobCgroups.find()
        """Where jobs' cgroups are made (None: RLIMIT_DATA and the scheduler's look hold jobs to their ram_gb)."""
        self._memory_looked = 0.0
        self.store = JobStore(self.log_dir)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._running: dict[str, _Running] = {}
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._terminate = True
        self._closed = False
        self.reconcile()

    # -- lifecycle -----------------------------------------------------------------------------------------------------

    def start(self) -> JobScheduler:
        """Start the scheduling thread (it starts queued jobs as they fit)."""
        with self._lock:
            if self._closed:
                raise JobConflict("this scheduler is closed")
            if self._thread is not None and self._thread.is_alive():
                return self
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="hylo-job-scheduler", daemon=True)
            self._thread.start()
        return self

    def stop(self, *, terminate: bool = True, timeout: float | None = None) -> None:
        """Stop scheduling. With `terminate`, running jobs get SIGTERM (SIGKILL after the grace period) and end
        `aborted`, resumable; without it, they are left to finish first. Queued jobs stay queued."""
        with self._lock:
            self._stopping = True
            self._terminate = terminate
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout)

    def close(self) -> None:
        """Stop (terminating running jobs) and release the log dir."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        self.store.close()
        self._lock_file.close()

    def __enter__(self) -> JobScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """Whether the scheduling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def machine(self) -> Machine:
        """The machine as admission sees it now."""
        return self._probe()

    # -- submitting and reading ----------------------------------------------------------------------------------------

    def submit(
        self,
        spec: EvalSpec,
        *,
        priority: int = 0,
        cpus: int | None = None,
        ram_gb: float | None = None,
        gpu_mem_gb: float = 0.0,
        exclusive_gpu: bool = False,
        check_url: Callable[[str], None] | None = None,
        allow_import: bool = False,
    ) -> JobStatus:
        """Validate and queue an evaluation. Raises `JobRefused` (naming the field) for bad input or a job that can
        never fit this machine, `JobConflict` when the run already has a queued or running job, `QueueFull` when
        `max_queued` jobs wait already. `check_url` is asked about every URL the job's agents would connect to, and
        refuses one by raising `ValueError` (a server's `--allow-remote`); nothing connects before the job runs.
        `allow_import` lets the spec name import paths (a server's `--allow-import`)."""
        if cpus is not None and cpus < 1:
            raise JobRefused("cpus", f"cpus must be >= 1, got {cpus}")
        if ram_gb is not None and not ram_gb > 0:
            raise JobRefused("ram_gb", f"ram_gb must be > 0, got {ram_gb}")
        if not gpu_mem_gb >= 0:
            raise JobRefused("gpu_mem_gb", f"gpu_mem_gb must be >= 0, got {gpu_mem_gb}")
        machine = self.machine()
        resources = declared(
            spec.workers,
            cpus=cpus,
            ram_gb=ram_gb,
            gpu_mem_gb=gpu_mem_gb,
            exclusive_gpu=exclusive_gpu,
            env_ram_gb=_env_ram_gb(spec.benchmark),
            policy_host=spec.batch is not None,
            machine_cpus=machine.cpus,
        )
        never = never_fits(resources, machine)
        if never is not None:
            raise JobRefused(*never)
        planned = check_spec(spec, self.log_dir, check_url, allow_import=allow_import)
        assert planned.run_id is not None  # plan_run fixes it
        job = Job(
            job_id=secrets.token_hex(6),
            run_id=planned.run_id,
            state=JobState.QUEUED,
            priority=priority,
            resources=resources,
            spec=planned,
            submitted_at=time.time(),
        )
        try:
            self.store.add(job, max_queued=self.max_queued)
        except QueueLimit as exc:
            raise QueueFull(
                f"the queue holds {exc.queued} jobs, the most this scheduler takes ({self.max_queued}); wait for some "
                "to start or cancel some"
            ) from None
        except ActiveRun as exc:
            raise JobConflict(
                f"run {job.run_id!r} already has job {exc.job_id} queued or running; cancel it or wait for it"
            ) from None
        self._wake.set()
        return self._status(job)

    def job(self, job_id: str) -> Job:
        job = self.store.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}")
        return job

    def status(self, job_id: str) -> JobStatus:
        """The job with its run's progress (from the run's EvalLog, once it exists)."""
        return self._status(self.job(job_id))

    def _status(self, job: Job) -> JobStatus:
        return JobStatus(**dict(job), progress=run_progress(self.run_dir(job.run_id)))

    def queue(self) -> list[JobStatus]:
        """Running jobs (oldest first), then queued jobs in the order they will be served."""
        running = sorted(self.store.running(), key=lambda job: job.started_at or 0.0)
        return [self._status(job) for job in [*running, *self.store.queued()]]

    def jobs(self) -> list[Job]:
        """Every job this log dir has had, in submission order."""
        return self.store.all()

    def active_job(self, run: str) -> Job | None:
        """The queued or running job of run `run` (its id, or a unique prefix of an active job's run id), if any.
        Raises `JobConflict` when a prefix matches several."""
        active = [*self.store.running(), *self.store.queued()]
        exact = [job for job in active if job.run_id == run]
        matches = exact or [job for job in active if job.run_id.startswith(run)]
        if len(matches) > 1:
            runs = ", ".join(sorted(job.run_id for job in matches))
            raise JobConflict(f"run {run!r} is ambiguous among the active jobs' runs: {runs}")
        return matches[0] if matches else None

    def run_dir(self, run_id: str) -> Path:
        return self.log_dir / run_id

    def job_dir(self, job_id: str) -> Path:
        """Where a job's spec, stdout and stderr are written."""
        return self.log_dir / JOBS_DIR / job_id

    def wait(self, job_id: str, timeout: float | None = None) -> JobStatus:
        """The job's status once it is final, or when `timeout` seconds have passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                job = self.job(job_id)
                left = None if deadline is None else deadline - time.monotonic()
                if job.state.final or (left is not None and left <= 0):
                    break
                self._changed.wait(min(self.poll_interval, left) if left is not None else self.poll_interval)
        return self._status(job)

    # -- cancelling ----------------------------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, wait: float | None = None) -> JobStatus:
        """Cancel a job: a queued one at once; a running one gets SIGTERM to its process group (SIGKILL after the grace
        period), then its run is marked `cancelled` (resumable). `wait`: seconds to wait for a running job to end.
        Raises `JobConflict` when the job is already final."""
        with self._lock:
            job = self.job(job_id)
            if job.state.final:
                raise JobConflict(f"job {job_id} is already {job.state.value}")
            if job.state is JobState.QUEUED:
                self.store.finish(job_id, JobState.CANCELLED, "cancelled before it started", only_if=JobState.QUEUED)
                self._changed.notify_all()
                return self.status(job_id)
            self.store.request_cancel(job_id)
            running = self._running.get(job_id)
            if running is not None:
                running.cancel = True
        self._wake.set()
        return self.wait(job_id, wait) if wait else self.status(job_id)

    # -- restart reconciliation ----------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """Settle the jobs a previous scheduler left `running`: a process still alive (an orphan) is stopped (its
        group SIGTERM, then SIGKILL) and the job `aborted`; a process gone is `done` if its run is complete, else
        `aborted`. Resubmitting the spec resumes the run."""
        for job in self.store.running():
            if job.job_id in self._running:
                continue
            identity = self.store.process(job.job_id)
            orphan = identity is not None and alive(*identity)
            if orphan and identity is not None:
                logger.warning("stopping job %s (pid %d), left running by a previous scheduler", job.job_id, job.pid)
                self._stop_orphan(*identity)
            if self.cgroups is not None:  # its cgroup, if it had one, goes with it
                MemoryLimit(job.resources.ram_gb, self.cgroups.of(job.job_id)).close()
            if run_complete(self.run_dir(job.run_id)):
                self.store.finish(job.job_id, JobState.DONE, COMPLETED_UNWATCHED_MESSAGE, only_if=JobState.RUNNING)
            else:
                message = ORPHAN_MESSAGE if orphan else GONE_MESSAGE
                self.store.finish(job.job_id, JobState.ABORTED, message, only_if=JobState.RUNNING)

    def _stop_orphan(self, pid: int, created_at: float) -> None:
        signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while alive(pid, created_at) and time.monotonic() < deadline:
            time.sleep(0.05)
        kill_group_of(pid)
        deadline = time.monotonic() + self.grace_s
        while alive(pid, created_at) and time.monotonic() < deadline:
            time.sleep(0.05)

    # -- the scheduling thread -----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                self._watch()
                if not self._stopping:
                    self._admit()
            except Exception:
                logger.exception("job scheduler pass failed")
            with self._lock:
                if self._stopping and not self._running:
                    return
            self._wake.wait(self.poll_interval)

    def _watch(self) -> None:
        """Record the jobs that ended; stop those past their memory; signal the ones cancelled or stopped; SIGKILL
        those past the grace period."""
        now = time.monotonic()
        look = now - self._memory_looked >= MEMORY_LOOK_S
        if look:
            self._memory_looked = now
        with self._lock:
            for running in list(self._running.values()):
                code = running.popen.poll()
                if code is not None:
                    self._finish(running, code)
                    continue
                if look and not running.over_memory and running.memory.exceeded(running.popen.pid):
                    logger.warning("job %s went past its ram_gb %g GB: stopping it", running.job.job_id,
                                   running.job.resources.ram_gb)  # fmt: skip
                    running.over_memory = True
                    kill_group_of(running.popen.pid)  # at once: it holds memory others were promised
                    continue
                if self._stopping and self._terminate:
                    running.stopping = True
                pid = running.popen.pid
                if (running.cancel or running.stopping) and running.term_sent_at is None:
                    running.term_sent_at = time.monotonic()
                    signal_group(pid, signal.SIGTERM)
                elif (
                    running.term_sent_at is not None
                    and not running.killed
                    and time.monotonic() - running.term_sent_at > self.grace_s
                ):
                    running.killed = True
                    kill_group_of(pid)

    def _finish(self, running: _Running, code: int) -> None:
        job = running.job
        if running.term_sent_at is not None or running.over_memory:
            kill_group_of(running.popen.pid)  # whatever outlived its leader
        over_memory = running.over_memory or running.memory.oom_killed()
        running.memory.close()
        if over_memory:
            ended = Outcome(JobState.ABORTED, exceeded_message(job.resources.ram_gb))
            mark_run(self.run_dir(job.run_id), RunStatus.ABORTED, ended.message)
        else:
            ended = outcome(
                code,
                cancelled=running.cancel,
                stopping=running.stopping,
                stdout=running.job_dir / STDOUT_FILE,
                stderr=running.job_dir / STDERR_FILE,
                killed=running.killed,
            )
        if ended.state is JobState.CANCELLED:
            mark_run(self.run_dir(job.run_id), RunStatus.CANCELLED, CANCELLED_RUN_MESSAGE)
        self.store.finish(job.job_id, ended.state, ended.message, exit_code=code, executed_now=ended.executed_now)
        del self._running[job.job_id]
        logger.info("job %s (%s) %s: %s", job.job_id, job.run_id, ended.state.value, ended.message)
        self._changed.notify_all()

    def _admit(self) -> None:
        if not self.store.queued():
            return
        machine = self._probe()
        with self._lock:
            if self._stopping:
                return
            running = [r.placement for r in self._running.values()]
            admission = admit(self.store.queued(), running, machine)
            for job, reason in admission.refuse:
                self.store.finish(job.job_id, JobState.FAILED, reason, only_if=JobState.QUEUED)
            for job, gpu in admission.start:
                self._start(job, gpu, machine)
            if admission.refuse:
                self._changed.notify_all()

    def _start(self, job: Job, gpu: int | None, machine: Machine) -> None:
        # A job never calls the API back: it gets no token to read, log or leak (hylo.secret_env).
        env = without_secrets(os.environ if self._env is None else self._env)
        if machine.gpus and gpu is not None:  # a job sees only the GPU it was placed on ...
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        elif machine.gpus:  # ... and one that declared none sees none (and renders on EGL device 0)
            without_cuda_devices(env)
        job_dir = self.job_dir(job.job_id)
        ram_gb = job.resources.ram_gb
        memory = MemoryLimit(ram_gb, self.cgroups.make(job.job_id, int(ram_gb * GB)) if self.cgroups else None)
        try:
            popen = spawn(
                job_dir,
                job.spec.model_dump_json(indent=2),
                env=env,
                die_with_scheduler=self.die_with_scheduler,
                preexec=memory.preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            memory.close()
            self.store.finish(job.job_id, JobState.FAILED, f"could not start: {exc}", only_if=JobState.QUEUED)
            self._changed.notify_all()
            return
        self.store.mark_running(job.job_id, popen.pid, created(popen.pid), gpu)
        self._running[job.job_id] = _Running(job, popen, Placement(job.resources, gpu), job_dir, memory)
        logger.info("job %s (%s) started as pid %d", job.job_id, job.run_id, popen.pid)
        self._changed.notify_all()


def _own(path: Path) -> IO[str]:
    """Hold an exclusive lock on the log dir's lock file for this scheduler's life."""
    file = open(path, "a+")  # noqa: SIM115 - held open until close()
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        file.seek(0)
        holder = file.read().strip()
        file.close()
        raise SchedulerBusy(
            f"another job scheduler{f' (pid {holder})' if holder else ''} owns {path.parent}; stop it first"
        ) from None
    file.truncate(0)
    file.write(str(os.getpid()))
    file.flush()
    return file
