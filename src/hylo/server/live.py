"""Interactive driving over HTTP: the env-panel surface (`/api/env-panels`) and the sessions it drives
(`/api/sessions`, with a websocket stream of each session's trace and frames).

The env-panel router knows nothing about any env: it dispatches to the registered panel and carries out the intent
the panel returns, through the panel's session (Play / Pause / Step / Stop, a signal into the session's runner).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json
from starlette.concurrency import run_in_threadpool

from hylo.core.jsonable import jsonable
from hylo.core.types import MAX_SEED
from hylo.panels.base import BaseEnvPanel, SideEffect
from hylo.server.events import StreamsFull, StreamSlots
from hylo.sessions.manager import NotFound, SessionManager, SessionRefused, SessionRequest
from hylo.sessions.session import Session
from hylo.sessions.state import SessionConflict, SessionState

T = TypeVar("T")

COMMAND_TIMEOUT_S = 60.0
"""How long a request waits for its session's thread (a command waits for the current env step to end)."""

FLUSH_S = 0.05
"""The least time between two messages of a session stream: events in between are sent together."""

KEEPALIVE_S = 1.0
"""A session stream sends its state at least this often, events or not."""

MAX_BATCH = 2000
"""The most events one stream message carries."""

MAX_STREAMS = 16
"""Stream clients per session."""

_RUN_EFFECTS = frozenset(SideEffect) - {SideEffect.NONE}
"""The intents only a session carries out."""


class FieldChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=100)
    value: Any = None


class ActionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=100)


async def _result(future: concurrent.futures.Future[T]) -> T:
    """The command's result. One the session has not taken within COMMAND_TIMEOUT_S (it is inside a long env step
    or agent call) is withdrawn and answered 409; one it has taken is waited for to its end."""
    waiting = asyncio.wrap_future(future)
    try:
        return await asyncio.wait_for(asyncio.shield(waiting), COMMAND_TIMEOUT_S)
    except TimeoutError:
        if future.cancel():
            raise SessionConflict(
                f"the session did not take the request within {COMMAND_TIMEOUT_S:g} s (an env step or agent call "
                "is still running); nothing was done, try again"
            ) from None
        return await waiting


def _refused_hook(panel: BaseEnvPanel, result: dict[str, Any], field: str) -> SessionRefused:
    return SessionRefused(str(result.get("error") or f"panel {panel.name!r} refused: {result}"), field)


