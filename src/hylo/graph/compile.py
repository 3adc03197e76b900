"""Validation and planning: a graph is checked whole before anything runs, then cut into bands.

Every problem is a `GraphError` naming the node and the rule broken (unknown node type, bad config, unpaired or
extra loop pivots, an edge from the loop body into the after-loop band, an unfilled required port, a wire-type
mismatch, a cycle outside a loop, a node in the wrong band, an undeclared container). `compile_graph` returns a
`Plan`: the pre-loop band, the loop body and the after-loop band, each in levels of nodes that do not depend on
each other.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from hylo.core.errors import HyloError
from hylo.core.signals import ContainerSpec
from hylo.core.types import NodesetMode
from hylo.graph.core_nodes import IterIn, IterOut, IterOutConfig
from hylo.graph.env_nodes import EnvNode
from hylo.graph.model import EdgeSpec, Graph
from hylo.graph.node import Node, Nodeset, Owner, Port, Role
from hylo.graph.nodesets import node_type, split_type
from hylo.graph.wires import fits


@dataclass(frozen=True)
class GraphError:
    """One problem of a graph: the node at fault (None for the graph as a whole), the rule and a message."""

    node: str | None
    rule: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "rule": self.rule, "message": self.message}

    def __str__(self) -> str:
        return f"{self.node or '(graph)'}: [{self.rule}] {self.message}"


class GraphInvalid(HyloError, ValueError):
    """A graph that does not validate; `errors` lists every problem."""

    def __init__(self, name: str, errors: list[GraphError]) -> None:
        self.errors = errors
        shown = "\n".join(f"  {e}" for e in errors)
        super().__init__(f"graph {name!r} is invalid ({len(errors)} error{'s' if len(errors) != 1 else ''}):\n{shown}")


class Band(StrEnum):
    PRE = "pre_loop"
    LOOP = "loop"
    POST = "after_loop"


@dataclass
class PlannedNode:
    id: str
    cls: type[Node]
    nodeset: Nodeset
    config: BaseModel | None
    inputs: dict[str, Port]
    outputs: dict[str, Port]
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    band: Band = Band.PRE

    @property
    def role(self) -> Role:
        return self.cls.role


@dataclass
class Plan:
    graph: Graph
    nodes: dict[str, PlannedNode]
    pre: list[list[str]]
    body: list[list[str]]
    post: list[list[str]]
    loop_in: str | None
    loop_out: str | None
    containers: list[ContainerSpec]

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks whose env nodes the graph uses."""
        return sorted({n.cls.benchmark for n in self.nodes.values() if issubclass(n.cls, EnvNode)})


_ROLE_BAND = {
    Role.RESET: (Band.PRE, "a reset node belongs to the pre-loop band (it fires once per execution)"),
    Role.OBSERVE: (Band.LOOP, "an observe node belongs to the loop body (wire a trigger from iterIn)"),
    Role.POLICY: (Band.LOOP, "a policy node belongs to the loop body"),
    Role.ACTUATOR: (Band.LOOP, "a step node belongs to the loop body"),
    Role.EVALUATE: (Band.POST, "the verdict comes from the after-loop band, fed by iterOut's final_* side"),
}


def check_graph(
    graph: Graph, *, allow_import: bool = True, nodesets: Mapping[str, Nodeset] | None = None
) -> list[GraphError]:
    """Every problem of `graph` (empty when it is valid)."""
    try:
        compile_graph(graph, allow_import=allow_import, nodesets=nodesets)
    except GraphInvalid as exc:
        return exc.errors
    return []


class _Problems:
    """How a pass reports a problem: `fail(node, rule, message)` (node None for the graph as a whole); `errors`
    holds them in the order found."""

    def __init__(self) -> None:
        self.errors: list[GraphError] = []

    def __call__(self, node: str | None, rule: str, message: str) -> None:
        self.errors.append(GraphError(node, rule, message))


_NodeTypes = dict[str, tuple[Nodeset, type[Node]]]


