"""A job's view of its run: progress read from the run's EvalLog, and the run marked cancelled."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from hylo.core.errors import HyloError
from hylo.core.status import EpisodeStatus
from hylo.evallog.logdir import FILENAME
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EvalLog
from hylo.jobs.job import RunProgress

logger = logging.getLogger(__name__)


def run_progress(run_dir: Path) -> RunProgress | None:
    """The run's status, episodes done of planned and final statuses; None while it has no (readable) EvalLog."""
    if not (run_dir / FILENAME).is_file():
        return None
    try:
        with EvalLog.open(run_dir) as log:
            info = log.info()  # its counts are counted in SQL: a status costs the same whatever the run's size
    except (HyloError, sqlite3.Error, TypeError):  # being created: no tables (or no run row) yet
        return None
    return RunProgress(
        status=info.status,
        message=info.message,
        n_done=info.n_done,
        n_planned=info.n_planned,
        status_counts={status.value: info.status_counts.get(status.value, 0) for status in EpisodeStatus},
    )


def run_complete(run_dir: Path) -> bool:
    progress = run_progress(run_dir)
    return progress is not None and progress.status == RunStatus.COMPLETE


def mark_run(run_dir: Path, status: RunStatus, message: str) -> None:
    """Set the run's status in its EvalLog, when the run exists."""
    if not (run_dir / FILENAME).is_file():
        return
    try:
        with EvalLog.open(run_dir) as log:
            log.update_run(status=status, message=message)
    except (HyloError, sqlite3.Error) as exc:
        logger.warning("could not mark run %s %s: %r", run_dir.name, status, exc)
