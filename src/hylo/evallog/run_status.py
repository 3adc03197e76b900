"""Where a run is, as its EvalLog records it (`RunInfo.status`, the `status` of `hylo runs` and of `/runs`)."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's status. Only `running` is active; every other one can be resumed by re-running its spec.

    - `running`: a live process is running it
    - `stopped`: it says `running`, but its process is gone (killed)
    - `interrupted`: Ctrl-C (or SIGTERM) stopped it; its finished episodes are committed
    - `aborted`: it stopped on a failure (the message says which)
    - `cancelled`: its job was cancelled by request
    - `partial`: it ended with episodes still to run
    - `complete`: every planned episode has its final outcome
    """

    RUNNING = "running"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"
    CANCELLED = "cancelled"
    PARTIAL = "partial"
    COMPLETE = "complete"
