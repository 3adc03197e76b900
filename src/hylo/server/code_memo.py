"""How a run's code differs from the latest other run of its configuration, remembered while the log dir holds the
same runs: finding that run reads every run of the log dir (3-4 ms each on a loaded 2-core machine, 1 s for 300
runs), and the run page asks again every second while its run is running."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from hylo.eval.code_identity import CodeChanges, code_changes
from hylo.evallog.rows import RunInfo

MEMO_RUNS = 256
"""How many runs' answers are kept (the least recently asked for is dropped first)."""


class CodeChangesMemo:
    """`code_changes(log_dir, info)`, answered again without reading the log dir while the names in it are the same
    (a run's code and configuration are fixed when it is made, so only a run made or deleted changes the answer)."""

    def __init__(self, log_dir: Path, size: int = MEMO_RUNS) -> None:
        self.log_dir = log_dir
        self.size = size
        self._memo: OrderedDict[str, tuple[tuple[str, ...], CodeChanges | None]] = OrderedDict()
        self._lock = threading.Lock()

    def changes(self, info: RunInfo) -> CodeChanges | None:
        names = self._names()
        with self._lock:
            kept = self._memo.get(info.run_id)
            if kept is not None and kept[0] == names:
                self._memo.move_to_end(info.run_id)
                return kept[1]
        answer = code_changes(self.log_dir, info)
        with self._lock:
            self._memo[info.run_id] = (names, answer)
            self._memo.move_to_end(info.run_id)
            while len(self._memo) > self.size:
                self._memo.popitem(last=False)
        return answer

    def _names(self) -> tuple[str, ...]:
        """The directories of the log dir: its runs, and the folders it keeps for itself (which never hold one)."""
        with os.scandir(self.log_dir) as entries:
            return tuple(sorted(entry.name for entry in entries if entry.is_dir()))