def compile_graph(graph: Graph, *, allow_import: bool = True, nodesets: Mapping[str, Nodeset] | None = None) -> Plan:
    """Validate `graph` and cut it into bands; raises `GraphInvalid` with every problem found. `nodesets` adds
    nodesets by name for this graph (defined in code rather than registered).

    The passes run in order, each reporting its problems and going on, so that one call lists them all; only a
    cycle stops the compilation early (the bands are not defined without a topological order)."""
    fail = _Problems()
    specs = _unique_nodes(graph, fail)
    classes, configs = _node_types(specs, fail, allow_import=allow_import, nodesets=nodesets)
    loop_in, loop_out = _loop_pivots(classes, configs, fail)
    planned = _ports(classes, configs)
    successors = _edges(graph, specs, planned, fail)
    order = _topological(planned, successors)
    if len(order) < len(planned):
        _cycle(planned, order, fail)
        raise GraphInvalid(graph.name, fail.errors)
    body = _bands(planned, successors, loop_in, loop_out, fail)
    _roles(planned, loop_in, fail)
    declared = _containers(graph, planned, fail)
    _nodesets(graph, specs, planned, fail)
    _placement(graph, planned, fail)
    if fail.errors:
        raise GraphInvalid(graph.name, fail.errors)
    return _plan(graph, planned, order, body, loop_in, loop_out, declared)


def _unique_nodes(graph: Graph, fail: _Problems) -> dict[str, Any]:
    """The graph's node specs by id; a repeated id is a problem (the last spec by that id is kept)."""
    specs: dict[str, Any] = {}
    for spec in graph.nodes:
        if spec.id in specs:
            fail(spec.id, "duplicate_id", f"node id {spec.id!r} is used more than once")
        specs[spec.id] = spec
    return specs


def _node_types(
    specs: dict[str, Any], fail: _Problems, *, allow_import: bool, nodesets: Mapping[str, Nodeset] | None
) -> tuple[_NodeTypes, dict[str, BaseModel | None]]:
    """Each node's nodeset and class, and its parsed config; a node whose type or config is bad has no config (and
    takes no further part)."""
    classes: _NodeTypes = {}
    configs: dict[str, BaseModel | None] = {}
    for spec in specs.values():
        try:
            classes[spec.id] = node_type(spec.type, allow_import=allow_import, extra=nodesets)
        except Exception as exc:  # unknown type, a nodeset that cannot load, an unavailable benchmark
            fail(spec.id, "unknown_node_type", str(exc))
            continue
        try:
            configs[spec.id] = classes[spec.id][1].parse_config(spec.config)
        except ValueError as exc:
            fail(spec.id, "bad_config", str(exc))
    return classes, configs


def _loop_pivots(
    classes: _NodeTypes, configs: dict[str, BaseModel | None], fail: _Problems
) -> tuple[str, str] | tuple[None, None]:
    """The graph's loop: its iterIn and iterOut, each naming the other as its pair (None, None without a loop)."""
    loop_ins = [i for i in configs if classes[i][1] is IterIn]
    loop_outs = [i for i in configs if classes[i][1] is IterOut]
    pairs: list[tuple[str, str]] = []
    for node_in in loop_ins:
        partner = getattr(configs[node_in], "pair", None)
        if partner not in loop_outs or getattr(configs[partner], "pair", None) != node_in:
            fail(node_in, "unpaired_loop", f"iterIn {node_in!r} names {partner!r} as its pair, which is not an "
                 f"iterOut naming it back; iterOut nodes: {loop_outs}")  # fmt: skip
        else:
            pairs.append((node_in, partner))
    for node_out in loop_outs:
        if not any(node_out == out for _, out in pairs):
            partner = getattr(configs[node_out], "pair", None)
            fail(node_out, "unpaired_loop", f"iterOut {node_out!r} names {partner!r} as its pair, which is not an "
                 f"iterIn naming it back; iterIn nodes: {loop_ins}")  # fmt: skip
    for node_in, _ in pairs[1:]:
        fail(node_in, "multiple_loops", f"a graph has one loop; {pairs[0][0]!r} opens it already")
    return pairs[0] if pairs else (None, None)


