"""Restart reconciliation with real processes: a scheduler is SIGKILLed while its job runs, and a new scheduler on
the same log dir settles the job it left `running`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
from job_specs import quick, slow

from hylo.eval.spec import EvalSpec
from hylo.evallog.store import EvalLog
from hylo.jobs import JobScheduler, JobState

SCRIPT = Path(__file__).with_name("scheduler_proc.py")


def killed_scheduler(log_dir: Path, spec: EvalSpec, *, die_with_scheduler: bool, episodes: int) -> dict:
    """Start a scheduler process with one job, SIGKILL it once the job has run `episodes` episodes; the job's id,
    pid and run id."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(log_dir), "1" if die_with_scheduler else "0", str(episodes),
         spec.model_dump_json(exclude_unset=True)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        reported = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    return reported


def wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        assert time.monotonic() < deadline, f"job process {pid} is still alive"
        time.sleep(0.05)


def is_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_job_whose_process_died_with_its_scheduler_is_aborted_and_resumable(tmp_path: Path):
    log_dir = tmp_path / "runs"
    job = killed_scheduler(log_dir, slow(), die_with_scheduler=True, episodes=1)
    wait_gone(job["pid"])  # the death signal stopped it with its scheduler
    with JobScheduler(log_dir) as scheduler:
        status = scheduler.status(job["job_id"])
        assert status.state is JobState.ABORTED
        assert status.message == "its process was gone when the scheduler restarted; resubmit the same spec to resume"
        assert status.progress is not None and 1 <= status.progress.n_done < 12
        again = scheduler.submit(slow())
        assert again.run_id == job["run_id"] and again.state is JobState.QUEUED


def test_an_orphan_job_process_is_reaped_by_the_next_scheduler(tmp_path: Path):
    log_dir = tmp_path / "runs"
    job = killed_scheduler(log_dir, slow(), die_with_scheduler=False, episodes=1)
    assert is_running(job["pid"])  # nothing stopped it: an orphan
    with JobScheduler(log_dir, grace_s=10) as scheduler:
        status = scheduler.status(job["job_id"])
        assert not is_running(job["pid"])
    assert status.state is JobState.ABORTED and "outlived" in status.message and "resume" in status.message
    with EvalLog.open(log_dir / job["run_id"]) as log:
        assert log.info().status in ("interrupted", "stopped")  # the run knows it did not finish


def test_a_job_that_completed_while_no_scheduler_watched_is_done(tmp_path: Path):
    log_dir = tmp_path / "runs"
    job = killed_scheduler(log_dir, quick(episodes=20), die_with_scheduler=False, episodes=0)
    wait_gone(job["pid"])  # it finished on its own
    with JobScheduler(log_dir) as scheduler:
        status = scheduler.status(job["job_id"])
    assert status.state is JobState.DONE
    assert status.progress is not None and status.progress.status == "complete" and status.progress.n_done == 20
