"""hylo's HTTP API: the eval API over a `JobScheduler` (submit, watch, list and cancel evaluation jobs, read runs and
episodes, under `/api/eval/v2`), the catalog (graphs, node types, benchmarks, agents) and interactive driving (env
panels and sessions), under `/api`.

Only registered benchmarks and agents are accepted (an import path only when the operator starts `hylo serve
--allow-import`), and every run goes to the scheduler's log dir.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import PurePath
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match, Mount

from hylo.confined import confined_file
from hylo.core.errors import shown
from hylo.core.status import EpisodeStatus
from hylo.core.types import MAX_SEED
from hylo.eval.code_identity import CodeIdentity
from hylo.evallog.logdir import GRAPHS_DIR, RunNotFound, find_run, is_run_name
from hylo.evallog.realtime_metrics import episode_realtime, realtime_figures
from hylo.evallog.report import run_timing
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog, list_runs, records
from hylo.experiments.ab import list_ab, read_ab
from hylo.experiments.sweep import PLOT_SVG, list_sweeps, read_sweep, sweep_plot
from hylo.graph.store import GraphStore
from hylo.jobs.errors import JobConflict, JobRefused
from hylo.jobs.job import JobStatus
from hylo.jobs.request import JobRequest
from hylo.jobs.scheduler import JobScheduler
from hylo.server.access import ServerAccess
from hylo.server.auth import BearerToken, HideQueryToken
from hylo.server.catalog import catalog_routes
from hylo.server.code_memo import CodeChangesMemo
from hylo.server.docs import add_docs, is_docs_page
from hylo.server.events import EventStream, StreamSlots, status_events
from hylo.server.guard import RequestGuard
from hylo.server.limits import BODY_LIMIT_OVERRIDES, BodyLimit
from hylo.server.live import live_routes
from hylo.server.models import (
    PANEL_PROBLEMS,
    PROBLEMS,
    ABRecord,
    ABRecords,
    ABSummary,
    Comparison,
    Episode,
    Episodes,
    EpisodeTrace,
    Queue,
    RunDetail,
    Runs,
    Started,
    SweepRecord,
    SweepRecords,
    SweepSummary,
)
from hylo.server.problems import NoRoute, exception_handlers
from hylo.server.web import is_public, mount_web
from hylo.sessions.manager import SessionManager
from hylo.stats.success import compare_runs, seed_clusters, summary_json
from hylo.version import __version__

PREFIX = "/api/eval/v2"
CANCEL_WAIT_MARGIN_S = 5.0
"""How long past the grace period a cancel request waits for a running job to end."""


def create_app(
    scheduler: JobScheduler,
    *,
    token: str | None = None,
    manage_scheduler: bool = False,
    sessions: SessionManager | None = None,
    graphs: GraphStore | None = None,
    access: ServerAccess | None = None,
    docs: bool = False,
) -> FastAPI:
    """The API over `scheduler`. With `token`, every request needs `Authorization: Bearer <token>`. With
    `manage_scheduler`, the app starts the scheduler on startup and closes it on shutdown (terminating running
    jobs, which stay resumable). `graphs` keeps the saved graphs (by default in `<log dir>/graphs`, beside the
    built-in examples); `sessions` holds the interactive sessions and panels (by default a manager over `graphs`),
    closed when the app shuts down. `access` holds the operator's rules (default: a loopback server, no Ray and no
    remote agent for requests): which `Host` and `Origin` values are served, which cluster and policy servers jobs
    and sessions may reach. With `docs`, the interactive docs are served at `/docs` and `/redoc`
    (`hylo.server.docs`: their scripts come from a CDN)."""
    access = access if access is not None else ServerAccess()
    store = graphs if graphs is not None else GraphStore(scheduler.log_dir / GRAPHS_DIR)
    live = sessions if sessions is not None else SessionManager(graphs=store.get, check_url=access.check_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_scheduler:
            scheduler.start()
        try:
            yield
        finally:
            await run_in_threadpool(live.close)
            if manage_scheduler:
                await run_in_threadpool(scheduler.close)

    app = FastAPI(
        title="hylo eval API",
        version=__version__,
        description="Queue evaluations of embodied agents, follow them live, read their runs and episodes.",
        lifespan=lifespan,
        exception_handlers=exception_handlers(),  # every error's answer, in one place
        docs_url=None,  # FastAPI's pages load the latest scripts of a CDN: `add_docs` below, on request
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, overrides=BODY_LIMIT_OVERRIDES)
    if token:
        public = (lambda scope: is_public(scope) or is_docs_page(scope)) if docs else is_public
        app.add_middleware(BearerToken, token=token, public=public)  # a request without the token is not even read
    app.add_middleware(RequestGuard, policy=access.hosts)  # a forged request is not even authenticated
    app.add_middleware(HideQueryToken)  # outermost: no answer, a refusal included, logs a token
    streams = StreamSlots()  # one count of the open event streams, of jobs and of sessions alike
    app.include_router(_routes(scheduler, access, streams), prefix=PREFIX, responses=PROBLEMS)
    app.include_router(live_routes(live, streams), prefix="/api", responses=PANEL_PROBLEMS)
    app.include_router(catalog_routes(store, import_paths=access.allow_import), prefix="/api", responses=PROBLEMS)
    _add_options(app)
    if docs:
        add_docs(app)
    mount_web(app)  # last: the web UI at `/`, beneath every API route
    app.state.sessions = live
    return app


def _add_options(app: FastAPI) -> None:
    """`OPTIONS` on any path answers which methods it takes (204 with `Allow`), and grants no cross-origin access:
    no `Access-Control-Allow-*` header, so a browser's preflight from another page fails as it should."""

    @app.options("/{path:path}", include_in_schema=False)
    def options(path: str, request: Request) -> Response:
        routes = [r for r in app.router.routes if getattr(r, "endpoint", None) is not options]
        methods = {
            method
            for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
            for route in routes
            if not isinstance(route, Mount) and route.matches({**request.scope, "method": method})[0] is Match.FULL
        }
        if not methods and not request.url.path.startswith("/api/"):
            methods = {"GET", "HEAD"}  # the web UI's files
        if not methods:
            raise NoRoute(f"no route {request.url.path!r}")
        return Response(status_code=204, headers={"Allow": ", ".join(sorted(methods | {"OPTIONS"}))})


