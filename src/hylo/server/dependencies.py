"""What the routes share, as FastAPI dependencies: the one `ServerState` an app holds (`app.state.server`: the job
scheduler, the operator's access rules, the session manager, the saved graphs, the count of open event streams) and
one dependency per part of it, so that a route names what it reads (`scheduler: Scheduler`) and nothing more.

A test mounting one router on an app of its own gives it what that router reads with `app.dependency_overrides`
(e.g. `{graph_store: lambda: store}`) instead of a whole `ServerState`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from hylo.graph.store import GraphStore
from hylo.jobs.scheduler import JobScheduler
from hylo.server.access import ServerAccess
from hylo.server.code_memo import CodeChangesMemo
from hylo.server.events import StreamSlots
from hylo.sessions.manager import SessionManager


@dataclass(frozen=True)
class ServerState:
    """Everything the routes of one app read: made once by `create_app`, kept as `app.state.server`.

    `streams` counts the open event streams of jobs and sessions alike; `session_streams` the stream clients of each
    session (the event loop's thread alone changes it); `manage_scheduler` says whether the app starts the scheduler
    on startup and closes it on shutdown."""

    scheduler: JobScheduler
    access: ServerAccess
    sessions: SessionManager
    graphs: GraphStore
    code_changes: CodeChangesMemo
    streams: StreamSlots = field(default_factory=StreamSlots)
    session_streams: dict[str, int] = field(default_factory=dict)
    manage_scheduler: bool = False

    @classmethod
    def of(cls, app: Starlette) -> ServerState:
        """The state `app` holds (`app.state.server`)."""
        state = getattr(app.state, "server", None)
        if not isinstance(state, cls):
            raise RuntimeError("this app holds no ServerState (app.state.server): build it with hylo.server.create_app")
        return state


def server_state(connection: HTTPConnection) -> ServerState:
    """The state of the app serving `connection` (a request or a websocket)."""
    return ServerState.of(connection.app)


State = Annotated[ServerState, Depends(server_state)]


def job_scheduler(state: State) -> JobScheduler:
    return state.scheduler


def server_access(state: State) -> ServerAccess:
    return state.access


def session_manager(state: State) -> SessionManager:
    return state.sessions


def graph_store(state: State) -> GraphStore:
    return state.graphs


def code_changes(state: State) -> CodeChangesMemo:
    return state.code_changes


def stream_slots(state: State) -> StreamSlots:
    return state.streams


Scheduler = Annotated[JobScheduler, Depends(job_scheduler)]
Access = Annotated[ServerAccess, Depends(server_access)]
Sessions = Annotated[SessionManager, Depends(session_manager)]
Graphs = Annotated[GraphStore, Depends(graph_store)]
CodeChanges = Annotated[CodeChangesMemo, Depends(code_changes)]
Streams = Annotated[StreamSlots, Depends(stream_slots)]
