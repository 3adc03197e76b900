"""The session routes of the interactive API (under `/api/sessions`, docs/live.md): start a session, list, read and
close sessions, a session's latest frame and recent trace events, and the websocket stream of its trace and frames.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from pydantic_core import to_json
from starlette.concurrency import run_in_threadpool

from hylo.core.jsonable import jsonable
from hylo.core.types import MAX_SEED
from hylo.server.dependencies import Sessions, State
from hylo.server.events import StreamsFull
from hylo.server.models import SessionClosed, SessionEvents, SessionInfo, SessionList, streamed
from hylo.sessions.manager import NotFound, SessionRequest
from hylo.sessions.session import Session
from hylo.sessions.state import SessionState

FLUSH_S = 0.05
"""The least time between two messages of a session stream: events in between are sent together."""

KEEPALIVE_S = 1.0
"""A session stream sends its state at least this often, events or not."""

MAX_BATCH = 2000
"""The most events one stream message carries."""

MAX_STREAMS = 16
"""Stream clients per session."""

router = APIRouter(prefix="/sessions", tags=["sessions"])


@router.post(
    "",
    status_code=201,
    response_model=SessionInfo,
    summary="Start a session: an agent or a saved graph, and a placement",
)
async def create(request: SessionRequest, manager: Sessions) -> SessionInfo:
    """Blocks until the session's env and runner are built. 422 names what is wrong (an unknown agent, an invalid graph
    with its typed per-node errors, a placement value); 409 when the panel is taken."""
    session = await run_in_threadpool(manager.create, request)
    return SessionInfo.model_validate(session.describe())


@router.get("", response_model=SessionList, summary="Every session")
def sessions(manager: Sessions) -> SessionList:
    return SessionList.model_validate({"sessions": [session.describe() for session in manager.all()]})


@router.get("/{session_id}", response_model=SessionInfo, summary="A session's state, current step and last outcome")
def session_info(session_id: str, manager: Sessions) -> SessionInfo:
    return SessionInfo.model_validate(manager.get(session_id).describe())


@router.delete(
    "/{session_id}",
    response_model=SessionClosed,
    summary="Close a session (its execution, env and subprocesses)",
    responses={202: {"model": SessionClosed, "description": "closing: an env or agent call is still running"}},
)
async def delete(session_id: str, manager: Sessions, response: Response) -> SessionClosed:
    """200 once closed; 202 while the session's thread is still in an env or agent call (it closes when the call
    returns, and says `closing` until then)."""
    closed = await run_in_threadpool(manager.delete, session_id)
    response.status_code = 200 if closed else 202
    return SessionClosed(id=session_id, state=SessionState.CLOSED if closed else SessionState.CLOSING)


@router.get(
    "/{session_id}/frame",
    response_class=Response,
    responses=streamed("image/png", "the latest frame"),
    summary="The session's latest camera frame, as PNG",
)
async def frame(session_id: str, manager: Sessions) -> Response:
    """`X-Frame-Number` and `X-Frame-Step` say which frame it is and which env step it shows. 404 before any."""
    latest = manager.get(session_id).frames.latest
    if latest is None:
        raise NotFound(f"session {session_id} has no frame yet (its env renders none, or nothing ran)")
    data = await run_in_threadpool(latest.png)
    headers = {"Cache-Control": "no-store", "X-Frame-Number": str(latest.number), "X-Frame-Step": str(latest.step)}
    return Response(data, media_type="image/png", headers=headers)


@router.get(
    "/{session_id}/events", response_model=SessionEvents, summary="The session's recent trace events after a position"
)
def events(
    session_id: str,
    manager: Sessions,
    after: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_BATCH)] = 500,
) -> SessionEvents:
    """The events after position `after` (at most `limit`, the oldest of them)."""
    batch = manager.get(session_id).feed.read(after, limit)
    return SessionEvents(position=batch.position, dropped=batch.dropped, events=batch.events)


@router.websocket("/{session_id}/stream")
async def stream(websocket: WebSocket, session_id: str, state: State, after: int = 0) -> None:
    """Messages (JSON text): first `{"type": "hello", "session": ...}`, then `{"type": "update", "position",
    "dropped", "events", "session"}` as events come (at most every FLUSH_S), and at least every KEEPALIVE_S. A client
    that reads slowly gets fewer, larger messages and a `dropped` count, never a slower execution."""
    try:
        session = state.sessions.get(session_id)
    except NotFound:
        await websocket.close(code=4404, reason=f"no session {session_id}")
        return
    counts = state.session_streams
    if counts.get(session_id, 0) >= MAX_STREAMS:
        await websocket.close(code=1013, reason=f"session {session_id} has {MAX_STREAMS} streams already")
        return
    try:
        state.streams.take()
    except StreamsFull as exc:
        await _deny(websocket, 429, str(exc))
        return
    counts[session_id] = counts.get(session_id, 0) + 1
    try:
        await websocket.accept()
        await _serve_stream(websocket, session, min(max(0, after), session.feed.position))
    except WebSocketDisconnect:
        pass
    finally:
        counts[session_id] -= 1
        if not counts[session_id]:
            del counts[session_id]
        state.streams.give_back()


async def _deny(websocket: WebSocket, status: int, detail: str) -> None:
    """Refuse a websocket handshake with an HTTP answer (`status`, `{"detail": ...}`) where the server can send one
    (the ASGI denial response), else by closing it (the client then sees 403) with "try again later" (1013)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"detail": detail}, status_code=status))
    else:
        await websocket.close(code=1013, reason=detail[:120])


async def _serve_stream(websocket: WebSocket, session: Session, position: int) -> None:
    gone = asyncio.Event()
    reader = asyncio.create_task(_notice_leaving(websocket, gone))
    feed = session.feed
    try:
        await websocket.send_text(_json({"type": "hello", "session": session.describe()}))
        while not gone.is_set():
            await feed.wait(position, KEEPALIVE_S)
            if gone.is_set():
                return
            batch = feed.read(position, MAX_BATCH)
            position = batch.position
            message = {"type": "update", "position": position, "dropped": batch.dropped, "events": batch.events,
                       "session": session.brief()}  # fmt: skip
            await websocket.send_text(_json(message))
            if session.closed and feed.position == position:
                await websocket.close(code=1000, reason=f"session {session.id} is {session.state.value}")
                return
            await asyncio.sleep(FLUSH_S)
    except (WebSocketDisconnect, RuntimeError):  # the client went away mid-send
        return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def _notice_leaving(websocket: WebSocket, gone: asyncio.Event) -> None:
    """Read the client's messages (it says nothing we need) until it leaves, then set `gone`."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
    finally:
        gone.set()


def _json(message: dict[str, Any]) -> str:
    return to_json(message, fallback=jsonable, inf_nan_mode="null").decode()
