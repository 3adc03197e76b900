"""An exception raised in a child process, sent to its parent and raised there again, by type.

What travels is plain data (strings, numbers, lists: it pickles and packs as msgpack). The exceptions that decide an
episode's status (every one in `hylo.core.errors`, and those a layer above registers with `carry`) come back as
themselves, with the attributes they were built from, so that a timeout in an isolated agent is the episode's
`timeout` and a diverged simulator in a subprocess its `infra_invalid`, as they would be in process. Any other comes
back as a `RemoteError` named after the original (`KeyError`), with the original's message. Either way the child's
traceback is the copy's cause (`RemoteTraceback`), so the episode's detail shows where the child failed.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Mapping
from typing import Any, cast

from hylo.core.errors import (
    AgentTimeout,
    HyloFailure,
    IncompatibleComponents,
    InvalidAction,
    OverLimit,
    SafetyAbort,
    SignalFailed,
    SimulationDiverged,
)

_CARRIED: dict[str, tuple[type[BaseException], tuple[str, ...]]] = {}


def carry(kind: type[BaseException], *fields: str) -> None:
    """Carry `kind` (and its subclasses, as `kind`) across a process boundary as itself: rebuilt as
    `kind(*fields' values)`, or `kind(message)` without fields. The class registered first that an exception is an
    instance of is the one it travels as; both sides must have registered it (else it comes back a `RemoteError`)."""
    _CARRIED.setdefault(_key(kind), (kind, fields))


def _key(kind: type[BaseException]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


carry(AgentTimeout, "latency_s", "limit_s", "call")
carry(OverLimit, "status", "reason", "detail")
carry(SimulationDiverged, "warning", "detail")
carry(InvalidAction)
carry(SafetyAbort, "guard", "reason")
carry(SignalFailed, "reason", "detail", "status")
carry(IncompatibleComponents, "problems")


def error_payload(exc: BaseException) -> dict[str, Any]:
    """What travels of `exc`: its type, message and traceback, and for a carried type what rebuilds it."""
    kind = type(exc)
    try:
        message = str(exc)
    except Exception:
        message = f"<{kind.__name__} whose message cannot be shown>"
    payload: dict[str, Any] = {
        "type": kind.__qualname__,
        "module": kind.__module__,
        "message": message,
        "traceback": "".join(traceback.format_exception(exc)),
    }
    for key, (base, fields) in _CARRIED.items():
        if isinstance(exc, base):
            payload["as"] = key
            payload["args"] = [_plain(getattr(exc, field, None)) for field in fields]
            break
    return payload


def _plain(value: Any) -> Any:
    """An attribute as data that travels (a numpy float as a float, a tuple of problems as a list)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


class RemoteTraceback(HyloFailure):
    """The traceback of an exception raised in a child process: the cause of its copy raised in the parent."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


class RemoteError(HyloFailure):
    """An exception of a type that is not carried, raised in a child process and raised again in its parent. Its
    class is named after the original's (`ValueError`), `remote_type` is the original's qualified name and its
    message is the original's."""

    remote_type: str = ""

    @property
    def remote_traceback(self) -> str:
        cause = self.__cause__
        return cause.text if isinstance(cause, RemoteTraceback) else ""


@functools.cache
def _remote_class(module: str, name: str) -> type[RemoteError]:
    attrs = {"remote_type": f"{module}.{name}", "__module__": module, "__qualname__": name}
    return cast(type[RemoteError], type(name.rpartition(".")[2], (RemoteError,), attrs))


def rebuild_error(payload: Mapping[str, Any]) -> Exception:
    """The parent's copy of an exception its child sent (see `error_payload`)."""
    message = str(payload.get("message", ""))
    carried = _CARRIED.get(str(payload.get("as")))
    exc: BaseException | None = None
    if carried is not None:
        kind, fields = carried
        args = list(payload.get("args") or [])
        try:
            exc = kind(*args) if fields else kind(message)
        except Exception:  # the two sides disagree about the type: it comes back by name
            exc = None
    if not isinstance(exc, Exception):
        exc = _remote_class(str(payload.get("module")), str(payload.get("type")))(message)
    exc.__cause__ = RemoteTraceback(str(payload.get("traceback", "")))
    return exc
