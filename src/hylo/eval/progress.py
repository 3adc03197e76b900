"""The live progress bar of `hylo eval` (on stderr): episodes done, success so far, episodes/s and ETA."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from hylo.eval.runner import Progress


class ProgressBar:
    def __init__(self, console: Console, title: str) -> None:
        self._progress = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("success {task.fields[success]}"),
            TextColumn("{task.fields[rate]} ep/s"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(title, total=None, success="—", rate="—")
        self._start = time.perf_counter()
        self._started = False

    def update(self, progress: Progress) -> None:
        if not self._started:  # shown from the first finished episode: a run refused at bind time prints no bar
            self._progress.start()
            self._started = True
        elapsed = time.perf_counter() - self._start
        rate = progress.executed / elapsed if elapsed > 0 else 0.0
        self._progress.update(
            self._task,
            total=progress.total,
            completed=progress.done,
            success=f"{progress.successes}/{progress.done}",
            rate=f"{rate:.1f}",
        )

    def __enter__(self) -> ProgressBar:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self._progress.stop()
