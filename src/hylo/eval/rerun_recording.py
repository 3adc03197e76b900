"""`hylo eval --rerun FILE.rrd`: a run's episodes written to a Rerun recording while the run goes on.

The runner hands each finished episode (its row and trace, `Evaluation.on_result`) to `RerunRecorder.put`, which
only queues it: a thread of the recorder's own turns the trace into Rerun columns, decodes the episode's video (when
the run records one) and writes them (`hylo.evallog.rrd`). The same holds for every backend: episodes run inline, in
worker processes or in Ray actors all come back to the runner, in this process, with their trace, and their videos
are in the run's directory. A recording is output, not spec: it never enters the run's spec, digest or results.

The file is opened when the first episode reaches the writer, not before: a run refused before it starts (a log
directory holding a run of other code, another configuration under its run id) leaves no file behind, and a file
already at the path is left as it was. A run that started without an episode to run closes with an empty recording.

The queue is bounded (`capacity` episodes). When the writer is behind, what costs it most goes first: an episode put
while half the queue or more waits is written without its camera frames (`frames_dropped` counts them); an episode
put while the queue is full is not written at all (`episodes_dropped`). The loop never waits for the recording.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hylo.evallog.recording import TraceEntry
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.rrd import RrdWriter, check_rrd_path, events_of, video_frames

logger = logging.getLogger(__name__)

DEFAULT_CAPACITY = 16
"""How many finished episodes wait for the recording's writer at most (each holds its trace)."""


@dataclass(frozen=True, slots=True)
class _Episode:
    row: EpisodeRow
    trace: Sequence[TraceEntry] | Sequence[bytes]
    frames: bool


@dataclass(frozen=True, slots=True)
class _Close:
    """The queue's last item: close the file, or with no episode written, make it only when `keep_empty`."""

    keep_empty: bool


@dataclass(frozen=True, slots=True)
class RecordingSummary:
    """What a live recording holds and what it dropped: episodes, steps and frames written, frames and episodes
    dropped while the writer was behind, and the first episode that could not be written, if one could not."""

    path: Path
    episodes: int
    steps: int
    frames: int
    frames_dropped: int
    episodes_dropped: int
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "episodes": self.episodes, "steps": self.steps, "frames": self.frames,
                "frames_dropped": self.frames_dropped, "episodes_dropped": self.episodes_dropped,
                "error": self.error}  # fmt: skip

    def line(self) -> str:
        """The summary in one line, as `hylo eval` ends with it."""
        text = f"rerun: {self.path} ({self.episodes} episodes, {self.steps} steps, {self.frames} frames)"
        if self.frames_dropped or self.episodes_dropped:
            dropped = f"{self.frames_dropped} frames, {self.episodes_dropped} episodes"
            text += f"; dropped while the writer was behind: {dropped}"
        if self.error is not None:
            text += f"; not every episode could be recorded: {self.error}"
        return text


class RerunRecorder:
    """Writes a run's finished episodes to a `.rrd` file on a thread of its own (`start`, `put`, `close`)."""

    def __init__(self, path: Path, run_dir: Path, run_id: str, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.path = path
        self.run_dir = run_dir
        self.run_id = run_id
        self.capacity = capacity
        self._queue: queue.Queue[_Episode | _Close] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.episodes = self.steps = self.frames = 0
        self.frames_dropped = self.episodes_dropped = 0
        self.error: str | None = None

    def start(self) -> None:
        """Start the writer (episodes put before are written first), which opens the file with the first episode;
        refuses a path that cannot be written, before any episode runs."""
        check_rrd_path(self.path)
        self._thread = threading.Thread(target=self._write_all, name="rerun-recording", daemon=True)
        self._thread.start()

    def put(self, row: EpisodeRow, trace: Sequence[TraceEntry] | Sequence[bytes]) -> None:
        """Queue a finished episode, never waiting: without its frames when the writer is behind, not at all when
        the queue is full."""
        frames = self._queue.qsize() * 2 < self.capacity
        try:
            self._queue.put_nowait(_Episode(row, trace, frames))
        except queue.Full:
            with self._lock:
                self.episodes_dropped += 1
            return
        if not frames and row.video is not None:
            with self._lock:
                self.frames_dropped += row.steps + 1  # one frame per step, and the reset's

    def close(self, *, keep_empty: bool = True) -> RecordingSummary:
        """Write what is queued, close the file and say what the recording holds. With no episode put, the file is
        written empty when `keep_empty` (a run that started with nothing left to run), else never made (a run
        refused before it started); a recorder never started makes none either way."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_Close(keep_empty))  # after every queued episode
            thread.join()
        return RecordingSummary(
            self.path, self.episodes, self.steps, self.frames, self.frames_dropped, self.episodes_dropped, self.error
        )

    def _write_all(self) -> None:
        """Write each queued episode, the file opened with the first; close it at the queue's `_Close`."""
        writer: RrdWriter | None = None
        try:
            while isinstance(item := self._queue.get(), _Episode):
                writer = writer or self._open()
                if writer is not None:
                    self._write(writer, item)
            if writer is None and item.keep_empty and self.error is None:
                writer = self._open()
        finally:
            try:
                if writer is not None:
                    writer.close()
            except Exception as exc:  # the run's results stand; the summary says the recording is incomplete
                self.error = self.error or f"{type(exc).__name__}: {exc}"

    def _open(self) -> RrdWriter | None:
        """The recording's writer, or None when its file cannot be made (`error` says why; no episode is written)."""
        if self.error is not None:
            return None
        try:
            return RrdWriter(self.path, recording_id=self.run_id)
        except Exception as exc:  # a recording is a view of the run, never its end
            logger.warning("could not open the recording %s: %r", self.path, exc)
            self.error = f"{type(exc).__name__}: {exc}"
            return None

    def _write(self, writer: RrdWriter, item: _Episode) -> None:
        try:
            frames = video_frames(self.run_dir, item.row) if item.frames else iter(())
            written = writer.write_episode(item.row, events_of(item.trace), frames)
        except Exception as exc:  # a recording is a view of the run, never its end
            logger.warning("could not record %s to %s: %r", item.row.episode_id, self.path, exc)
            self.error = self.error or f"{item.row.episode_id}: {type(exc).__name__}: {exc}"
            return
        self.episodes += 1
        self.steps += written.steps
        self.frames += written.frames
