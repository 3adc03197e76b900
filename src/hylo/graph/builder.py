"""A Python builder for graphs: the same JSON as the canvas writes, read back unchanged.

g = GraphBuilder("babyai_expert", placement=Placement(benchmark="babyai", task="GoToLocal"))
reset = g.node("babyai.reset")
loop_in, loop_out = g.loop(carry={"result": "step"})
...
g.connect(step["done"], loop_out["stop"])
graph = g.build()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hylo.core.types import NodesetMode
from hylo.graph.model import ContainerDecl, EdgeSpec, Graph, NodesetOptions, NodeSpec, Placement


@dataclass(frozen=True)
class Handle:
    node: str
    port: str


@dataclass(frozen=True)
class NodeRef:
    id: str

    def __getitem__(self, port: str) -> Handle:
        return Handle(self.id, port)


class GraphBuilder:
    def __init__(
        self,
        name: str = "graph",
        *,
        description: str = "",
        placement: Placement | dict[str, Any] | None = None,
        step_budget: int | None = None,
    ) -> None:
        self._graph: dict[str, Any] = {
            "name": name,
            "description": description,
            "placement": placement,
            "step_budget": step_budget,
        }
        self._nodes: list[NodeSpec] = []
        self._edges: list[EdgeSpec] = []
        self._containers: list[ContainerDecl] = []
        self._nodesets: dict[str, NodesetOptions] = {}
        self._layout: dict[str, Any] = {}
        self._ids: set[str] = set()

    def node(self, type_name: str, node_id: str | None = None, /, **config: Any) -> NodeRef:
        """Add a node of `type_name` (its id defaults to the type's last part, made unique)."""
        if node_id is None:
            base = type_name.rsplit(".", 1)[-1]
            node_id, n = base, 1
            while node_id in self._ids:
                n += 1
                node_id = f"{base}_{n}"
        if node_id in self._ids:
            raise ValueError(f"duplicate node id {node_id!r}")
        self._ids.add(node_id)
        self._nodes.append(NodeSpec(id=node_id, type=type_name, config=config))
        return NodeRef(node_id)

    def loop(
        self, carry: dict[str, str] | None = None, *, ids: tuple[str, str] = ("iterIn", "iterOut")
    ) -> tuple[NodeRef, NodeRef]:
        """Add a paired iterIn / iterOut; `carry` maps each loop-carried port to its wire type."""
        ports = [{"name": name, "wire": wire} for name, wire in (carry or {}).items()]
        loop_in = self.node("iterIn", ids[0], pair=ids[1])
        loop_out = self.node("iterOut", ids[1], pair=ids[0], carry=ports)
        return loop_in, loop_out

    def connect(self, source: Handle, target: Handle) -> GraphBuilder:
        self._edges.append(
            EdgeSpec(source=source.node, sourceHandle=source.port, target=target.node, targetHandle=target.port)
        )
        return self

    def container(
        self, name: str, lifetime: str = "episode", reducer: str = "last", max_size: int | None = None
    ) -> GraphBuilder:
        self._containers.append(ContainerDecl.model_validate(
            {"name": name, "lifetime": lifetime, "reducer": reducer, "max_size": max_size}
        ))  # fmt: skip
        return self

    def nodeset(self, name: str, mode: NodesetMode | str = NodesetMode.LOCAL) -> GraphBuilder:
        self._nodesets[name] = NodesetOptions.model_validate({"mode": mode})
        return self

    def position(self, node: NodeRef, x: float, y: float) -> GraphBuilder:
        """Where the canvas draws a node (kept in the layout side field)."""
        self._layout.setdefault("positions", {})[node.id] = {"x": x, "y": y}
        return self

    def build(self) -> Graph:
        return Graph.model_validate({
            **self._graph,
            "nodes": self._nodes,
            "edges": self._edges,
            "containers": self._containers,
            "nodesets": self._nodesets,
            "layout": self._layout,
        })  # fmt: skip


def agent_graph(
    benchmark: str,
    agent: str,
    agent_args: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    server: Iterable[str] = (),
    step_budget: int | None = None,
) -> Graph:
    """The canonical loop of a registered agent on a benchmark: reset → iterIn → observe → reason → step → iterOut
    (stopped by the episode's end) → evaluate. It runs exactly as the Kernel runs that agent (same actions, same
    outcome). `server` names the nodesets that run in a subprocess of their own (`babyai`, `agents`)."""
    builder = GraphBuilder(
        name or f"{agent}_on_{benchmark}".replace(":", "_"),
        description=f"agent {agent!r} in the canonical loop on {benchmark}",
        placement={"benchmark": benchmark},
        step_budget=step_budget,
    )
    reset = builder.node(f"{benchmark}.reset", "reset")
    loop_in, loop_out = builder.loop({"result": "step"})
    observe = builder.node(f"{benchmark}.observe", "observe")
    reason = builder.node("reason", "reason", agent=agent, args=dict(agent_args or {}))
    step = builder.node(f"{benchmark}.step", "step")
    evaluate = builder.node(f"{benchmark}.evaluate", "evaluate")
    builder.connect(reset["observation"], loop_in["start"])
    builder.connect(loop_in["step"], observe["trigger"])
    builder.connect(observe["observation"], reason["observation"])
    builder.connect(reason["chunk"], step["action"])
    builder.connect(step["result"], loop_out["result"])
    builder.connect(step["done"], loop_out["stop"])
    builder.connect(loop_out["final_result"], evaluate["result"])
    for x, node in enumerate((reset, loop_in, observe, reason, step, loop_out, evaluate)):
        builder.position(node, 200 * x, 200)
    for nodeset in server:
        builder.nodeset(nodeset, NodesetMode.SERVER)
    return builder.build()
