"""The EventBus: every trace event goes through it; subscribers (recorders, viewers, critics) listen.

Events are built only when someone listens: with no subscriber, `emit` is a flag test. A subscriber that raises is
detached and the episode goes on: a broken viewer must never change an evaluation's result.

The loop's own events are the trace's hot path (seven a step). When every subscriber takes records (the EvalLog's
trace buffer), `emit_trusted` and `emit_group` hand each one over as a tuple of what it was emitted with: no dict, no
pydantic object, no JSON on the loop's thread. The records become JSON lines later, elsewhere (`record_fields`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from time import time as now
from typing import IO, Any, Protocol, runtime_checkable

from pydantic_core import to_json

from hylo.core.events import BaseEvent, Record, defaults
from hylo.core.jsonable import jsonable

log = logging.getLogger(__name__)

Subscriber = Callable[[BaseEvent], None]


@runtime_checkable
class RecordSubscriber(Protocol):
    """A subscriber that takes each event as a `Record` (a tuple of its class, envelope and payload) and turns it into
    JSON later, off the episode loop (the EvalLog's trace buffer): the cheapest hand-over there is. The record is the
    subscriber's to keep; its payload's values are JSON-ready (jsonable) or immutable. `record_fields` gives the
    event's plain field dict."""

    def __call__(self, event: BaseEvent) -> None: ...

    def write_record(self, record: Record) -> None: ...


@runtime_checkable
class FieldSubscriber(Protocol):
    """A subscriber that takes each event as the plain dict of its JSON fields (`write_fields`) and serialises it
    later, off the episode loop (the EvalLog's trace buffer). The dict is the subscriber's to keep: the bus never
    touches it again, and its values are JSON-ready (jsonable) or immutable."""

    def __call__(self, event: BaseEvent) -> None: ...

    def write_fields(self, fields: dict[str, Any], kind: str) -> None: ...


_EVENT, _JSON, _FIELDS, _RECORD = 0, 1, 2, 3


def _mode(subscriber: Subscriber) -> int:
    if isinstance(subscriber, RecordSubscriber):
        return _RECORD
    if isinstance(subscriber, FieldSubscriber):
        return _FIELDS
    if isinstance(subscriber, JsonSubscriber):
        return _JSON
    return _EVENT


@runtime_checkable
class JsonSubscriber(Protocol):
    """A subscriber that only needs each event's JSON line (a log writer). When every subscriber is one, the bus
    serialises events straight from their fields and never builds the pydantic objects (the hot path of a trace)."""

    def __call__(self, event: BaseEvent) -> None: ...

    def write_json(self, line: bytes, kind: str) -> None: ...


class EventBus:
    """Fan-out of typed trace events to subscribers, stamping ids, sequence numbers and times.

    Thread-safe: agents may emit from a worker or reasoner thread. `emit` never raises: a subscriber that raises is
    detached (a `critical` one is also listed in `critical_failures`, and the Kernel marks that episode and every
    later one `infra_invalid`, since nothing records them, until a new critical subscriber is added); an event that
    cannot be built is logged and counted in `dropped`.
    """

    __slots__ = (
        "_critical",
        "_lock",
        "_placed",
        "_raw_only",
        "_routes",
        "_sink",
        "_wants_json",
        "_wants_records",
        "active",
        "critical_failures",
        "detached",
        "dropped",
        "episode_id",
        "run_id",
        "seq",
        "sim_time",
    )

    def __init__(self, run_id: str = "") -> None:
        self._routes: list[tuple[Subscriber, int]] = []  # (subscriber, what it takes: event, JSON line or fields)
        self._critical: set[int] = set()
        self._lock = threading.RLock()
        self.detached: list[tuple[Subscriber, BaseException]] = []
        self.critical_failures: list[tuple[Subscriber, BaseException]] = []
        self.dropped = 0
        self.active = False
        self._raw_only = False
        self._wants_json = False
        self._wants_records = False
        self._sink: Callable[[Record], None] | None = None  # the sole subscriber's write_record, when it takes records
        self.run_id = run_id
        self.episode_id = ""
        self.seq = 0
        self.sim_time = 0.0
        self._placed = False

    def subscribe(self, subscriber: Subscriber, *, critical: bool = False) -> Subscriber:
        """Add a subscriber. `critical=True` for a recorder whose failure makes the episode's record invalid."""
        with self._lock:
            self._routes = [*self._routes, (subscriber, _mode(subscriber))]
            if critical:
                self._critical.add(id(subscriber))
                self.critical_failures.clear()  # a new record-keeper: episodes are recorded again
            self._refresh()
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._routes = [route for route in self._routes if route[0] != subscriber]
            self._critical.discard(id(subscriber))
            self._refresh()

    def _refresh(self) -> None:
        self.active = bool(self._routes)
        self._raw_only = self.active and all(mode != _EVENT for _, mode in self._routes)
        self._wants_json = any(mode == _JSON for _, mode in self._routes)
        self._wants_records = any(mode == _RECORD for _, mode in self._routes)
        only = self._routes[0] if len(self._routes) == 1 else None
        self._sink = only[0].write_record if only is not None and only[1] == _RECORD else None  # type: ignore[attr-defined]

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        return tuple(subscriber for subscriber, _ in self._routes)

    def place(self, episode_id: str) -> None:
        """The placement owner (an env panel) placed `episode_id`: events from now on (its `episode_reset`) belong to
        that episode, and the episode's own events continue their sequence."""
        with self._lock:
            self.episode_id = episode_id
            self.seq = 0
            self.sim_time = 0.0
            self._placed = True

    def begin_episode(self, episode_id: str) -> None:
        with self._lock:
            placed, self._placed = self._placed and episode_id == self.episode_id, False
            if placed:
                return
            self.episode_id = episode_id
            self.seq = 0
            self.sim_time = 0.0

    def emit(self, cls: type[BaseEvent], /, **payload: Any) -> BaseEvent | None:
        """Validate and deliver one event; returns it, or None when nobody listens or it could not be built."""
        if not self.active:
            return None
        with self._lock:
            return self._emit(cls, payload, now())

    def _emit(self, cls: type[BaseEvent], payload: dict[str, Any], wall_time: float) -> BaseEvent | None:
        """`emit` under the lock, at `wall_time`."""
        try:
            event = cls(
                run_id=self.run_id,
                episode_id=self.episode_id,
                seq=self.seq,
                sim_time=self.sim_time,
                wall_time=wall_time,
                **payload,
            )
            line = event.__pydantic_serializer__.to_json(event) if self._wants_json else None
        except Exception as exc:
            self._drop(cls, exc)
            return None
        self.seq += 1
        self._deliver(event, line, event.event)
        return event

    def emit_trusted(self, cls: type[BaseEvent], /, **payload: Any) -> None:
        """The loop's own events, whose payloads it builds to the schema (JSON-ready values): when every subscriber
        takes records, fields or JSON lines, no pydantic object is built (the trace's hot path)."""
        with self._lock:
            sink = self._sink
            if sink is not None:  # the EvalLog's case: one tuple, handed over
                seq = self.seq
                self.seq = seq + 1
                try:
                    sink((cls, self.run_id, self.episode_id, seq, self.sim_time, now(), payload))
                except Exception as exc:
                    self._detach(self._routes[0][0], exc)
                return
            self._emit_trusted(cls, payload, now())

    def _emit_trusted(self, cls: type[BaseEvent], payload: dict[str, Any], wall_time: float) -> None:
        """A trusted event to subscribers other than one record sink, under the lock, at `wall_time`."""
        if not self.active:
            return
        if not self._raw_only:
            self._emit(cls, payload, wall_time)
            return
        # JSON lines, field dicts, records (a JSONL recorder, a live feed, the trace buffer beside another)
        fields = {
            **defaults(cls),
            "run_id": self.run_id,
            "episode_id": self.episode_id,
            "seq": self.seq,
            "sim_time": self.sim_time,
            "wall_time": wall_time,
            **payload,
        }
        record = (
            (cls, self.run_id, self.episode_id, self.seq, self.sim_time, wall_time, payload)
            if self._wants_records
            else None
        )
        self._deliver_trusted(cls, fields, record)

    def emit_group(self, *events: tuple[type[BaseEvent], dict[str, Any]]) -> None:
        """Several of the loop's own events that happen at one moment (a review and its action; a step's result and
        its observation), in order, as `emit_trusted` would deliver them one by one, but under one lock and one
        clock reading: they share their `wall_time`. Each payload dict is the bus's to keep."""
        with self._lock:
            sink = self._sink
            if sink is None:
                wall_time = now()
                for cls, payload in events:
                    self._emit_trusted(cls, payload, wall_time)
                return
            seq, run_id, episode_id, sim_time, wall_time = self.seq, self.run_id, self.episode_id, self.sim_time, now()
            self.seq = seq + len(events)
            try:
                for cls, payload in events:
                    sink((cls, run_id, episode_id, seq, sim_time, wall_time, payload))
                    seq += 1
            except Exception as exc:
                self._detach(self._routes[0][0], exc)

    def _deliver_trusted(self, cls: type[BaseEvent], fields: dict[str, Any], record: Record | None) -> None:
        """A trusted event to subscribers none of which wants a typed event (under the lock); `record` when one of
        them takes records."""
        line = None
        if self._wants_json:
            try:
                line = to_json(fields, inf_nan_mode="null", fallback=jsonable)  # NaN as the models write it
            except Exception as exc:
                self._drop(cls, exc)
                return
        self.seq += 1
        self._deliver(None, line, fields["event"], fields, record)

    def _deliver(
        self,
        event: BaseEvent | None,
        line: bytes | None,
        kind: str,
        fields: dict[str, Any] | None = None,
        record: Record | None = None,
    ) -> None:
        for subscriber, mode in self._routes:  # (un)subscribe replaces the list, never mutates it
            try:
                if mode == _JSON and line is not None:
                    subscriber.write_json(line, kind)  # type: ignore[attr-defined]
                elif mode in (_FIELDS, _RECORD):
                    if fields is None and event is not None:
                        fields = event.model_dump(mode="json")
                    if mode == _FIELDS:
                        subscriber.write_fields(fields, kind)  # type: ignore[attr-defined]
                    else:
                        if record is None and event is not None and fields is not None:
                            record = (type(event), event.run_id, event.episode_id, event.seq, event.sim_time,
                                      event.wall_time, fields)  # fmt: skip
                        subscriber.write_record(record)  # type: ignore[attr-defined]
                elif event is not None:
                    subscriber(event)
            except Exception as exc:
                self._detach(subscriber, exc)

    def _detach(self, subscriber: Subscriber, exc: BaseException) -> None:
        log.warning("trace subscriber %r raised %r; detached", subscriber, exc)
        self.detached.append((subscriber, exc))
        if id(subscriber) in self._critical:
            self.critical_failures.append((subscriber, exc))
        self.unsubscribe(subscriber)

    def _drop(self, cls: type[BaseEvent], exc: BaseException) -> None:
        log.warning("could not build a %s trace event: %r", cls.__name__, exc)
        self.dropped += 1


class MemoryRecorder:
    """Keeps every event in a list."""

    def __init__(self) -> None:
        self.events: list[BaseEvent] = []

    def __call__(self, event: BaseEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.event for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.event == kind]


class JsonlRecorder:
    """Writes one JSON line per event; flushes at each episode end so a crash loses at most one episode's tail."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = self.path.open("ab")

    def __call__(self, event: BaseEvent) -> None:
        self.write_json(event.__pydantic_serializer__.to_json(event), event.event)

    def write_json(self, line: bytes, kind: str) -> None:
        if self._file is None:
            raise RuntimeError(f"JSONL recorder for {self.path} is closed")
        self._file.write(line + b"\n")
        if kind == "episode.end":
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> JsonlRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