def _ports(classes: _NodeTypes, configs: dict[str, BaseModel | None]) -> dict[str, PlannedNode]:
    """A planned node, with its ports, for each node with a config (an iterIn's ports are its pair's carries)."""
    planned: dict[str, PlannedNode] = {}
    for node_id, config in configs.items():
        nodeset, cls = classes[node_id]
        if cls is IterIn:
            partner = configs.get(getattr(config, "pair", ""))
            inputs, outputs = IterIn.carry_ports(partner.carry if isinstance(partner, IterOutConfig) else [])
        else:
            inputs, outputs = cls.ports(config)
        planned[node_id] = PlannedNode(node_id, cls, nodeset, config, {p.name: p for p in inputs},
                                       {p.name: p for p in outputs})  # fmt: skip
    return planned


def _edges(
    graph: Graph, specs: dict[str, Any], planned: dict[str, PlannedNode], fail: _Problems
) -> dict[str, set[str]]:
    """Wire the edges into the planned nodes' sources (each between known ports of fitting wire types, one edge per
    input) and check every required input is fed; each node's successors."""
    successors: dict[str, set[str]] = defaultdict(set)
    for edge in graph.edges:
        ends = _edge_ends(edge, specs, planned, fail)
        if ends is None:
            continue
        src, dst = ends
        ports = _edge_ports(edge, src, dst, fail)
        if ports is not None and _wire(src, dst, *ports, fail):
            successors[src.id].add(dst.id)
    _unfilled(planned, fail)
    return successors


def _edge_ends(
    edge: EdgeSpec, specs: dict[str, Any], planned: dict[str, PlannedNode], fail: _Problems
) -> tuple[PlannedNode, PlannedNode] | None:
    """The planned nodes an edge joins, None when one is missing (named unless it failed to plan)."""
    src, dst = planned.get(edge.source), planned.get(edge.target)
    for end, node in ((edge.source, src), (edge.target, dst)):
        if node is None and end not in specs:
            fail(end, "unknown_node", f"an edge {edge.source}.{edge.sourceHandle} -> {edge.target}."
                 f"{edge.targetHandle} names node {end!r}, which the graph does not have")  # fmt: skip
    return None if src is None or dst is None else (src, dst)


def _edge_ports(edge: EdgeSpec, src: PlannedNode, dst: PlannedNode, fail: _Problems) -> tuple[Port, Port] | None:
    """The output and the input an edge joins, None when either is unknown."""
    out_port = src.outputs.get(edge.sourceHandle)
    in_port = dst.inputs.get(edge.targetHandle)
    if out_port is None:
        fail(src.id, "unknown_port", f"{src.cls.type_name} {src.id!r} has no output {edge.sourceHandle!r}; "
             f"its outputs: {sorted(src.outputs)}")  # fmt: skip
    if in_port is None:
        fail(dst.id, "unknown_port", f"{dst.cls.type_name} {dst.id!r} has no input {edge.targetHandle!r}; "
             f"its inputs: {sorted(dst.inputs)}")  # fmt: skip
    return None if out_port is None or in_port is None else (out_port, in_port)


def _wire(src: PlannedNode, dst: PlannedNode, out_port: Port, in_port: Port, fail: _Problems) -> bool:
    """Feed `dst`'s input from `src`'s output, unless their wire types do not fit or the input is fed already."""
    if not fits(out_port.wire, in_port.wire):
        fail(dst.id, "wire_mismatch", f"input {in_port.name!r} takes {in_port.wire.value}, but "
             f"{src.id}.{out_port.name} gives {out_port.wire.value}")  # fmt: skip
        return False
    if in_port.name in dst.sources:
        other = ".".join(dst.sources[in_port.name])
        fail(dst.id, "duplicate_input", f"input {in_port.name!r} is fed by both {other} and {src.id}.{out_port.name}")
        return False
    dst.sources[in_port.name] = (src.id, out_port.name)
    return True


def _unfilled(planned: dict[str, PlannedNode], fail: _Problems) -> None:
    """Every required input has an edge."""
    for node in planned.values():
        for port in node.inputs.values():
            if port.required and port.name not in node.sources:
                fail(node.id, "unfilled_port", f"required input {port.name!r} ({port.wire.value}) of "
                     f"{node.cls.type_name} {node.id!r} has no edge")  # fmt: skip


