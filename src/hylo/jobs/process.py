"""A job's process: `hylo eval --spec FILE --json` in its own process group, dying with the scheduler's process
where Linux allows it (PR_SET_PDEATHSIG, `hylo.core.child`), recognised later by pid and creation time."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import psutil

from hylo.core.child import kill_group, pdeathsig_available, popen, signal_group

SPEC_FILE = "spec.json"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"

__all__ = ["alive", "created", "kill_group_of", "pdeathsig_available", "signal_group", "spawn"]


def spawn(
    job_dir: Path,
    spec_json: str,
    *,
    env: Mapping[str, str],
    die_with_scheduler: bool = True,
    python: str = sys.executable,
) -> subprocess.Popen[bytes]:
    """Write the spec to `job_dir` and start `hylo eval --spec` on it, stdout and stderr to files there; with
    `die_with_scheduler`, it gets SIGTERM when this process dies, even by SIGKILL (Linux)."""
    job_dir.mkdir(parents=True, exist_ok=True)
    spec_file = job_dir / SPEC_FILE
    spec_file.write_text(spec_json)
    with open(job_dir / STDOUT_FILE, "wb") as stdout, open(job_dir / STDERR_FILE, "wb") as stderr:
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
        )


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
