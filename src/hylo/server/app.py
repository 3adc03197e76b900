"""hylo's HTTP API: the eval API over a `JobScheduler` (submit, watch, list and cancel evaluation jobs, read runs and
episodes, A/B comparisons and sweeps, under `/api/eval/v2`), the catalog (graphs, node types, benchmarks, agents) and
interactive driving (env panels and sessions), under `/api`.

Only registered benchmarks and agents are accepted (an import path only when the operator starts `hylo serve
--allow-import`), and every run goes to the scheduler's log dir.

The routes live in one router per area (`jobs`, `runs`, `experiments`, `catalog`, `panels`, `sessions`); what they
share is the app's `ServerState` (`hylo.server.dependencies`), and every error's answer is one table
(`hylo.server.problems`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.types import Scope

from hylo.evallog.logdir import GRAPHS_DIR
from hylo.graph.store import GraphStore
from hylo.jobs.scheduler import JobScheduler
from hylo.server.access import ServerAccess
from hylo.server.auth import BearerToken, HideQueryToken
from hylo.server.catalog import router as catalog_routes
from hylo.server.code_memo import CodeChangesMemo
from hylo.server.dependencies import ServerState
from hylo.server.docs import is_docs_page
from hylo.server.docs import router as docs_pages
from hylo.server.experiments import router as experiment_routes
from hylo.server.guard import RequestGuard
from hylo.server.jobs import router as job_routes
from hylo.server.limits import BODY_LIMIT_OVERRIDES, BodyLimit
from hylo.server.models import PANEL_PROBLEMS, PROBLEMS
from hylo.server.options import router as options_route
from hylo.server.panels import router as panel_routes
from hylo.server.problems import exception_handlers
from hylo.server.run_figures import router as run_figure_routes
from hylo.server.runs import router as run_routes
from hylo.server.sessions import router as session_routes
from hylo.server.web import is_public, mount_web
from hylo.sessions.manager import SessionManager
from hylo.version import __version__

PREFIX = "/api/eval/v2"


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
    app = FastAPI(
        title="hylo eval API",
        version=__version__,
        description="Queue evaluations of embodied agents, follow them live, read their runs and episodes.",
        lifespan=_lifespan,
        exception_handlers=exception_handlers(),  # every error's answer, in one place
        docs_url=None,  # FastAPI's pages load the latest scripts of a CDN: `hylo.server.docs`, on request
        redoc_url=None,
    )
    app.state.server = ServerState(
        scheduler=scheduler,
        access=access,
        sessions=live,
        graphs=store,
        code_changes=CodeChangesMemo(scheduler.log_dir),
        manage_scheduler=manage_scheduler,
    )
    app.state.sessions = live  # the manager, for whoever holds the app
    _add_middleware(app, access, token, docs)
    _include_routers(app, docs)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the scheduler (when the app manages it); on shutdown, close the sessions, then the scheduler."""
    state = ServerState.of(app)
    if state.manage_scheduler:
        state.scheduler.start()
    try:
        yield
    finally:
        await run_in_threadpool(state.sessions.close)
        if state.manage_scheduler:
            await run_in_threadpool(state.scheduler.close)


def _add_middleware(app: FastAPI, access: ServerAccess, token: str | None, docs: bool) -> None:
    """The layers a request passes, the last added outermost: its query token kept out of every log, a forged request
    refused (`Host`, `Origin`), a request without the token refused, its body bounded."""
    app.add_middleware(BodyLimit, overrides=BODY_LIMIT_OVERRIDES)
    if token:
        public = _public_with_docs if docs else is_public
        app.add_middleware(BearerToken, token=token, public=public)  # a request without the token is not even read
    app.add_middleware(RequestGuard, policy=access.hosts)  # a forged request is not even authenticated
    app.add_middleware(HideQueryToken)  # outermost: no answer, a refusal included, logs a token


def _public_with_docs(scope: Scope) -> bool:
    """The requests served without the token on a server with docs: the web UI's files and the two docs pages."""
    return is_public(scope) or is_docs_page(scope)


def _include_routers(app: FastAPI, docs: bool) -> None:
    """Every router, in the order requests are matched: the API, `OPTIONS` on any path, the docs pages, and last the
    web UI at `/`, beneath every API route."""
    app.include_router(job_routes, prefix=PREFIX, responses=PROBLEMS)
    app.include_router(run_routes, prefix=PREFIX, responses=PROBLEMS)
    app.include_router(run_figure_routes, prefix=PREFIX, responses=PROBLEMS)
    app.include_router(experiment_routes, prefix=PREFIX, responses=PROBLEMS)
    app.include_router(panel_routes, prefix="/api", responses=PANEL_PROBLEMS)
    app.include_router(session_routes, prefix="/api", responses=PANEL_PROBLEMS)
    app.include_router(catalog_routes, prefix="/api", responses=PROBLEMS)
    app.include_router(options_route)
    if docs:
        app.include_router(docs_pages)
    mount_web(app)