def live_routes(manager: SessionManager, slots: StreamSlots | None = None) -> APIRouter:
    """The routes, to mount under `/api`. A session stream holds one of `slots` (the server's count of open event
    streams; by default one of these routes' own) while it is open."""
    router = APIRouter()
    slots = slots if slots is not None else StreamSlots()
    streams: dict[str, int] = {}  # stream clients per session

    # -- env panels -------------------------------------------------------------------------------------------------

    @router.get("/env-panels", summary="Every env panel, and the session each belongs to")
    async def panels() -> dict[str, Any]:
        names = await run_in_threadpool(manager.panels.names)
        listed = []
        for name in names:
            panel = await run_in_threadpool(manager.panels.get, name)
            session = manager.panels.session_of(name)
            listed.append({"name": panel.name, "display_name": panel.display_name, "context": panel.info()["context"],
                           "session": session.id if session else None,
                           "state": (session.state if session else SessionState.IDLE).value})  # fmt: skip
        return {"panels": listed}

    @router.get("/env-panels/{name}", summary="A panel's fields and actions, its state (on_load) and its session")
    async def panel_info(name: str) -> dict[str, Any]:
        panel = await run_in_threadpool(manager.panels.get, name)
        session = manager.panels.session_of(panel.name)
        state = await (_result(session.load()) if session else panel.on_load())
        return {**panel.info(), "state": jsonable(state), "session": session.describe() if session else None}

    @router.get("/env-panels/{name}/options/{field}", summary="A field's options (on_options)")
    async def panel_options(name: str, field: str) -> dict[str, Any]:
        panel = await run_in_threadpool(manager.panels.get, name)
        session = manager.panels.session_of(panel.name)
        result = await (_result(session.options(field)) if session else panel.on_options(field))
        if not result.get("ok", True):
            raise _refused_hook(panel, result, "field")
        return {"name": field, "options": jsonable(result.get("options") or [])}

    @router.post("/env-panels/{name}/field", summary="Change a field (on_field_change); its intent is carried out")
    async def panel_field(name: str, change: FieldChange) -> dict[str, Any]:
        """409 while an execution runs and the field would move the episode; 422 when the panel refuses the
        value. A committed episode change forwards `episode_reset` to the session's runner."""
        panel = await run_in_threadpool(manager.panels.get, name)
        session = manager.panels.session_of(panel.name)
        if session is not None:
            result = await _result(session.change_field(change.name, change.value))
        else:
            result = await panel.on_field_change(change.name, change.value)
            result["forwarded"] = False
        if not result.get("ok", True):
            raise _refused_hook(panel, result, "value")
        return {**jsonable(result), "session": session.describe() if session else None}

    @router.post("/env-panels/{name}/action", summary="Press an action (on_action); its intent is carried out")
    async def panel_action(name: str, action: ActionRequest) -> dict[str, Any]:
        """Play / Pause / Step / Stop drive the panel's session (409 without one, or when the action is not enabled
        in the session's state)."""
        panel = await run_in_threadpool(manager.panels.get, name)
        session = manager.panels.session_of(panel.name)
        if session is not None:
            result = await _result(session.act(action.name))
        else:
            result = await panel.on_action(action.name)
            if result.get("ok", True) and result.get("side_effect") in _RUN_EFFECTS:
                raise SessionConflict(
                    f"panel {panel.name!r} has no session to {result['side_effect']}: create one with "
                    "POST /api/sessions"
                )
        if not result.get("ok", True):
            raise _refused_hook(panel, result, "name")
        return {**jsonable(result), "session": session.describe() if session else None}

    # -- sessions ---------------------------------------------------------------------------------------------------

    @router.post("/sessions", status_code=201, summary="Start a session: an agent or a saved graph, and a placement")
    async def create(request: SessionRequest) -> dict[str, Any]:
        """Blocks until the session's env and runner are built. 422 names what is wrong (an unknown agent, an
        invalid graph with its typed per-node errors, a placement value); 409 when the panel is taken."""
        session = await run_in_threadpool(manager.create, request)
        return session.describe()

    @router.get("/sessions", summary="Every session")
    def sessions() -> dict[str, Any]:
        return {"sessions": [session.describe() for session in manager.all()]}

    @router.get("/sessions/{session_id}", summary="A session's state, current step and last outcome")
    def session_info(session_id: str) -> dict[str, Any]:
        return manager.get(session_id).describe()

    @router.delete("/sessions/{session_id}", summary="Close a session (its execution, env and subprocesses)")
    async def delete(session_id: str) -> JSONResponse:
        """200 once closed; 202 while the session's thread is still in an env or agent call (it closes when the call
        returns, and says `closing` until then)."""
        closed = await run_in_threadpool(manager.delete, session_id)
        state = (SessionState.CLOSED if closed else SessionState.CLOSING).value
        return JSONResponse({"id": session_id, "state": state}, status_code=200 if closed else 202)

    @router.get("/sessions/{session_id}/frame", summary="The session's latest camera frame, as PNG")
    async def frame(session_id: str) -> Response:
        session = manager.get(session_id)
        latest = session.frames.latest
        if latest is None:
            raise NotFound(f"session {session_id} has no frame yet (its env renders none, or nothing ran)")
        data = await run_in_threadpool(latest.png)
        headers = {"Cache-Control": "no-store", "X-Frame-Number": str(latest.number), "X-Frame-Step": str(latest.step)}
        return Response(data, media_type="image/png", headers=headers)

    @router.get("/sessions/{session_id}/events", summary="The session's recent trace events after a position")
    def events(
        session_id: str,
        after: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_BATCH)] = 500,
    ) -> dict[str, Any]:
        batch = manager.get(session_id).feed.read(after, limit)
        return {"position": batch.position, "dropped": batch.dropped, "events": batch.events}

    @router.websocket("/sessions/{session_id}/stream")
    async def stream(websocket: WebSocket, session_id: str, after: int = 0) -> None:
        """Messages (JSON text): first `{"type": "hello", "session": ...}`, then `{"type": "update", "position",
        "dropped", "events", "session"}` as events come (at most every FLUSH_S), and at least every KEEPALIVE_S.
        A client that reads slowly gets fewer, larger messages and a `dropped` count, never a slower execution."""
        try:
            session = manager.get(session_id)
        except NotFound:
            await websocket.close(code=4404, reason=f"no session {session_id}")
            return
        if streams.get(session_id, 0) >= MAX_STREAMS:
            await websocket.close(code=1013, reason=f"session {session_id} has {MAX_STREAMS} streams already")
            return
        try:
            slots.take()
        except StreamsFull as exc:
            await _deny(websocket, 429, str(exc))
            return
        streams[session_id] = streams.get(session_id, 0) + 1
        try:
            await websocket.accept()
            await _serve_stream(websocket, session, min(max(0, after), session.feed.position))
        except WebSocketDisconnect:
            pass
        finally:
            streams[session_id] -= 1
            slots.give_back()

    return router


async def _deny(websocket: WebSocket, status: int, detail: str) -> None:
    """Refuse a websocket handshake with an HTTP answer (`status`, `{"detail": ...}`) where the server can send one
    (the ASGI denial response), else by closing it (the client then sees 403) with "try again later" (1013)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse({"detail": detail}, status_code=status))
    else:
        await websocket.close(code=1013, reason=detail[:120])


async def _serve_stream(websocket: WebSocket, session: Session, position: int) -> None:
    gone = asyncio.Event()

    async def incoming() -> None:  # the client says nothing we need; we only notice it leave
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
        finally:
            gone.set()

    reader = asyncio.create_task(incoming())
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


def _json(message: dict[str, Any]) -> str:
    return to_json(message, fallback=jsonable, inf_nan_mode="null").decode()
