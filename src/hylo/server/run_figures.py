"""The figure routes of a run (under `/api/eval/v2`): the distributions of its episodes' length and return per status
(the whole run's or one task's), and a realtime run's figures per task. Both are read from the final episodes'
rows, never their traces, and their size is bounded by the bin count and the run's tasks."""

from __future__ import annotations

import sys
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from hylo.core.errors import shown
from hylo.evallog.distributions import MAX_BINS, distributions
from hylo.evallog.logdir import RunNotFound, find_run
from hylo.evallog.realtime_metrics import run_realtime
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog
from hylo.server.dependencies import Scheduler
from hylo.server.runs import run_name

router = APIRouter(tags=["runs"])

MAX_TASK_NAME = 256
"""The longest task name a request may name."""
EVERY = sys.maxsize
"""A page size that takes every episode: one task's rows are read in SQL, not filtered from the run's."""


class StatusHistogram(BaseModel):
    """One quantity's histogram: bin i is `[edges[i], edges[i+1])`; `counts` gives each status's count per bin
    (every status listed, zeros included); `n` episodes counted, `missing` left out for want of a value. No edges
    and no bins when no episode has a value."""

    quantity: str = Field(description="`steps` or `return`")
    unit: str
    edges: list[float] = Field(max_length=MAX_BINS + 1)
    counts: dict[str, list[int]]
    n: int
    missing: int


class RunDistributions(BaseModel):
    """The distributions of a run's final episodes, or of one task's: episode length always, return only when some
    episode recorded one (`returns` is null otherwise)."""

    run_id: str
    task: str | None = Field(description="the task counted; null for the whole run")
    tasks: list[str] = Field(description="the run's tasks, each a value `task` may take")
    episodes: int
    steps: StatusHistogram
    returns: StatusHistogram | None


class LatencyPercentiles(BaseModel):
    """The p50, p95 and p99 of act latencies, in seconds."""

    p50: float
    p95: float
    p99: float


class TaskRealtime(BaseModel):
    """A task's realtime figures, pooled over its final episodes (docs/evallog.md, Realtime metrics)."""

    episodes: int
    steps: int
    executed: int
    holds: int
    dropped: int
    chunks: int
    acts: int
    watchdog_ends: int
    sim_time_s: float
    latency_s: LatencyPercentiles | None
    virtual_latency_s: LatencyPercentiles | None
    control_rate_hz: float | None
    stale_ratio: float | None
    hold_ratio: float | None
    mean_delay_steps: float | None


class RealtimePerTask(BaseModel):
    """A run's realtime figures per task, tasks in the run's order; empty for a run without realtime timing."""

    run_id: str
    per_task: dict[str, TaskRealtime]


def run_tasks(played: list[str], spec_tasks: object) -> list[str]:
    """The run's tasks: those its spec names, then any other its episodes played, each once."""
    named = [task for task in spec_tasks if isinstance(task, str)] if isinstance(spec_tasks, list) else []
    return list(dict.fromkeys([*named, *played]))


@router.get(
    "/runs/{run}/distributions",
    response_model=RunDistributions,
    summary="Histograms of a run's episode length and return, per status",
)
def run_distributions(
    run: str,
    scheduler: Scheduler,
    task: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_TASK_NAME, description="only this task's episodes (one of `tasks`)"),
    ] = None,
) -> RunDistributions:
    """Histograms of the final episodes' steps (integer-aligned bins) and return (`metrics.return`), each bin
    counted per status, at most 30 bins each, over the whole run or `task`'s episodes. 404 naming a task the run
    does not have."""
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        info = log.info()
        tasks = run_tasks(list(log.tallies()), info.spec.get("tasks"))
        if task is not None and task not in tasks:
            raise RunNotFound(f"run {info.run_id} has no task {shown(task)}")
        rows = log.final_episodes() if task is None else log.final_page(task=task, limit=EVERY)[1]
    figures = distributions(rows, task).to_json()
    return RunDistributions.model_validate({"run_id": info.run_id, "tasks": tasks, **figures})


@router.get(
    "/runs/{run}/realtime/tasks",
    response_model=RealtimePerTask,
    summary="A realtime run's figures per task",
)
def realtime_per_task(run: str, scheduler: Scheduler) -> RealtimePerTask:
    """Per task, the realtime figures `/runs/{run}` gives for the whole run (act latency percentiles measured and
    virtual, control rate, stale and hold ratios, chunks), pooled over the task's final episodes. Tasks without
    realtime records are left out."""
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        run_id = log.info().run_id
        rows = log.final_episodes()
    by_task: dict[str, list[EpisodeRow]] = {}
    for row in rows:
        by_task.setdefault(row.task, []).append(row)
    per_task = {task: run_realtime(task_rows) for task, task_rows in by_task.items()}
    return RealtimePerTask.model_validate(
        {"run_id": run_id, "per_task": {task: f.to_json() for task, f in per_task.items() if f is not None}}
    )
