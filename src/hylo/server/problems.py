"""Every error's HTTP answer, in one table: the routes raise hylo's exceptions, and this mapping (registered once, as
the app's `exception_handlers`) turns each into its status code and problem body.

A plain refusal answers `{"detail": message}`; a refusal of a value answers 422 with one entry per problem, each
naming where it is (`loc`, as FastAPI's own validation errors do) or which graph node it is about. An exception is
answered by the entry of its nearest class (`GraphTooLarge` before `GraphFormatError`, any other `HyloError` 500).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.responses import Response

from hylo.core.errors import HyloError, shown
from hylo.evallog.logdir import RunNotFound
from hylo.experiments.ab import ABNotFound
from hylo.experiments.sweep import SweepNotFound
from hylo.graph.compile import GraphInvalid
from hylo.graph.model import GraphFormatError
from hylo.graph.store import GraphNameError, GraphNotFound, GraphReadOnly, GraphTooLarge
from hylo.jobs.errors import JobConflict, JobNotFound, JobRefused, QueueFull, SchedulerBusy
from hylo.panels.base import PanelRefused
from hylo.panels.remote import RemotePanelError
from hylo.server.events import StreamsFull
from hylo.sessions.manager import NotFound, SessionRefused
from hylo.sessions.state import SessionConflict, SessionGone

Handler = Callable[[Request, Any], Coroutine[Any, Any, Response]]


class NoRoute(HyloError):
    """A path the API does not serve (404)."""


PLAIN: Mapping[type[Exception], int] = {
    GraphNameError: 400,
    JobNotFound: 404,
    RunNotFound: 404,
    ABNotFound: 404,
    SweepNotFound: 404,
    GraphNotFound: 404,
    NotFound: 404,
    NoRoute: 404,
    JobConflict: 409,
    SessionConflict: 409,
    SessionGone: 409,
    GraphReadOnly: 409,
    GraphTooLarge: 413,
    QueueFull: 429,
    StreamsFull: 429,
    HyloError: 500,  # any other: a fault met while serving the request
    RemotePanelError: 502,
    SchedulerBusy: 503,
}
"""The errors answered `{"detail": message}`, with their status code."""


def _value_error(loc: list[str], message: str) -> dict[str, Any]:
    return {"loc": loc, "msg": message, "type": "value_error"}


def _job_refused(exc: JobRefused) -> JSONResponse:
    loc = ["body", exc.field] if exc.field else ["body"]
    return JSONResponse({"detail": [_value_error(loc, exc.message)]}, status_code=422)


def _session_refused(exc: SessionRefused) -> JSONResponse:
    if exc.errors:  # a graph's typed problems
        return JSONResponse({"detail": exc.errors, "message": exc.message}, status_code=422)
    loc = ["body", *exc.field.split(".")] if exc.field else ["body"]
    return JSONResponse({"detail": [_value_error(loc, exc.message)]}, status_code=422)


def _panel_refused(exc: PanelRefused) -> JSONResponse:
    """A panel's refusal that no route named the field of (the routes of `hylo.server.panels` do)."""
    return JSONResponse({"detail": [_value_error(["body"], str(exc))]}, status_code=422)


def _graph_invalid(exc: GraphInvalid) -> JSONResponse:
    return JSONResponse({"detail": [error.to_json() for error in exc.errors]}, status_code=422)


def _graph_unreadable(exc: GraphFormatError) -> JSONResponse:
    """A saved file that no longer reads (edited by hand)."""
    return JSONResponse({"detail": f"the saved graph cannot be read: {exc}"}, status_code=500)


def _invalid_request(exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422, with each error's input and context shown as text (a value JSON cannot carry, such as the
    infinity `1e400` parses to, must not break the answer)."""
    return JSONResponse({"detail": [_plain_problem(error) for error in exc.errors()]}, status_code=422)


def _plain_problem(error: Any) -> dict[str, Any]:
    problem: dict[str, Any] = {
        "loc": [part if isinstance(part, (int, str)) else str(part) for part in error.get("loc", ())],
        "msg": str(error.get("msg", "")),
        "type": str(error.get("type", "value_error")),
    }
    if "input" in error and error.get("type") != "missing":
        problem["input"] = shown(error["input"])
    return problem


SHAPED: Mapping[type[Exception], Callable[[Any], JSONResponse]] = {
    JobRefused: _job_refused,
    SessionRefused: _session_refused,
    PanelRefused: _panel_refused,
    GraphInvalid: _graph_invalid,
    GraphFormatError: _graph_unreadable,
    RequestValidationError: _invalid_request,
}
"""The errors whose answer has a body of its own."""


def _plain(status_code: int) -> Handler:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status_code)

    return handle


def _shaped(answer: Callable[[Any], JSONResponse]) -> Handler:
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return answer(exc)

    return handle


def exception_handlers() -> dict[int | type[Exception], Handler]:
    """The app's `exception_handlers`: every entry of `PLAIN` and `SHAPED`."""
    handlers: dict[int | type[Exception], Handler] = {error: _plain(code) for error, code in PLAIN.items()}
    handlers.update({error: _shaped(answer) for error, answer in SHAPED.items()})
    return handlers
