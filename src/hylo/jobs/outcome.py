"""How a job's process ended, in job terms: its `hylo eval` exit code (or signal) mapped onto a final state."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path

from hylo.exits import EXIT_ABORTED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_STRICT
from hylo.jobs.job import JobState

EXIT_DONE = (0, EXIT_STRICT)
"""A complete run (with `--strict`, some episode of it was error or infra_invalid)."""

CANCELLED_RUN_MESSAGE = "cancelled by request; resubmit the same spec to resume (its finished episodes are kept)"
STOPPED_MESSAGE = "stopped with the scheduler; resubmit the same spec to resume"


@dataclass(frozen=True)
class Outcome:
    state: JobState
    message: str
    executed_now: int | None = None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def last_error_line(stderr: Path, limit: int = 65536) -> str:
    """The last `hylo: error: ...` line of a job's stderr, else its last non-empty line ('' when there is none)."""
    try:
        with open(stderr, "rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - limit))
            tail = file.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.replace("\r", "\n").split("\n") if line.strip()]
    errors = [line for line in lines if line.startswith("hylo: error:")]
    return (errors or lines or [""])[-1]


def result_json(stdout: Path) -> dict[str, object] | None:
    """The one JSON object `hylo eval --json` printed, or None."""
    try:
        text = stdout.read_text(errors="replace").strip()
        data = json.loads(text.splitlines()[-1]) if text else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def outcome(
    returncode: int, *, cancelled: bool, stopping: bool, stdout: Path, stderr: Path, killed: bool = False
) -> Outcome:
    """The final state for exit code `returncode` (negative: the signal that killed it). `cancelled`: a cancel was
    requested; `stopping`: the scheduler stopped it; `killed`: it was SIGKILLed after the grace period."""
    if returncode in EXIT_DONE:
        result = result_json(stdout) or {}
        executed = result.get("executed_now")
        episodes = result.get("episodes")
        executed_now = executed if isinstance(executed, int) else None
        if isinstance(episodes, list) and executed_now is not None:
            return Outcome(JobState.DONE, f"complete: {len(episodes)} episodes ({executed_now} run now)", executed_now)
        return Outcome(JobState.DONE, "complete", executed_now)
    stopped_by_us = returncode in (EXIT_INTERRUPTED, -signal.SIGTERM, -signal.SIGINT) or (
        killed and returncode == -signal.SIGKILL
    )
    if cancelled and stopped_by_us:
        return Outcome(JobState.CANCELLED, CANCELLED_RUN_MESSAGE)
    if stopping and stopped_by_us:
        return Outcome(JobState.ABORTED, STOPPED_MESSAGE)
    line = last_error_line(stderr)
    if returncode == EXIT_ABORTED:
        return Outcome(JobState.ABORTED, line or "the run aborted (exit 1); fix the cause and resubmit to resume")
    if returncode == EXIT_BAD_INPUT:
        return Outcome(JobState.FAILED, line or "bad input (exit 2)")
    how = f"killed by {_signal_name(-returncode)}" if returncode < 0 else f"exited with code {returncode}"
    return Outcome(JobState.FAILED, f"{how}: {line}" if line else how)
