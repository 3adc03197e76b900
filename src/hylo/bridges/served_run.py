"""The EvalLog of one bridge process: every episode it served, recorded with `mode=served`.

A served run has no plan — the harness decides which episodes come — so `n_planned` grows with the episodes that
started, and the run is `complete` when the bridge stops. Episodes arrive from several connections at once; the log
is written under one lock.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hylo.evallog.logdir import FILENAME
from hylo.evallog.provenance import package_versions
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EpisodeRow, EvalLog

log = logging.getLogger(__name__)

SERVED_BENCHMARK = "vla-eval"
SERVED_SPLIT = "served"


def default_run_id(agent: str) -> str:
    """`served-<agent>-<UTC timestamp>`, with the agent's import path made safe for a directory name."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in agent).strip("-") or "agent"
    return f"served-{safe}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


class ServedRun:
    """One run directory `<log_dir>/<run_id>` holding the EvalLog of everything the bridge served."""

    def __init__(self, log_dir: Path, *, run_id: str, agent: str, spec: dict[str, Any]) -> None:
        self.run_id = run_id
        self.run_dir = log_dir.resolve() / run_id
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        self._started = 0
        self._closed = False
        self._made_dir = not self.run_dir.exists()
        self.log = EvalLog.create(
            self.run_dir,
            run_id=run_id,
            benchmark=SERVED_BENCHMARK,
            split=SERVED_SPLIT,
            agent=agent,
            digest="served",
            spec=spec,
            n_planned=0,
            versions=package_versions(),
            mode="served",
        )

    def episode_id(self, task: str, index: int) -> str:
        """A fresh id for an episode of `task` (the harness's episode index): `<task>/<index>#<serial>`, unique
        in the run even when two harnesses send the same task and index."""
        with self._lock:
            serial = next(self._serial)
            self._started += 1
        return f"{task}/{index:04d}#{serial}"

    def record(self, row: EpisodeRow, trace: Sequence[bytes]) -> None:
        """Commit one finished episode with its trace; raises only when the episode was not committed."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"served run {self.run_id!r} is closed")
            self.log.record(row, trace)
            try:
                self.log.update_run(n_planned=max(self._started, self.log.n_done()))
            except Exception as exc:  # the episode is in; the count is refreshed with the next one, or at close
                log.warning("served run %s: updating n_planned failed: %r", self.run_id, exc)

    def close(self, message: str = "") -> None:
        """Mark the run complete (the bridge stopped) and close the log; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.log.update_run(status=RunStatus.COMPLETE, n_planned=self.log.n_done(), message=message)
            self.log.close()

    def discard(self) -> None:
        """Remove a run in which nothing was recorded (the bridge never served: its port could not be bound), so
        that a failed start leaves nothing behind: the EvalLog's files, and the directory if this run made it. A
        run with episodes is closed as `close` closes it."""
        with self._lock:
            empty = not self._closed and not self._started and not self.log.n_done()
            if empty:
                self._closed = True
                self.log.close()
        if not empty:
            self.close()
            return
        for suffix in ("", "-wal", "-shm"):
            (self.run_dir / f"{FILENAME}{suffix}").unlink(missing_ok=True)
        if self._made_dir:
            try:
                self.run_dir.rmdir()
            except OSError as exc:  # something else was put there meanwhile: leave it
                log.warning("served run %s: leaving %s: %s", self.run_id, self.run_dir, exc)