def _cycle(planned: dict[str, PlannedNode], order: list[str], fail: _Problems) -> None:
    """Name the nodes a (partial) topological order could not reach: they form a cycle."""
    stuck = sorted(set(planned) - set(order))
    fail(stuck[0], "cycle", f"nodes {stuck} form a cycle; the only loop a graph may have is an iterIn/iterOut "
         "pair, with no edge between them")  # fmt: skip


def _bands(
    planned: dict[str, PlannedNode],
    successors: dict[str, set[str]],
    loop_in: str | None,
    loop_out: str | None,
    fail: _Problems,
) -> set[str]:
    """Put each node in its band: after the loop what iterOut reaches, in the loop body what iterIn reaches before
    iterOut, the rest before the loop; the after-loop band reads nothing of the body but iterOut. The loop body."""
    post: set[str] = set()
    body: set[str] = set()
    if loop_in is not None and loop_out is not None:
        post = _reach(successors, loop_out) - {loop_out}
        body = (_reach(successors, loop_in, stop=loop_out) | {loop_out}) - post
        for node_id in post:
            for handle, (src_id, src_port) in planned[node_id].sources.items():
                if src_id in body and src_id != loop_out:
                    fail(node_id, "band_edge", f"after-loop node {node_id!r} takes {handle!r} from {src_id}.{src_port} "
                         "in the loop body; the after-loop band may read only iterOut's final_* side (make it a "
                         "carry port)")  # fmt: skip
    for node in planned.values():
        node.band = Band.POST if node.id in post else Band.LOOP if node.id in body else Band.PRE
    return body


def _roles(planned: dict[str, PlannedNode], loop_in: str | None, fail: _Problems) -> None:
    """Each role in its band (and the loop's roles in a loop), every env the loop uses reset before it, one step and
    one policy node."""
    for node in planned.values():
        _role_band(node, loop_in, fail)
    _resets(planned, fail)
    for role, what in ((Role.ACTUATOR, "step"), (Role.POLICY, "policy")):
        found = [n.id for n in planned.values() if n.role is role]
        for extra in found[1:]:
            fail(extra, f"multiple_{what}_nodes", f"a graph has one {what} node; {found[0]!r} is it already")


def _role_band(node: PlannedNode, loop_in: str | None, fail: _Problems) -> None:
    """A node of a role is in its role's band; the loop's roles need a loop."""
    wanted = _ROLE_BAND.get(node.role)
    if wanted is not None and loop_in is not None and node.band is not wanted[0]:
        fail(node.id, "misplaced_node", f"{node.cls.type_name} {node.id!r} is in the {node.band.value} band: "
             f"{wanted[1]}")  # fmt: skip
    if loop_in is None and node.role in (Role.ACTUATOR, Role.POLICY, Role.OBSERVE):
        fail(node.id, "misplaced_node", f"{node.cls.type_name} {node.id!r} needs a loop (iterIn / iterOut)")


def _resets(planned: dict[str, PlannedNode], fail: _Problems) -> None:
    """Every env an observe or step node uses has a reset node."""
    resets = {n.nodeset.name for n in planned.values() if n.role is Role.RESET}
    for node in planned.values():
        if (
            node.role in (Role.OBSERVE, Role.ACTUATOR)
            and node.cls.owner is Owner.ENV
            and node.nodeset.name not in resets
        ):
            env = node.nodeset.name
            fail(node.id, "no_reset", f"{node.cls.type_name} {node.id!r} uses the {env} env, which no reset node "
                 f"brings to the placed episode (add a {env}.reset before the loop)")  # fmt: skip


def _containers(graph: Graph, planned: dict[str, PlannedNode], fail: _Problems) -> dict[str, ContainerSpec]:
    """The declared containers by name (each declared once); every container a node uses is declared."""
    declared: dict[str, ContainerSpec] = {}
    for decl in graph.containers:
        if decl.name in declared:
            fail(None, "duplicate_container", f"container {decl.name!r} is declared twice")
        declared[decl.name] = decl.spec()
    for node in planned.values():
        for name in node.cls.uses_containers(node.config):
            if name not in declared:
                fail(node.id, "unknown_container", f"{node.id!r} uses container {name!r}, which the graph does not "
                     f"declare; declared: {sorted(declared)}")  # fmt: skip
    return declared


