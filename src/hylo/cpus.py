"""How many CPUs this process may use: what bounds a run's worker processes and what the job scheduler admits against.

A leaf (no other hylo code): the CLI, the runner, the pools and the scheduler all ask it without importing each other.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), else every CPU."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
