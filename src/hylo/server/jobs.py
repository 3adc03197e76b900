"""The job routes of the eval API (under `/api/eval/v2`): queue an evaluation, follow its status (once, or as
server-sent events until it is final), list the queue, cancel a run's job."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from hylo.evallog.logdir import find_run
from hylo.jobs.errors import JobConflict, JobRefused
from hylo.jobs.job import JobStatus
from hylo.jobs.request import JobRequest
from hylo.server.dependencies import Access, Scheduler, Streams
from hylo.server.events import EventStream, status_events
from hylo.server.models import Queue, Started, streamed
from hylo.server.runs import run_name

CANCEL_WAIT_MARGIN_S = 5.0
"""How long past the grace period a cancel request waits for a running job to end."""

router = APIRouter(tags=["jobs"])


@router.post("/start", response_model=Started, summary="Queue an evaluation")
def start(request: JobRequest, scheduler: Scheduler, access: Access) -> Started:
    """Validate the spec (registered benchmarks and agents only, unless the operator allows import paths; Ray and
    remote agents only as the operator allows), check that the job can ever fit this machine, and queue it. Nothing
    is connected to or built beyond the check of names and arguments: the job's own process does that. 422 names the
    offending field; 409 when the run already has a queued or running job; 429 when the queue is full."""
    spec = access.job_spec(request.eval_spec())
    try:
        status = scheduler.submit(
            spec, check_url=access.check_url, allow_import=access.allow_import, **request.scheduling()
        )
    except JobRefused as exc:
        raise access.import_hint(exc, spec) from None
    return Started(job_id=status.job_id, run_id=status.run_id, state=status.state)


@router.get("/status/{job}", response_model=JobStatus, summary="A job's state and its run's progress")
def status(job: str, scheduler: Scheduler) -> JobStatus:
    return scheduler.status(job)


@router.get(
    "/status/{job}/events",
    response_class=StreamingResponse,
    responses=streamed("text/event-stream", "`event: status` frames until the job is final"),
    summary="A job's status as server-sent events, until it is final",
)
async def events(job: str, request: Request, scheduler: Scheduler, streams: Streams) -> EventStream:
    """Each `event: status` frame's `data:` is one `JobStatus`, sent when it changes; a comment line keeps a quiet
    stream open. 429 while the server serves as many event streams (these and session streams) as it may."""
    await run_in_threadpool(scheduler.status, job)  # 404 before the stream starts
    streams.take()
    return EventStream(status_events(scheduler, job, request), streams)


@router.get("/queue", response_model=Queue, summary="Running and queued jobs, in the order they are served")
def queue(scheduler: Scheduler) -> Queue:
    return Queue(jobs=scheduler.queue())


@router.post("/runs/{run}/cancel", response_model=JobStatus, summary="Cancel the queued or running job of a run")
def cancel(run: str, scheduler: Scheduler) -> JobStatus:
    """`run` is a run id or a unique prefix of one. A queued job is cancelled at once; a running one is stopped
    (SIGTERM, then SIGKILL after the grace period) and its run marked `cancelled`, resumable by resubmitting the same
    spec. 404 for an unknown run, 409 when the run has no queued or running job."""
    job = scheduler.active_job(run_name(run))
    if job is None:
        if not scheduler.store.for_run(run):
            find_run(scheduler.log_dir, run)  # RunNotFound: 404 naming the run
        raise JobConflict(f"run {run!r} has no queued or running job to cancel")
    return scheduler.cancel(job.job_id, wait=scheduler.grace_s + CANCEL_WAIT_MARGIN_S)
