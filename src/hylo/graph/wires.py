"""Wire types: what travels on an edge. An edge is accepted when its source port's wire fits its target port's."""

from __future__ import annotations

from enum import StrEnum


class Wire(StrEnum):
    ANY = "any"
    OBSERVATION = "observation"
    IMAGE = "image"
    TEXT = "text"
    NUMBER = "number"
    INTEGER = "integer"
    BOOL = "bool"
    VECTOR = "vector"
    ACTION = "action"
    CHUNK = "chunk"
    STEP = "step"
    JSON = "json"


_WIDENS: dict[Wire, frozenset[Wire]] = {
    Wire.INTEGER: frozenset({Wire.NUMBER, Wire.JSON}),
    Wire.NUMBER: frozenset({Wire.JSON}),
    Wire.BOOL: frozenset({Wire.JSON}),
    Wire.TEXT: frozenset({Wire.JSON}),
    Wire.STEP: frozenset({Wire.JSON}),
    Wire.VECTOR: frozenset({Wire.JSON}),
    Wire.ACTION: frozenset({Wire.CHUNK}),  # a single action is a chunk of one
}
"""Besides equal wires and `any` on either side, the wires a value may go to (an integer is a number, ...)."""


def widening() -> dict[str, list[str]]:
    """`_WIDENS` as JSON: for each wire, the other wires its values may go to (the catalog serves it, so that a
    canvas refuses exactly the edges the engine refuses)."""
    return {source.value: sorted(target.value for target in targets) for source, targets in _WIDENS.items()}


def fits(source: Wire, target: Wire) -> bool:
    """Whether a value on a `source` wire may feed a `target` port."""
    if source is target or source is Wire.ANY or target is Wire.ANY:
        return True
    return target in _WIDENS.get(source, frozenset())
