"""The EvalLog writer: commits finished episodes on a thread of its own, so the episode loop never waits for SQLite."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from hylo.core.errors import HyloError
from hylo.eval.recording import serialize
from hylo.eval.store import EpisodeRow, EvalLog


class RunAborted(HyloError):
    """A run that started and could not go on (its EvalLog cannot be written, ...); re-running resumes it."""


COMMIT_WINDOW_S = 0.25
"""How long the EvalLog writer gathers finished episodes into one transaction: a killed run loses at most this much
work (re-run on resume), and short episodes do not pay a commit each."""


class EvalLogWriter:
    """Commits finished episodes to the EvalLog on a thread of its own, so that the episode loop never waits for
    SQLite. Episodes that finish within `window` seconds of each other share a transaction. A crash loses at most the
    episodes not yet committed, which are not in the log and so are re-run on resume; a failed write stops the run
    (`check()` raises)."""

    def __init__(self, log: EvalLog, window: float | None = None) -> None:
        self.log = log
        self.window = COMMIT_WINDOW_S if window is None else window
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[tuple[EpisodeRow, list[dict[str, Any]] | list[bytes]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._work, name="hylo-evallog", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]  # wait for one, then gather what finishes within the window
            deadline = time.monotonic() + self.window
            while batch[-1] is not None and (remaining := deadline - time.monotonic()) > 0:
                try:
                    batch.append(self._queue.get(timeout=remaining))
                except queue.Empty:
                    break
            stop = batch[-1] is None
            items = [(row, _lines(trace)) for row, trace in (item for item in batch if item is not None)]
            if items and self.error is None:
                try:
                    self.log.record_many(items)
                except Exception:  # one bad item must not cost the others: commit them one by one
                    for item in items:
                        try:
                            self.log.record_many([item])
                        except BaseException as exc:
                            self.error = exc
                            break

    def put(self, row: EpisodeRow, trace: list[dict[str, Any]] | list[bytes]) -> None:
        """Queue a finished attempt with its trace (event field dicts, or JSON lines serialized already)."""
        self.check()
        self._queue.put((row, trace))

    def check(self) -> None:
        if self.error is not None:
            raise RunAborted(f"could not write the EvalLog at {self.log.run_dir}: {self.error!r}") from self.error

    def close(self) -> None:
        """Wait until every queued episode is committed."""
        self._queue.put(None)
        self._thread.join()
        self.check()


def _lines(trace: list[dict[str, Any]] | list[bytes]) -> list[bytes]:
    if trace and isinstance(trace[0], dict):
        return serialize(trace)
    return trace  # type: ignore[return-value]
