"""A job's process: `hylo eval --spec FILE --json` in its own process group, dying with the scheduler's process
where Linux allows it (PR_SET_PDEATHSIG, `hylo.core.child`), recognised later by pid and creation time. What a job
writes (its files here, its run, its videos) is its user's alone (`JOB_UMASK`): a run may hold what the agent saw."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil

from hylo.core.child import kill_group, pdeathsig_available, popen, signal_group

SPEC_FILE = "spec.json"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"

JOB_UMASK = 0o077
"""A job's process and whatever it starts create directories 0700 and files 0600."""

__all__ = ["alive", "created", "kill_group_of", "pdeathsig_available", "signal_group", "spawn"]


def spawn(
    job_dir: Path,
    spec_json: str,
    *,
    env: Mapping[str, str],
    die_with_scheduler: bool = True,
    python: str = sys.executable,
    preexec: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Write the spec to `job_dir` and start `hylo eval --spec` on it, stdout and stderr to files there; with
    `die_with_scheduler`, it gets SIGTERM when this process dies, even by SIGKILL (Linux). `preexec` runs in the job's
    process before it runs anything (its memory limit, `hylo.jobs.memory`)."""
    job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    spec_file = job_dir / SPEC_FILE
    with open(spec_file, "w", opener=_private) as spec:
        spec.write(spec_json)
    with (
        open(job_dir / STDOUT_FILE, "wb", opener=_private) as stdout,
        open(job_dir / STDERR_FILE, "wb", opener=_private) as stderr,
    ):
        return popen(
            [python, "-m", "hylo", "eval", "--spec", str(spec_file), "--json"],
            die_with_parent=die_with_scheduler,
            death_signal=signal.SIGTERM,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=job_dir,
            env=dict(env),
            start_new_session=True,
            umask=JOB_UMASK,
            preexec_fn=preexec,
        )


def _private(path: str, flags: int) -> int:
    """`open`'s opener for a file of the job's: made 0600 (an existing one keeps its mode)."""
    return os.open(path, flags, 0o600)


def created(pid: int) -> float:
    """The creation time of process `pid` (0.0 when it is already gone)."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def alive(pid: int, created_at: float) -> bool:
    """Whether process `pid` is still the one created at `created_at`, and not a zombie."""
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - created_at) > 0.05:
            return False  # the pid was reused
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_group_of(pid: int) -> None:
    """SIGKILL whatever is left in the group led by `pid` (workers that outlived their leader)."""
    kill_group(pid)