def _nodesets(graph: Graph, specs: dict[str, Any], planned: dict[str, PlannedNode], fail: _Problems) -> None:
    """Options only for nodesets the graph uses, and no server mode for the core nodeset."""
    used = {node.nodeset.name for node in planned.values()} | {split_type(s.type)[0] for s in specs.values()}
    for name, options in graph.nodesets.items():
        if name not in used:
            fail(None, "unknown_nodeset", f"options for nodeset {name!r}, which no node of the graph uses; used: "
                 f"{sorted(used)}")  # fmt: skip
        elif name == "core" and options.mode == NodesetMode.SERVER:
            fail(None, "bad_nodeset_mode", "the core nodeset (loop pivots, containers) runs inside the executor")


def _placement(graph: Graph, planned: dict[str, PlannedNode], fail: _Problems) -> None:
    """A graph's placement names the benchmark of its env nodes."""
    placement = graph.placement

    env_sets = {n.cls.benchmark for n in planned.values() if issubclass(n.cls, EnvNode)}
    if placement is not None and env_sets and placement.benchmark not in env_sets:
        fail(None, "bad_placement", f"the placement names benchmark {placement.benchmark!r}, but the graph's env "
             f"nodes are {sorted(env_sets)}'s")  # fmt: skip


def _plan(
    graph: Graph,
    planned: dict[str, PlannedNode],
    order: list[str],
    body: set[str],
    loop_in: str | None,
    loop_out: str | None,
    declared: dict[str, ContainerSpec],
) -> Plan:
    """The plan of a valid graph: each band in levels, in topological order."""
    rank = {node_id: i for i, node_id in enumerate(order)}
    return Plan(
        graph=graph,
        nodes=planned,
        pre=_levels([n for n in order if planned[n].band is Band.PRE], planned, rank),
        body=_body_levels(body, planned, rank, loop_in, loop_out),
        post=_levels([n for n in order if planned[n].band is Band.POST], planned, rank),
        loop_in=loop_in,
        loop_out=loop_out,
        containers=list(declared.values()),
    )


def _topological(nodes: dict[str, PlannedNode], successors: dict[str, set[str]]) -> list[str]:
    indegree = {n: 0 for n in nodes}
    for _src, dsts in successors.items():
        for dst in dsts:
            indegree[dst] += 1
    ready = deque(n for n in nodes if indegree[n] == 0)  # graph order among equals: deterministic
    order: list[str] = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for dst in sorted(successors.get(node, ()), key=list(nodes).index):
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    return order


def _reach(successors: dict[str, set[str]], start: str, stop: str | None = None) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in successors.get(todo.pop(), ()):
            if nxt not in seen and nxt != stop:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _levels(members: Iterable[str], nodes: dict[str, PlannedNode], rank: dict[str, int]) -> list[list[str]]:
    """Group nodes (given in topological order) into levels: a node's level is one more than its deepest source in
    the same group, so the nodes of a level never depend on each other."""
    members = list(members)
    inside = set(members)
    level: dict[str, int] = {}
    for node_id in members:
        sources = [src for src, _ in nodes[node_id].sources.values() if src in inside]
        level[node_id] = 1 + max((level[s] for s in sources), default=-1)
    out: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for node_id in sorted(members, key=rank.__getitem__):
        out[level[node_id]].append(node_id)
    return out


def _body_levels(
    body: set[str], nodes: dict[str, PlannedNode], rank: dict[str, int], loop_in: str | None, loop_out: str | None
) -> list[list[str]]:
    if loop_in is None or loop_out is None:
        return []
    inner = [n for n in sorted(body, key=rank.__getitem__) if n not in (loop_in, loop_out)]
    return [[loop_in], *_levels(inner, nodes, rank), [loop_out]]
