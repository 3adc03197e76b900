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


class RunDetail(BaseModel):
    """A run (as listed in `Runs`), its summary (`hylo runs show --json`'s `summary`: counts of every status, success
    rate with its 95% Wilson interval, conservative rate, and `per_task`), and its queued or running job."""

    run: dict[str, Any]
    summary: dict[str, Any]
    job: JobStatus | None


class EpisodeTrace(BaseModel):
    """The recorded trace events of one attempt of an episode, and the attempts there are."""

    run_id: str
    episode_id: str
    attempt: int
    attempts: list[int]
    events: list[dict[str, Any]]


class Comparison(BaseModel):
    """Two runs paired by episode id (`hylo compare --json`): pair counts, rates, the McNemar exact p-value and the
    flipped episodes. `difference` is `rate_b - rate_a`."""

    run_a: str
    run_b: str
    n_pairs: int
    only_in_a: int
    only_in_b: int
    abstained: int
    both_success: int
    a_only: int
    b_only: int
    neither: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    p_value: float
    flips: list[dict[str, str]]
