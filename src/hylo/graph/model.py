"""The graph format: one JSON document (pydantic) for the canvas, the command line and the executor.

Nodes (id, type, config), edges (source, sourceHandle, target, targetHandle), state containers (name, lifetime,
reducer), a step budget, a default placement (benchmark, split, task) and per-nodeset options. Canvas layout lives in
`layout`, which the engine ignores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hylo.core.errors import HyloError
from hylo.core.signals import ContainerSpec, Lifetime, Reducer
from hylo.core.types import NodesetMode

MAX_GRAPH_BYTES = 2 * 1024 * 1024
"""A graph file larger than this is refused before it is parsed."""


class GraphFormatError(HyloError, ValueError):
    """A graph document that does not parse or does not match the format; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeSpec(_Strict):
    id: str = Field(min_length=1, max_length=200)
    type: str = Field(min_length=1, max_length=300)
    config: dict[str, Any] = Field(default_factory=dict)


class EdgeSpec(_Strict):
    source: str = Field(min_length=1)
    sourceHandle: str = Field(min_length=1)
    target: str = Field(min_length=1)
    targetHandle: str = Field(min_length=1)
    id: str | None = None


class ContainerDecl(_Strict):
    name: str = Field(min_length=1, max_length=200)
    lifetime: Lifetime = Lifetime.EPISODE
    reducer: Reducer = Reducer.LAST
    max_size: int | None = Field(default=None, ge=1)

    def spec(self) -> ContainerSpec:
        return ContainerSpec(self.name, self.lifetime, self.reducer, self.max_size)


class Placement(_Strict):
    """The episode a graph runs on when no placement flag is given."""

    benchmark: str = Field(min_length=1)
    split: str | None = None
    task: str | None = None


class NodesetOptions(_Strict):
    """How a nodeset runs: in the worker's process (`local`) or in a subprocess of its own (`server`)."""

    mode: NodesetMode = NodesetMode.LOCAL


class Graph(_Strict):
    version: Literal[1] = 1
    name: str = Field(default="graph", min_length=1, max_length=200)
    description: str = ""
    placement: Placement | None = None
    step_budget: int | None = Field(default=None, ge=1)
    nodes: list[NodeSpec] = Field(default_factory=list)
    edges: list[EdgeSpec] = Field(default_factory=list)
    containers: list[ContainerDecl] = Field(default_factory=list)
    nodesets: dict[str, NodesetOptions] = Field(default_factory=dict)
    layout: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not all(c.isalnum() or c in "-_." for c in value) or value[0] == ".":
            raise ValueError(f"graph name may hold letters, digits, '-', '_' and '.', got {value!r}")
        return value

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    def digest_data(self) -> dict[str, Any]:
        """What defines the graph's results (everything but its layout and description)."""
        return self.model_dump(mode="json", exclude={"layout", "description"}, exclude_none=True)

    def node(self, node_id: str) -> NodeSpec:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(f"no node {node_id!r} in graph {self.name!r}")


def parse_graph(data: Any, *, source: str = "graph") -> Graph:
    """A graph from its JSON data; raises `GraphFormatError` naming the bad field."""
    try:
        return Graph.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(document)'}: {err['msg']}" for err in exc.errors()[:10]
        )
        raise GraphFormatError(f"{source}: {problems}") from None


def load_graph(path: str | Path) -> Graph:
    """Read a graph file (size-limited); raises `GraphFormatError` naming the file and the problem."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_GRAPH_BYTES:
            raise GraphFormatError(f"{path}: {size} bytes, more than the {MAX_GRAPH_BYTES} a graph file may have")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GraphFormatError(f"no graph file {str(path)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"{path}: cannot read it: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GraphFormatError(f"{path}: not JSON: {exc}") from None
    return parse_graph(data, source=str(path))
