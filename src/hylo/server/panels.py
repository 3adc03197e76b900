"""The env-panel routes of the interactive API (under `/api/env-panels`, docs/live.md).

The router knows nothing about any env: it dispatches to the registered panel and carries out the intent the panel
returns, through the panel's session (Play / Pause / Step / Stop, a signal into the session's runner). A panel
without a session answers its hooks itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from hylo.core.jsonable import jsonable
from hylo.panels.base import BaseEnvPanel, PanelRefused, SideEffect
from hylo.server.dependencies import Sessions
from hylo.server.models import FieldOptions, PanelAnswer, PanelInfo, PanelList, PanelSummary
from hylo.sessions.manager import SessionManager, SessionRefused
from hylo.sessions.session import Session
from hylo.sessions.state import SessionConflict, SessionState

T = TypeVar("T")

COMMAND_TIMEOUT_S = 60.0
"""How long a request waits for its session's thread (a command waits for the current env step to end)."""

_RUN_EFFECTS = frozenset(SideEffect) - {SideEffect.NONE}
"""The intents only a session carries out."""

router = APIRouter(prefix="/env-panels", tags=["env panels"])


class FieldChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=100)
    value: Any = None


class ActionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=100)


async def _result(future: concurrent.futures.Future[T]) -> T:
    """The command's result. One the session has not taken within COMMAND_TIMEOUT_S (it is inside a long env step or
    agent call) is withdrawn and answered 409; one it has taken is waited for to its end."""
    waiting = asyncio.wrap_future(future)
    try:
        return await asyncio.wait_for(asyncio.shield(waiting), COMMAND_TIMEOUT_S)
    except TimeoutError:
        if future.cancel():
            raise SessionConflict(
                f"the session did not take the request within {COMMAND_TIMEOUT_S:g} s (an env step or agent call is "
                "still running); nothing was done, try again"
            ) from None
        return await waiting


class _Reply(Protocol):
    """A hook's answer as an object (`PanelReply`, `PanelState`): its JSON is `to_json()`."""

    def to_json(self) -> dict[str, Any]: ...


A = TypeVar("A", bound=_Reply)


async def _panel(manager: SessionManager, name: str) -> tuple[BaseEnvPanel, Session | None]:
    """The panel named `name` (404 for none) and the session it belongs to, if any."""
    panel = await run_in_threadpool(manager.panels.get, name)
    return panel, manager.panels.session_of(panel.name)


async def _answer(call: Awaitable[A], field: str) -> dict[str, Any]:
    """The answer of a hook, as JSON values. A refusal (`PanelRefused`) is a 422 naming `field` of the request's
    body."""
    try:
        answer = await call
    except PanelRefused as exc:
        raise SessionRefused(str(exc), field) from None
    return _plain(answer)


def _plain(answer: _Reply) -> dict[str, Any]:
    """A hook's answer as JSON values."""
    return dict(jsonable(answer.to_json()))


def _with_session(answer: dict[str, Any], session: Session | None) -> PanelAnswer:
    """A hook's answer as the routes give it: with the panel's session."""
    return PanelAnswer.model_validate({**answer, "session": session.describe() if session else None})


@router.get("", response_model=PanelList, summary="Every env panel, and the session each belongs to")
async def panels(manager: Sessions) -> PanelList:
    listed = []
    for name in await run_in_threadpool(manager.panels.names):
        panel = await run_in_threadpool(manager.panels.get, name)
        session = manager.panels.session_of(name)
        listed.append(
            PanelSummary.model_validate(
                {
                    "name": panel.name,
                    "display_name": panel.display_name,
                    "context": panel.info()["context"],
                    "session": session.id if session else None,
                    "state": session.state if session else SessionState.IDLE,
                }
            )
        )
    return PanelList(panels=listed)


@router.get(
    "/{name}", response_model=PanelInfo, summary="A panel's fields and actions, its state (on_load) and its session"
)
async def panel_info(name: str, manager: Sessions) -> PanelInfo:
    """`info()` (fields, actions, context), `on_load()` as `state` (availability, `step_budget`, the field values, the
    placed `episode_id`) and the panel's session."""
    panel, session = await _panel(manager, name)
    state = await (_result(session.load()) if session is not None else panel.on_load())
    return PanelInfo.model_validate(
        {**panel.info(), "state": _plain(state), "session": session.describe() if session else None}
    )


@router.get("/{name}/options/{field}", response_model=FieldOptions, summary="A field's options (on_options)")
async def panel_options(name: str, field: str, manager: Sessions) -> FieldOptions:
    panel, session = await _panel(manager, name)
    if session is not None:
        answer = await _answer(_result(session.options(field)), "field")
    else:
        answer = await _answer(panel.on_options(field), "field")
    return FieldOptions(name=field, options=answer.get("options") or [])


@router.post(
    "/{name}/field",
    response_model=PanelAnswer,
    response_model_exclude_unset=True,
    summary="Change a field (on_field_change); its intent is carried out",
)
async def panel_field(name: str, change: FieldChange, manager: Sessions) -> PanelAnswer:
    """409 while an execution runs and the field would move the episode; 422 when the panel refuses the value. A
    committed episode change forwards `episode_reset` to the session's runner."""
    panel, session = await _panel(manager, name)
    if session is not None:
        answer = await _answer(_result(session.change_field(change.name, change.value)), "value")
    else:  # the panel places episodes itself: its `episode_reset` has nowhere to go
        answer = {**await _answer(panel.on_field_change(change.name, change.value), "value"), "forwarded": False}
    return _with_session(answer, session)


@router.post(
    "/{name}/action",
    response_model=PanelAnswer,
    response_model_exclude_unset=True,
    summary="Press an action (on_action); its intent is carried out",
)
async def panel_action(name: str, action: ActionRequest, manager: Sessions) -> PanelAnswer:
    """Play / Pause / Step / Stop drive the panel's session (409 without one, or when the action is not enabled in
    the session's state)."""
    panel, session = await _panel(manager, name)
    if session is not None:
        return _with_session(await _answer(_result(session.act(action.name)), "name"), session)
    answer = await _answer(panel.on_action(action.name), "name")
    if answer.get("side_effect") in _RUN_EFFECTS:
        raise SessionConflict(
            f"panel {panel.name!r} has no session to {answer['side_effect']}: create one with POST /api/sessions"
        )
    return _with_session(answer, None)
