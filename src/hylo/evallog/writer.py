"""The EvalLog writer: commits finished episodes on a thread of its own, so the episode loop never waits for SQLite."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

from hylo.core.errors import HyloError
from hylo.evallog.recording import TraceEntry, serialize
from hylo.evallog.store import EpisodeRow, EvalLog


class RunAborted(HyloError):
    """A run that started and could not go on (its EvalLog cannot be written, ...); re-running resumes it."""


COMMIT_WINDOW_S = 0.25
"""How long the EvalLog writer gathers finished episodes into one transaction: a killed run loses at most this much
work (re-run on resume), and short episodes do not pay a commit each."""


class EvalLogWriter:
    """Commits finished episodes to the EvalLog on a thread of its own, so that the episode loop never waits for
    SQLite. The episodes that finish within one `window` share a transaction. A crash loses at most the
    episodes not yet committed, which are not in the log and so are re-run on resume; a failed write stops the run
    (`check()` raises)."""

    def __init__(self, log: EvalLog, window: float | None = None) -> None:
        self.log = log
        self.window = COMMIT_WINDOW_S if window is None else window
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[tuple[EpisodeRow, Trace] | None] = queue.SimpleQueue()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._work, name="hylo-evallog", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        """Every `window` seconds (at once when closing), commit what was queued meanwhile. Woken by its own timer,
        not by `put`: queueing an episode costs the loop's thread an append, not a thread switch. (Without a window,
        each episode is committed as it comes.)"""
        closing = False
        while not closing:
            batch: list[tuple[EpisodeRow, Trace] | None] = []
            if self.window > 0:
                self._closing.wait(self.window)
            else:
                batch.append(self._queue.get())
            closing = self._closing.is_set()  # before draining: whatever was queued before close() is drained
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            closing = closing or None in batch
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

    def put(self, row: EpisodeRow, trace: Trace) -> None:
        """Queue a finished attempt with its trace (as the trace buffer took it, or JSON lines serialized already)."""
        self.check()
        self._queue.put((row, trace))

    def check(self) -> None:
        if self.error is not None:
            raise RunAborted(f"could not write the EvalLog at {self.log.run_dir}: {self.error!r}") from self.error

    def close(self) -> None:
        """Wait until every queued episode is committed."""
        self._closing.set()
        self._queue.put(None)
        self._thread.join()
        self.check()


Trace = Sequence[TraceEntry] | Sequence[bytes]
"""An episode's trace as the writer takes it: as the trace buffer took it, or JSON lines serialized already."""


def _lines(trace: Trace) -> Sequence[bytes]:
    if trace and not isinstance(trace[0], bytes):
        return serialize(trace)  # type: ignore[arg-type]
    return trace  # type: ignore[return-value]
