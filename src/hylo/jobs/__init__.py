"""Jobs: a durable, prioritised queue of evaluations, admitted against the machine's resources and each run as its
own `hylo eval` process (`JobScheduler`)."""

from hylo.jobs.errors import JobConflict, JobNotFound, JobRefused, QueueFull, SchedulerBusy
from hylo.jobs.job import Job, JobState, JobStatus, Resources, RunProgress
from hylo.jobs.request import SCHEDULING_FIELDS, JobRequest
from hylo.jobs.resources import Admission, Gpu, Machine, Placement, admit, declared, measure_machine, never_fits
from hylo.jobs.scheduler import JobScheduler

__all__ = [
    "SCHEDULING_FIELDS",
    "Admission",
    "Gpu",
    "Job",
    "JobConflict",
    "JobNotFound",
    "JobRefused",
    "JobRequest",
    "JobScheduler",
    "JobState",
    "JobStatus",
    "Machine",
    "Placement",
    "QueueFull",
    "Resources",
    "RunProgress",
    "SchedulerBusy",
    "admit",
    "declared",
    "measure_machine",
    "never_fits",
]
