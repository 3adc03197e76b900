"""Nodesets by name: packages of node types.

Built in: `core` (loop pivots, constants, container reads and writes), `agents` (`reason`: any agent as a node) and
one env nodeset per registered benchmark (`babyai.reset`, `babyai.observe`, `babyai.step`, `babyai.evaluate`, ...).
A third-party package adds its own through the entry-point group `hylo.nodesets`:

    [project.entry-points."hylo.nodesets"]
    mynodes = "mypkg.nodes:NODESET"      # a `Nodeset`, or a callable returning one

A node type's name is `<nodeset>.<node>`, except the core nodes (`iterIn`, `iterOut`, `constant`, ...).
`describe_nodeset` is what `hylo nodes` and `GET /api/nodes` both show.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from hylo.core.errors import UnknownChoice
from hylo.core.registry import Registry
from hylo.envs.registry import get_benchmark, registered_benchmarks
from hylo.graph.env_nodes import env_nodeset
from hylo.graph.node import Node, Nodeset, NodesetError

ENTRY_POINT_GROUP = "hylo.nodesets"

_BUILTIN: dict[str, str] = {
    "core": "hylo.graph.core_nodes:CORE",
    "agents": "hylo.graph.agent_nodes:AGENTS",
}
BUILTIN = tuple(_BUILTIN)


def _nodeset(target: str, value: Any) -> Nodeset:
    if callable(value) and not isinstance(value, Nodeset):
        value = value()
    if not isinstance(value, Nodeset):
        raise NodesetError(f"nodeset {target!r} is a {type(value).__name__}, not a Nodeset")
    return value


NODESET_REGISTRY: Registry[Nodeset] = Registry("nodeset", ENTRY_POINT_GROUP, _BUILTIN, _nodeset, error=NodesetError)


def registered_nodesets() -> list[str]:
    """Names of every nodeset that `hylo nodes` lists: built-ins, one per registered benchmark, entry points."""
    return [*BUILTIN, *registered_benchmarks(), *(n for n in NODESET_REGISTRY.names() if n not in BUILTIN)]


@functools.cache
def _env(name: str, allow_import: bool) -> Nodeset:  # one per benchmark, so its node classes stay the same
    return env_nodeset(get_benchmark(name, allow_import=allow_import).name)


def load_nodeset(name: str, target: str) -> Nodeset:
    """The nodeset `name` that `target` (`module:attr`, a `Nodeset` or a callable returning one) names: a
    code-defined nodeset, found again by its `source` in a server-mode subprocess."""
    try:
        return NODESET_REGISTRY.load_target(target)
    except NodesetError as exc:
        raise NodesetError(f"nodeset {name!r}: {exc}") from None


def get_nodeset(name: str, *, allow_import: bool = True, extra: Mapping[str, Nodeset] | None = None) -> Nodeset:
    """The nodeset called `name`: one of `extra` (nodesets given in code, e.g. by a test), a built-in, an entry
    point, or a benchmark's env nodeset (an unregistered benchmark, `gym:module:Env`, only with `allow_import`)."""
    if extra and name in extra:
        return extra[name]
    if NODESET_REGISTRY.target(name) is not None:
        return NODESET_REGISTRY.get(name)
    try:
        return _env(name, allow_import)
    except UnknownChoice:
        raise UnknownChoice("nodeset", name, registered_nodesets()) from None


def split_type(type_name: str) -> tuple[str, str]:
    """(nodeset, node) of a qualified type name; the built-in nodesets' types (`iterIn`, `reason`) have no prefix."""
    if "." not in type_name:
        for name in BUILTIN:
            if type_name in NODESET_REGISTRY.get(name).types:
                return name, type_name
        return "core", type_name
    nodeset, _, node = type_name.rpartition(".")
    return nodeset, node


def node_type(
    type_name: str, *, allow_import: bool = True, extra: Mapping[str, Nodeset] | None = None
) -> tuple[Nodeset, type[Node]]:
    """The nodeset and class of a node type; raises `UnknownChoice` naming the type and what exists."""
    nodeset_name, _ = split_type(type_name)
    nodeset = get_nodeset(nodeset_name, allow_import=allow_import, extra=extra)
    cls = nodeset.types.get(type_name)
    if cls is None and "." not in type_name:
        builtin = sorted(t for name in BUILTIN for t in NODESET_REGISTRY.get(name).types)
        raise UnknownChoice("node type (other nodesets' types are named <nodeset>.<node>):", type_name, builtin)
    if cls is None:
        raise UnknownChoice(f"node type in nodeset {nodeset.name!r}:", type_name, sorted(nodeset.types))
    return nodeset, cls


# -- describe ------------------------------------------------------------------------------------------------------


class NodesetInfo(BaseModel):
    """One nodeset's node types, each as `hylo nodes --json` describes it: `type`, `nodeset`, `description`, `role`,
    `owner`, `inputs` and `outputs` (`{name, wire, required, description}`), `dynamic_ports`, `config` (a JSON
    schema, or null) and `async`."""

    nodeset: str
    owner: str
    description: str
    nodes: list[dict[str, Any]]


def describe_nodeset(name: str) -> NodesetInfo:
    """The nodeset `name` as `hylo nodes` and `GET /api/nodes` show it; raises when it cannot be loaded here."""
    nodeset = get_nodeset(name)
    return NodesetInfo(
        nodeset=nodeset.name,
        owner=nodeset.owner.value,
        description=nodeset.description,
        nodes=[cls.schema() for cls in nodeset.nodes],
    )


def all_schemas(
    names: Sequence[str] | None = None, *, on_error: Callable[[str, Exception], None] | None = None
) -> list[dict[str, object]]:
    """Every node type's schema, grouped by nodeset (`describe_nodeset` of each, for `hylo nodes --json` and the
    canvas' palette). A nodeset that cannot be loaded here (a benchmark missing its package) is reported through
    `on_error` and left out."""
    out: list[dict[str, object]] = []
    for name in dict.fromkeys(names or registered_nodesets()):
        try:
            info = describe_nodeset(name)
        except Exception as exc:  # one broken plugin must not hide the others
            if on_error is not None:
                on_error(name, exc)
            continue
        out.append(info.model_dump())
    return out
