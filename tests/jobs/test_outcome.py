"""How a job's `hylo eval` exit code (or the signal that killed it) becomes its final state and message."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from hylo.jobs import JobState
from hylo.jobs.outcome import last_error_line, outcome


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    stdout.write_text(json.dumps({"run_id": "r", "executed_now": 2, "episodes": [{}, {}, {}]}) + "\n")
    stderr.write_text("progress 1/3\rprogress 3/3\nhylo: error: run r aborted: 3 infra failures; re-run to resume\n\n")
    return stdout, stderr


@pytest.mark.parametrize(
    ("code", "cancelled", "stopping", "killed", "state", "says"),
    [
        (0, False, False, False, JobState.DONE, "3 episodes (2 run now)"),
        (3, False, False, False, JobState.DONE, "3 episodes"),
        (0, True, False, False, JobState.DONE, "complete"),  # it finished before the cancel reached it
        (1, False, False, False, JobState.ABORTED, "hylo: error: run r aborted"),
        (2, False, False, False, JobState.FAILED, "hylo: error:"),
        (130, True, False, False, JobState.CANCELLED, "resubmit the same spec to resume"),
        (-signal.SIGTERM, True, False, False, JobState.CANCELLED, "resume"),
        (-signal.SIGINT, True, False, False, JobState.CANCELLED, "resume"),
        (-signal.SIGKILL, True, False, True, JobState.CANCELLED, "resume"),
        (130, False, True, False, JobState.ABORTED, "stopped with the scheduler"),
        (130, False, False, False, JobState.FAILED, "exited with code 130"),
        (-signal.SIGKILL, False, False, False, JobState.FAILED, "killed by SIGKILL"),
        (-signal.SIGSEGV, True, False, False, JobState.FAILED, "killed by SIGSEGV"),
        (7, False, False, False, JobState.FAILED, "exited with code 7"),
    ],
)
def test_exit_codes_map_onto_job_states(files, code, cancelled, stopping, killed, state, says):
    stdout, stderr = files
    ended = outcome(code, cancelled=cancelled, stopping=stopping, stdout=stdout, stderr=stderr, killed=killed)
    assert ended.state is state
    assert says in ended.message


def test_the_message_is_the_error_line_else_the_last_line(tmp_path: Path):
    stderr = tmp_path / "stderr.log"
    stderr.write_text("hylo: error: first\nsomething after\n")
    assert last_error_line(stderr) == "hylo: error: first"
    stderr.write_text("Traceback ...\nRuntimeError: boom\n")
    assert last_error_line(stderr) == "RuntimeError: boom"
    assert last_error_line(tmp_path / "missing.log") == ""
