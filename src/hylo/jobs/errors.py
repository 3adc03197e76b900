"""Why the scheduler refuses a submission or a request."""

from __future__ import annotations

from hylo.core.errors import HyloError


class JobRefused(HyloError, ValueError):
    """A submission that is not queued: bad input or a job that can never fit. `field` names the offending spec or
    scheduling field (None when no single field is to blame)."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class JobConflict(HyloError):
    """A request that contradicts the queue's state: a run that already has an active job, a job that is final."""


class JobNotFound(HyloError, LookupError):
    """No job (or no run) by that name."""


class SchedulerBusy(HyloError):
    """Another live scheduler owns this log dir."""


class QueueFull(HyloError):
    """The queue holds as many waiting jobs as the scheduler takes (HTTP 429): wait or cancel some."""
