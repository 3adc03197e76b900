"""The shapes the API answers with (they are also its OpenAPI schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hylo.jobs.job import JobState, JobStatus


class Started(BaseModel):
    """A queued job: its id, its run and its state."""

    job_id: str
    run_id: str
    state: JobState


class Queue(BaseModel):
    """Running jobs, then queued jobs in the order they will be served."""

    jobs: list[JobStatus]


class Runs(BaseModel):
    """Every run in the log dir, oldest first (as `hylo runs list` sees them)."""

    runs: list[dict[str, Any]]


class Episodes(BaseModel):
    """One page of a run's final episodes, ordered by (task, index); `total` counts every match of the filter."""

    run_id: str
    total: int
    offset: int
    limit: int
    episodes: list[dict[str, Any]]
