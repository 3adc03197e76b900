"""The durable queue: every job, whatever its state, in `<log_dir>/jobs.sqlite` (SQLite, WAL).

The queue survives the scheduler: queued jobs wait for the next one, running jobs are reconciled by it. Jobs are
served by priority (higher first), then in submission order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hylo.core.errors import HyloError
from hylo.eval.spec import EvalSpec
from hylo.evallog.logdir import JOBS_DB
from hylo.jobs.job import Job, JobState, Resources

FILENAME = JOBS_DB
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    spec TEXT NOT NULL,
    priority INTEGER NOT NULL,
    cpus INTEGER NOT NULL,
    ram_gb REAL NOT NULL,
    gpu_mem_gb REAL NOT NULL,
    exclusive_gpu INTEGER NOT NULL,
    state TEXT NOT NULL,
    message TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,
    executed_now INTEGER,
    pid INTEGER,
    pid_created REAL,
    gpu INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, priority DESC, seq);
CREATE INDEX IF NOT EXISTS jobs_run ON jobs (run_id);
"""

_COLUMNS = (
    "job_id, run_id, spec, priority, cpus, ram_gb, gpu_mem_gb, exclusive_gpu, state, message, submitted_at, "
    "started_at, ended_at, exit_code, executed_now, pid, gpu, cancel_requested"
)
_SERVED = "ORDER BY priority DESC, seq"
_ACTIVE = (JobState.QUEUED.value, JobState.RUNNING.value)


class JobStore:
    """The jobs table. Safe to share between threads (one connection behind a lock)."""

    def __init__(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.path = log_dir / FILENAME
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.executescript(_SCHEMA)
        self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if int(row[0]) != SCHEMA_VERSION:
            self._conn.close()
            raise HyloError(f"{self.path} has job queue schema {row[0]}, this hylo reads {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _select(self, where: str, args: Sequence[Any] = ()) -> list[Job]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM jobs {where}", args).fetchall()
        return [_job(row) for row in rows]

    # -- reading -------------------------------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        found = self._select("WHERE job_id = ?", (job_id,))
        return found[0] if found else None

    def queued(self) -> list[Job]:
        """Queued jobs in the order they will be served."""
        return self._select(f"WHERE state = ? {_SERVED}", (JobState.QUEUED.value,))

    def running(self) -> list[Job]:
        return self._select(f"WHERE state = ? {_SERVED}", (JobState.RUNNING.value,))

    def all(self) -> list[Job]:
        """Every job, in submission order."""
        return self._select("ORDER BY seq")

    def for_run(self, run_id: str) -> list[Job]:
        """The jobs of one run, in submission order."""
        return self._select("WHERE run_id = ? ORDER BY seq", (run_id,))

    def process(self, job_id: str) -> tuple[int, float] | None:
        """The pid and process creation time a running job was started with."""
        with self._lock:
            row = self._conn.execute("SELECT pid, pid_created FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None or row[0] is None or row[1] is None:
            return None
        return int(row[0]), float(row[1])

    # -- writing -------------------------------------------------------------------------------------------------------

    def add(self, job: Job, *, max_queued: int | None = None) -> Job:
        """Queue a job, unless its run already has an active one (raises `ActiveRun` with that job's id) or
        `max_queued` jobs are queued already (raises `QueueLimit`)."""
        with self._transaction() as conn:
            if max_queued is not None:
                (queued,) = conn.execute(
                    "SELECT COUNT(*) FROM jobs WHERE state = ?", (JobState.QUEUED.value,)
                ).fetchone()
                if queued >= max_queued:
                    raise QueueLimit(queued)
            active = conn.execute(
                "SELECT job_id FROM jobs WHERE run_id = ? AND state IN (?, ?)", (job.run_id, *_ACTIVE)
            ).fetchone()
            if active is not None:
                raise ActiveRun(active[0])
            conn.execute(
                "INSERT INTO jobs (job_id, run_id, spec, priority, cpus, ram_gb, gpu_mem_gb, exclusive_gpu, state, "
                "message, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    job.job_id,
                    job.run_id,
                    job.spec.model_dump_json(),
                    job.priority,
                    job.resources.cpus,
                    job.resources.ram_gb,
                    job.resources.gpu_mem_gb,
                    int(job.resources.exclusive_gpu),
                    job.state.value,
                    job.message,
                    job.submitted_at,
                ),
            )
        return job

    def mark_running(self, job_id: str, pid: int, pid_created: float, gpu: int | None) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE jobs SET state = ?, started_at = ?, pid = ?, pid_created = ?, gpu = ? WHERE job_id = ?",
                (JobState.RUNNING.value, time.time(), pid, pid_created, gpu, job_id),
            )

    def request_cancel(self, job_id: str) -> None:
        with self._transaction() as conn:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE job_id = ?", (job_id,))

    def finish(
        self,
        job_id: str,
        state: JobState,
        message: str,
        *,
        exit_code: int | None = None,
        executed_now: int | None = None,
        only_if: JobState | None = None,
    ) -> bool:
        """Put a job in a final state; with `only_if`, only when it is still in that state. Whether it changed."""
        where, args = ("WHERE job_id = ?", [job_id])
        if only_if is not None:
            where += " AND state = ?"
            args.append(only_if.value)
        with self._transaction() as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET state = ?, message = ?, exit_code = ?, executed_now = ?, ended_at = ? {where}",
                [state.value, message, exit_code, executed_now, time.time(), *args],
            )
        return cursor.rowcount > 0


class QueueLimit(HyloError):
    """The queue is full: `queued` jobs wait already."""

    def __init__(self, queued: int) -> None:
        super().__init__(f"{queued} jobs queued")
        self.queued = queued


class ActiveRun(HyloError):
    """The run already has a queued or running job; `job_id` names it."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


def _job(row: Sequence[Any]) -> Job:
    (job_id, run_id, spec, priority, cpus, ram_gb, gpu_mem_gb, exclusive_gpu, state, message, submitted_at) = row[:11]
    started_at, ended_at, exit_code, executed_now, pid, gpu, cancel_requested = row[11:]
    return Job(
        job_id=job_id,
        run_id=run_id,
        state=JobState(state),
        message=message,
        priority=priority,
        resources=Resources(cpus=cpus, ram_gb=ram_gb, gpu_mem_gb=gpu_mem_gb, exclusive_gpu=bool(exclusive_gpu)),
        spec=EvalSpec.model_validate(json.loads(spec)),
        submitted_at=submitted_at,
        started_at=started_at,
        ended_at=ended_at,
        exit_code=exit_code,
        executed_now=executed_now,
        pid=pid,
        gpu=gpu,
        cancel_requested=bool(cancel_requested),
    )
