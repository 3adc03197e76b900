"""What a watched execution shows of its graph: each node's state and the last value that crossed each edge.

A `NodeWatch` is kept by a `GraphRunner` whose `on_nodes` is set (an interactive session's canvas view); a batch run
has none and pays nothing. Firing a node only marks it (and keeps a reference to its outputs); the watch is read at
the boundaries of the execution: after the pre-loop band, after an iteration (at most one every `REPORT_EVERY_S`, so
a fast env sends a handful of messages a second, not one per node per step) and at the end. A message holds every
node's state and the last value of every edge, summarised as short text (an array's dtype, shape, min and max, never
its values), each at most `MAX_SUMMARY` characters, summarised only when its source fired since the last message.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from hylo.core.chunk import ActionChunk
from hylo.graph.model import EdgeSpec

log = logging.getLogger(__name__)

REPORT_EVERY_S = 0.1
"""The least time between two messages of a running loop (the first iteration's and the end's are always sent)."""

MAX_SUMMARY = 160
"""The most characters of one edge's summary."""

MAX_ITEMS = 6
"""The most items of a mapping or a sequence a summary names."""

MAX_DEPTH = 2
"""How deeply a summary looks into nested mappings and sequences."""


class NodeState(enum.StrEnum):
    """Where a node stands in the current execution."""

    IDLE = "idle"
    """It has not fired (yet)."""
    FIRING = "firing"
    """Its band is running: the loop's nodes fire once per iteration until the loop ends."""
    DONE = "done"
    """It fired, and its band has finished."""
    FAILED = "failed"
    """Its failure ended the execution."""


def edge_key(edge: EdgeSpec) -> str:
    """An edge's name on the canvas: `source.port->target.port`."""
    return f"{edge.source}.{edge.sourceHandle}->{edge.target}.{edge.targetHandle}"


class NodeWatch:
    """The states of a graph's nodes and its edges' last values, for one execution at a time. `report(message)` is
    handed each message."""

    def __init__(self, node_ids: Iterable[str], edges: Iterable[EdgeSpec], report: Callable[[dict[str, Any]], None]):
        self._ids = tuple(node_ids)
        self._edges = tuple((edge_key(edge), edge.source, edge.sourceHandle) for edge in edges)
        self.report = report
        self.states: dict[str, NodeState] = {}
        self.fires: dict[str, int] = {}
        self.values: dict[str, str] = {}
        self._outputs: dict[str, Mapping[str, Any]] = {}
        self._sent = 0.0
        self._held: dict[str, Any] | None = None
        self.open()

    def open(self) -> None:
        """A new execution: every node idle, no value seen."""
        self.states = dict.fromkeys(self._ids, NodeState.IDLE)
        self.fires = dict.fromkeys(self._ids, 0)
        self.values = {}
        self._outputs = {}
        self._sent = 0.0
        self._held = None

    def fired(self, node_id: str, outputs: Mapping[str, Any]) -> None:
        """Node `node_id` fired and put `outputs` on its ports."""
        self.fires[node_id] = self.fires.get(node_id, 0) + 1
        if self.states.get(node_id) is not NodeState.FIRING:
            self.states[node_id] = NodeState.DONE
        self._outputs[node_id] = outputs

    def published(self, node_id: str, outputs: Mapping[str, Any]) -> None:
        """Node `node_id`'s outputs changed without a firing of its own (iterOut's final values once the loop ends)."""
        self._outputs[node_id] = outputs

    def failed(self, node_id: str) -> None:
        self.states[node_id] = NodeState.FAILED

    def running(self, node_ids: Iterable[str]) -> None:
        """The band of `node_ids` (the loop) runs now."""
        for node_id in node_ids:
            if self.states.get(node_id) is not NodeState.FAILED:
                self.states[node_id] = NodeState.FIRING

    def finished(self) -> None:
        """No band runs any more: a firing node has fired (done) or never did (idle)."""
        for node_id, state in self.states.items():
            if state is NodeState.FIRING:
                self.states[node_id] = NodeState.DONE if self.fires.get(node_id) else NodeState.IDLE

    def send(self, *, due: bool = True, **fields: Any) -> None:
        """Report the states and values now (with `fields`); with `due=False`, only if `REPORT_EVERY_S` has passed
        since the last message."""
        now = time.monotonic()
        if not due and now - self._sent < REPORT_EVERY_S:
            self._held = fields
            return
        self._sent = now
        self._held = None
        message = self.message(**fields)
        try:
            self.report(message)
        except Exception as exc:  # a view of the execution, never its end
            log.warning("the node-state report %r raised %r", self.report, exc)

    def flush(self) -> None:
        """Send the message last held back by `send(due=False)`, if any."""
        if self._held is not None:
            self.send(**self._held)

    def message(self, **fields: Any) -> dict[str, Any]:
        """The states now and every edge's last value (those whose source fired since the last message summarised
        anew)."""
        fresh, self._outputs = self._outputs, {}
        for key, source, port in self._edges:
            produced = fresh.get(source)
            if produced is not None and port in produced:
                self.values[key] = summarize(produced[port])
        nodes = {node_id: {"state": state.value, "fires": self.fires.get(node_id, 0)}
                 for node_id, state in self.states.items()}  # fmt: skip
        return {**fields, "nodes": nodes, "values": dict(self.values)}


def summarize(value: Any) -> str:
    """`value` in at most `MAX_SUMMARY` characters: a scalar as it is, a string quoted and cut, an array as its dtype,
    shape, min and max, a mapping or a sequence by its first items, anything else by its type's name."""
    return _cut(_summary(value, 0), MAX_SUMMARY)


def _summary(value: Any, depth: int) -> str:
    if value is None or isinstance(value, (bool, int, np.bool_, np.integer)):
        return str(value)
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, str):
        return repr(_cut(value, 60))
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, ActionChunk):
        return f"chunk of {len(value.actions)}: {_sequence(value.actions, depth)}"
    if isinstance(value, Mapping):
        return _mapping(value, depth)
    if isinstance(value, (list, tuple)):
        as_dict = getattr(value, "_asdict", None)  # a named tuple: its fields by name
        if callable(as_dict):
            return f"{type(value).__name__} {_mapping(as_dict(), depth)}"
        return _sequence(value, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return f"{type(value).__name__} {_mapping(items, depth)}"
    return type(value).__name__


def _array(array: np.ndarray[Any, Any]) -> str:
    shape = "×".join(str(n) for n in array.shape) or "scalar"
    text = f"{array.dtype} {shape}"
    if array.size and array.dtype.kind in "biuf":
        text += f" min {_number(array.min())} max {_number(array.max())}"
    return text


def _number(value: Any) -> str:
    return f"{float(value):.4g}" if isinstance(value, np.floating) else str(value)


def _mapping(value: Mapping[Any, Any], depth: int) -> str:
    if depth >= MAX_DEPTH:
        return f"{{{len(value)} keys}}"
    items = list(value.items())
    parts = [f"{key}: {_summary(item, depth + 1)}" for key, item in items[:MAX_ITEMS]]
    if len(items) > MAX_ITEMS:
        parts.append(f"+{len(items) - MAX_ITEMS}")
    return "{" + ", ".join(parts) + "}"


def _sequence(value: Iterable[Any], depth: int) -> str:
    items = list(value)
    if depth >= MAX_DEPTH:
        return f"[{len(items)} items]"
    parts = [_summary(item, depth + 1) for item in items[:MAX_ITEMS]]
    if len(items) > MAX_ITEMS:
        parts.append(f"+{len(items) - MAX_ITEMS}")
    return "[" + ", ".join(parts) + "]"


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
