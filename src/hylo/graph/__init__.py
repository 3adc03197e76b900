"""The graph engine behind the canvas: one graph format, typed nodes in nodesets, validation, the banded executor."""

from hylo.graph.builder import GraphBuilder, NodeRef, agent_graph
from hylo.graph.compile import Band, GraphError, GraphInvalid, Plan, check_graph, compile_graph
from hylo.graph.executor import ExecutionStopped, GraphRunner, GraphSetupError, NodesetCrashed
from hylo.graph.model import (
    ContainerDecl,
    EdgeSpec,
    Graph,
    GraphFormatError,
    NodesetOptions,
    NodeSpec,
    Placement,
    load_graph,
    parse_graph,
)
from hylo.graph.node import Node, NodeFailure, Nodeset, Owner, Port, Role, RunContext, Runtime
from hylo.graph.nodesets import ENTRY_POINT_GROUP, get_nodeset, node_type, registered_nodesets
from hylo.graph.wires import Wire, fits

__all__ = [
    "ENTRY_POINT_GROUP",
    "Band",
    "ContainerDecl",
    "EdgeSpec",
    "ExecutionStopped",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "GraphFormatError",
    "GraphInvalid",
    "GraphRunner",
    "GraphSetupError",
    "Node",
    "NodeFailure",
    "NodeRef",
    "NodeSpec",
    "Nodeset",
    "NodesetCrashed",
    "NodesetOptions",
    "Owner",
    "Placement",
    "Plan",
    "Port",
    "Role",
    "RunContext",
    "Runtime",
    "Wire",
    "agent_graph",
    "check_graph",
    "compile_graph",
    "fits",
    "get_nodeset",
    "load_graph",
    "node_type",
    "parse_graph",
    "registered_nodesets",
]
