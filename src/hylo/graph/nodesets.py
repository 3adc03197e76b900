"""Nodesets: packages of node types, found by name.

Built in: `core` (loop pivots, constants, container reads and writes), `agents` (`reason`: any agent as a node) and
one env nodeset per registered benchmark (`babyai.reset`, `babyai.observe`, `babyai.step`, `babyai.evaluate`, ...).
A third-party package adds its own through the entry-point group `hylo.nodesets`:

    [project.entry-points."hylo.nodesets"]
    mynodes = "mypkg.nodes:NODESET"      # a `Nodeset`, or a callable returning one

A node type's name is `<nodeset>.<node>`, except the core nodes (`iterIn`, `iterOut`, `constant`, ...).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

from hylo.core.errors import HyloError
from hylo.envs.benchmark import UnknownChoice, get_benchmark, registered_benchmarks
from hylo.graph.node import Node, Owner

ENTRY_POINT_GROUP = "hylo.nodesets"
BUILTIN = ("core", "agents")


class NodesetError(HyloError):
    """A nodeset that cannot be loaded (its message names it and why)."""


@dataclass(frozen=True)
class Nodeset:
    """A named package of node types. `owner` says whose fault a crash of the nodeset is when it runs in a
    subprocess of its own: an env nodeset's → `infra_invalid`, an agent's → `error`."""

    name: str
    nodes: tuple[type[Node], ...]
    description: str = ""
    owner: Owner = Owner.GRAPH
    source: str | None = None
    """`module:attr` of this nodeset when it is defined in code rather than registered: how a server-mode subprocess
    finds it."""

    def __post_init__(self) -> None:
        for cls in self.nodes:
            if not cls.type_name:
                raise NodesetError(f"nodeset {self.name!r}: node class {cls.__name__} has no type_name")

    @functools.cached_property
    def types(self) -> dict[str, type[Node]]:
        return {cls.type_name: cls for cls in self.nodes}


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def registered_nodesets() -> list[str]:
    """Names of every nodeset that `hylo nodes` lists: built-ins, one per registered benchmark, entry points."""
    return [*BUILTIN, *registered_benchmarks(), *(n for n in _entry_points() if n not in BUILTIN)]


@functools.cache
def _builtin(name: str) -> Nodeset:
    if name == "core":
        from hylo.graph.core_nodes import CORE

        return CORE
    from hylo.graph.agent_nodes import AGENTS

    return AGENTS


@functools.cache
def _env(name: str, allow_import: bool) -> Nodeset:
    from hylo.graph.env_nodes import env_nodeset

    return env_nodeset(get_benchmark(name, allow_import=allow_import).name)


@functools.cache
def load_nodeset(name: str, target: str) -> Nodeset:
    module, _, attr = target.partition(":")
    try:
        value: object = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise NodesetError(f"nodeset {name!r} ({target}) cannot be loaded: {exc}") from None
    if callable(value) and not isinstance(value, Nodeset):
        value = value()
    if not isinstance(value, Nodeset):
        raise NodesetError(f"nodeset {name!r} ({target}) is a {type(value).__name__}, not a Nodeset")
    return value


def get_nodeset(name: str, *, allow_import: bool = True, extra: Mapping[str, Nodeset] | None = None) -> Nodeset:
    """The nodeset called `name`: one of `extra` (nodesets given in code, e.g. by a test), a built-in, an entry
    point, or a benchmark's env nodeset (an unregistered benchmark, `gym:module:Env`, only with `allow_import`)."""
    if extra and name in extra:
        return extra[name]
    if name in BUILTIN:
        return _builtin(name)
    plugins = _entry_points()
    if name in plugins:
        return load_nodeset(name, plugins[name])
    try:
        return _env(name, allow_import)
    except UnknownChoice:
        raise UnknownChoice("nodeset", name, registered_nodesets()) from None


def split_type(type_name: str) -> tuple[str, str]:
    """(nodeset, node) of a qualified type name; the built-in nodesets' types (`iterIn`, `reason`) have no prefix."""
    if "." not in type_name:
        for name in BUILTIN:
            if type_name in _builtin(name).types:
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
        builtin = sorted(t for name in BUILTIN for t in _builtin(name).types)
        raise UnknownChoice("node type (other nodesets' types are named <nodeset>.<node>):", type_name, builtin)
    if cls is None:
        raise UnknownChoice(f"node type in nodeset {nodeset.name!r}:", type_name, sorted(nodeset.types))
    return nodeset, cls


def all_schemas(
    names: Sequence[str] | None = None, *, on_error: Callable[[str, Exception], None] | None = None
) -> list[dict[str, object]]:
    """Every node type's schema, grouped by nodeset (for `hylo nodes --json` and the canvas' palette). A nodeset that
    cannot be loaded here (a benchmark missing its package) is reported through `on_error` and left out."""
    out: list[dict[str, object]] = []
    for name in dict.fromkeys(names or registered_nodesets()):
        try:
            nodeset = get_nodeset(name)
            nodes = [cls.schema() for cls in nodeset.nodes]
        except Exception as exc:  # one broken plugin must not hide the others
            if on_error is not None:
                on_error(name, exc)
            continue
        out.append({"nodeset": nodeset.name, "owner": nodeset.owner.value, "description": nodeset.description,
                    "nodes": nodes})  # fmt: skip
    return out
