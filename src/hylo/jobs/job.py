"""A job: one evaluation spec with its scheduling fields, its state and, while its run exists, the run's progress."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from hylo.eval.spec import EvalSpec
from hylo.evallog.run_status import RunStatus


class JobState(StrEnum):
    """Where a job is. `queued` and `running` are active; the other four are final.

    - `done`: `hylo eval` exited 0 (or 3 with `strict`): the run is complete
    - `failed`: bad input (exit 2), or the process ended otherwise (another code, a signal); the message says how
    - `aborted`: the run stopped before its end (exit 1, a scheduler that stopped or restarted); resumable
    - `cancelled`: cancelled by request; a run that had started is resumable
    """

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABORTED = "aborted"

    @property
    def final(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)


class Resources(BaseModel):
    """What a job declares it uses: admission reserves exactly this while it runs."""

    model_config = ConfigDict(frozen=True)

    cpus: int
    ram_gb: float
    gpu_mem_gb: float = 0.0
    exclusive_gpu: bool = False

    @property
    def needs_gpu(self) -> bool:
        return self.gpu_mem_gb > 0 or self.exclusive_gpu


class RunProgress(BaseModel):
    """The run's own account, read from its EvalLog: its status, episodes done of planned, final statuses."""

    status: RunStatus
    message: str | None
    n_done: int
    n_planned: int
    status_counts: dict[str, int]


class Job(BaseModel):
    """A job as the queue stores it. `spec` is the planned spec (run id fixed, log dir the scheduler's); `gpu` is the
    GPU index it was placed on; `executed_now` is how many episodes its process ran (the rest were in the log)."""

    job_id: str
    run_id: str
    state: JobState
    message: str = ""
    priority: int = 0
    resources: Resources
    spec: EvalSpec
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    executed_now: int | None = None
    pid: int | None = None
    gpu: int | None = None
    cancel_requested: bool = False


class JobStatus(Job):
    """A job and its run's progress (None until the run's EvalLog exists)."""

    progress: RunProgress | None = None