def _run_name(run: str) -> str:
    """A run named in a path: a run id (letters, digits, '-', '_', '.', not leading '.', at most 255 bytes) or a
    prefix of one, never a path out of the log dir nor a name the file system refuses."""
    if not is_run_name(run):
        raise RunNotFound(f"no run {shown(run)}")
    return run


Listed = TypeVar("Listed", bound=BaseModel)


def _readable(model: type[Listed], records: list[dict[str, Any]]) -> list[Listed]:
    """The records that read as `model` (A/B or sweep summaries), as listed; one edited by hand into something else
    is left out."""
    summaries = []
    for record in records:
        try:
            summaries.append(model.model_validate(record))
        except ValidationError:
            continue
    return summaries


def _listed(run: dict[str, Any]) -> dict[str, Any]:
    """A run as `/runs` lists it: its spec's code identity cut to its digest (a few kB per run otherwise)."""
    spec = run.get("spec")
    code = spec.get("code") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(code, dict):
        return run
    return {**run, "spec": {**spec, "code": {"digest": code.get("digest")}}}


def _episode_json(row: EpisodeRow) -> dict[str, Any]:
    """An episode as the API lists it: its EvalLog row, with its realtime figures under realtime timing."""
    realtime = episode_realtime(row)
    return row.to_json() if realtime is None else {**row.to_json(), "realtime": realtime}


def _several_seeds(spec: dict[str, Any]) -> bool:
    """Whether a run's spec runs each (task, index) under several seeds (`--seeds S1 S2 ...`)."""
    seeds = spec.get("seeds")
    return isinstance(seeds, list) and len(seeds) > 1


SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
"""A plot opened on its own runs nothing and loads nothing (it holds neither script nor link; this makes sure)."""


def _routes(scheduler: JobScheduler, access: ServerAccess, streams: StreamSlots) -> APIRouter:
    router = APIRouter()
    code_memo = CodeChangesMemo(scheduler.log_dir)

    @router.post("/start", response_model=Started, summary="Queue an evaluation")
    def start(request: JobRequest) -> Started:
        """Validate the spec (registered benchmarks and agents only, unless the operator allows import paths; Ray
        and remote agents only as the operator allows), check that the job can ever fit this machine, and queue it.
        Nothing is connected to or built beyond the check of names and arguments: the job's own process does that.
        422 names the offending field; 409 when the run already has a queued or running job; 429 when the queue is
        full."""
        spec = access.job_spec(request.eval_spec())
        try:
            status = scheduler.submit(
                spec, check_url=access.check_url, allow_import=access.allow_import, **request.scheduling()
            )
        except JobRefused as exc:
            raise access.import_hint(exc, spec) from None
        return Started(job_id=status.job_id, run_id=status.run_id, state=status.state)

    @router.get("/status/{job}", response_model=JobStatus, summary="A job's state and its run's progress")
    def status(job: str) -> JobStatus:
        return scheduler.status(job)

    @router.get("/status/{job}/events", summary="A job's status as server-sent events, until it is final")
    async def events(job: str, request: Request) -> StreamingResponse:
        """429 while the server serves as many event streams (these and session streams) as it may."""
        await run_in_threadpool(scheduler.status, job)  # 404 before the stream starts
        streams.take()
        return EventStream(status_events(scheduler, job, request), streams)

    @router.get("/queue", response_model=Queue, summary="Running and queued jobs, in the order they are served")
    def queue() -> Queue:
        return Queue(jobs=scheduler.queue())

    @router.get("/runs", response_model=Runs, summary="Every run in the log dir")
    def runs() -> Runs:
        """Every run as `hylo runs list --json` lists it, except that its spec's `code` is its `digest` alone (the
        whole identity, every source file's hash, is in `/runs/{run}`): the list is read every second while a job
        runs."""
        return Runs(runs=[_listed(info.to_json()) for info in list_runs(scheduler.log_dir)])

    @router.get("/runs/{run}", response_model=RunDetail, summary="A run, its summary per task and its active job")
    def run_detail(run: str) -> RunDetail:
        """The run (as in `/runs`), its summary as `hylo runs show --json` gives it (every status counted, success
        rate over scored episodes with its 95% Wilson interval, conservative rate over all, and the same per task),
        its agent's code identity and how that differs from the latest other run of the same configuration (as `hylo
        runs show --json`'s `code_changes`), its realtime figures, a run of several seeds' episodes clustered by
        (task, index) (as `hylo runs show --json`'s `seed_clusters`), and its queued or running job, if any. Only a
        run whose spec holds several seeds reads its episodes for the clusters: the summary of any run is read from
        the log's tallies."""
        with EvalLog.open(find_run(scheduler.log_dir, _run_name(run))) as log:
            info = log.info()
            tallies = log.tallies()
            realtime = realtime_figures(log.realtime_records())
            clusters = seed_clusters(records(log.final_episodes())) if _several_seeds(info.spec) else None
        job = scheduler.active_job(info.run_id)
        code = CodeIdentity.from_json(info.spec.get("code"))
        changes = code_memo.changes(info) if code is not None else None
        return RunDetail(
            run=info.to_json(),
            summary=summary_json(tallies=tallies),
            code=None if code is None else code.to_json(),
            code_changes=None if changes is None else changes.to_json(),
            realtime=None if realtime is None else realtime.to_json(),
            seed_clusters=None if clusters is None else clusters.to_json(),
            job=scheduler.status(job.job_id) if job is not None else None,
        )

    @router.get("/runs/{run}/episodes", response_model=Episodes, summary="A run's final episodes, paged")
    def episodes(
        run: str,
        offset: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        status: Annotated[EpisodeStatus | None, Query(description="only episodes that ended with this status")] = None,
        task: Annotated[str | None, Query(description="only episodes of this task")] = None,
    ) -> Episodes:
        with EvalLog.open(find_run(scheduler.log_dir, _run_name(run))) as log:
            run_id = log.info().run_id
            total, rows = log.final_page(offset=offset, limit=limit, status=status, task=task)
        page = [_episode_json(row) for row in rows]
        return Episodes(run_id=run_id, total=total, offset=offset, limit=limit, episodes=page)

    @router.get("/runs/{run}/episode", response_model=Episode, summary="One final episode, by its id")
    def episode(
        run: str,
        episode: Annotated[str, Query(min_length=1, description="the episode id, e.g. babyai/test/GoToLocal/0003@s0")],
    ) -> Episode:
        """The episode's last attempt, as `/episodes` lists it: what a link to one episode (a flip of a comparison)
        opens. 404 for an episode the run does not have."""
        with EvalLog.open(find_run(scheduler.log_dir, _run_name(run))) as log:
            run_id = log.info().run_id
            final = max(log.attempts(episode), key=lambda row: row.attempt, default=None)
        if final is None:
            raise RunNotFound(f"run {run_id} has no episode {episode!r}")
        return Episode(run_id=run_id, episode=_episode_json(final))

    @router.get("/runs/{run}/trace", response_model=EpisodeTrace, summary="One episode's recorded trace")
    def trace(
        run: str,
        episode: Annotated[str, Query(min_length=1, description="the episode id, e.g. babyai/test/GoToLocal/0003@s0")],
        attempt: Annotated[
            int | None, Query(ge=1, le=MAX_SEED, description="which attempt (default: the last)")
        ] = None,
    ) -> EpisodeTrace:
        """The trace events of one attempt of an episode, in order. 404 for an episode the run does not have."""
        with EvalLog.open(find_run(scheduler.log_dir, _run_name(run))) as log:
            run_id = log.info().run_id
            attempts = [row.attempt for row in log.attempts(episode)]
            if not attempts or (attempt is not None and attempt not in attempts):
                which = f"episode {episode!r}" + (f" attempt {attempt}" if attempt is not None else "")
                raise RunNotFound(f"run {run_id} has no {which}")
            chosen = attempt if attempt is not None else max(attempts)
            events = log.trace(episode, chosen)
        return EpisodeTrace(run_id=run_id, episode_id=episode, attempt=chosen, attempts=sorted(attempts), events=events)

    @router.get("/runs/{run}/video", summary="One episode's video (MP4)", response_class=FileResponse)
    def video(run: str, episode: Annotated[str, Query(min_length=1)]) -> FileResponse:
        """The video recorded for an episode (`video` episodes per task were asked for). 404 when it has none."""
        run_dir = find_run(scheduler.log_dir, _run_name(run))
        with EvalLog.open(run_dir) as log:
            attempts = log.attempts(episode)
        final = max(attempts, key=lambda row: row.attempt, default=None)
        if final is None or not final.video:
            raise RunNotFound(f"episode {shown(episode)} of run {run_dir.name} has no video")
        path = confined_file(scheduler.log_dir, PurePath(run_dir.name, final.video))
        if path is None:
            raise RunNotFound(f"the video of episode {shown(episode)} is missing from run {run_dir.name}")
        return FileResponse(path, media_type="video/mp4")

    @router.get("/compare", response_model=Comparison, summary="Pair two runs' episodes and test the difference")
    def compare(
        a: Annotated[str, Query(min_length=1, description="run a (id or unique prefix)")],
        b: Annotated[str, Query(min_length=1, description="run b (id or unique prefix)")],
    ) -> Comparison:
        """Episodes paired by id; McNemar's exact test on the pairs both runs scored; every flipped episode. As
        `hylo compare --json`. 422 when the runs cannot be paired (an episode id with different tasks)."""
        loaded = []
        for run in (a, b):
            with EvalLog.open(find_run(scheduler.log_dir, _run_name(run))) as log:
                info = log.info()
                loaded.append((info.run_id, run_timing(info.spec), records(log.final_episodes())))
        (run_a, timing_a, recs_a), (run_b, timing_b, recs_b) = loaded
        try:
            comparison = compare_runs(recs_a, recs_b)
        except ValueError as exc:
            raise JobRefused(None, str(exc)) from exc
        return Comparison.model_validate(
            {"run_a": run_a, "run_b": run_b, "timing_a": timing_a, "timing_b": timing_b, **comparison.to_json()}
        )

    @router.get("/ab", response_model=ABRecords, summary="Every A/B comparison in the log dir")
    def ab_list() -> ABRecords:
        """The comparisons `hylo ab` recorded, oldest first: agents, runs, decision, pairs used of the most allowed. A
        file that does not hold a record (edited by hand) is left out."""
        return ABRecords(comparisons=_readable(ABSummary, list_ab(scheduler.log_dir)))

    @router.get("/ab/{ab_id}", response_model=ABRecord, summary="An A/B comparison's record")
    def ab_record(ab_id: str) -> ABRecord:
        """As `hylo ab show --json`: the decision, the pairs used, the difference with its confidence sequence, the
        flips, the abstentions and the path of log E against its threshold. 404 for an unknown id (an id is `ab-`
        and 12 hex digits, never a path)."""
        return ABRecord.model_validate(read_ab(scheduler.log_dir, ab_id))

    @router.get("/sweeps", response_model=SweepRecords, summary="Every latency sweep in the log dir")
    def sweeps() -> SweepRecords:
        """The sweeps `hylo sweep` recorded, oldest first: agent, benchmark, the grid asked for. A file that does not
        hold a record (edited by hand) is left out."""
        return SweepRecords(sweeps=_readable(SweepSummary, list_sweeps(scheduler.log_dir)))

    @router.get("/sweeps/{sweep_id}", response_model=SweepRecord, summary="A latency sweep's record")
    def sweep_record(sweep_id: str) -> SweepRecord:
        """As `hylo sweep show --json` (without the directory): every point's success rate with its Wilson interval,
        McNemar's p against the zero-latency point at its horizon and its run; the points refused with the rule.
        404 for an unknown id (an id is `sweep-` and 12 hex digits, never a path)."""
        return SweepRecord.model_validate(read_sweep(scheduler.log_dir, sweep_id))

    @router.get("/sweeps/{sweep_id}/plot.svg", summary="A latency sweep's plot (SVG)", response_class=FileResponse)
    def sweep_svg(sweep_id: str) -> FileResponse:
        """Success against latency, one line per execution horizon with its Wilson band, as `hylo sweep` drew it.
        404 for an unknown id or a sweep without its plot."""
        path = sweep_plot(scheduler.log_dir, sweep_id, PLOT_SVG)
        return FileResponse(path, media_type="image/svg+xml", headers={"Content-Security-Policy": SVG_POLICY})

    @router.post("/runs/{run}/cancel", response_model=JobStatus, summary="Cancel the queued or running job of a run")
    def cancel(run: str) -> JobStatus:
        """`run` is a run id or a unique prefix of one. A queued job is cancelled at once; a running one is stopped
        (SIGTERM, then SIGKILL after the grace period) and its run marked `cancelled`, resumable by resubmitting the
        same spec. 404 for an unknown run, 409 when the run has no queued or running job."""
        job = scheduler.active_job(_run_name(run))
        if job is None:
            if not scheduler.store.for_run(run):
                find_run(scheduler.log_dir, run)  # RunNotFound: 404 naming the run
            raise JobConflict(f"run {run!r} has no queued or running job to cancel")
        return scheduler.cancel(job.job_id, wait=scheduler.grace_s + CANCEL_WAIT_MARGIN_S)

    return router
