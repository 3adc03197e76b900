"""Agents by name: `random`, `hold`, `expert` (the benchmark's own), agents registered through the entry-point
group `hylo.agents`, and any `module:Class` on the Python path, built as `Class(**args)`.

`-A key=value` arguments are parsed as JSON literals when they are one (numbers, booleans, null, lists, objects),
else kept as strings.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from hylo.core.errors import HyloError
from hylo.envs.benchmark import UnknownChoice

if TYPE_CHECKING:
    from hylo.envs.benchmark import Benchmark

ENTRY_POINT_GROUP = "hylo.agents"

_BUILTIN: dict[str, str] = {
    "random": "hylo.agents.basic:RandomAgent",
    "hold": "hylo.agents.basic:HoldAgent",
    "expert": "(the benchmark's scripted expert)",
    "openpi-remote": "hylo.bridges.openpi_remote:OpenPiRemoteAgent",
    "vlaeval-remote": "hylo.bridges.vlaeval_remote:VlaEvalRemoteAgent",
}


class AgentSpecError(HyloError, ValueError):
    """An agent name, import path or argument that cannot make an agent."""


def registered_agents() -> dict[str, str]:
    """Agent name → `module:attr` (built-ins and the `hylo.agents` entry points)."""
    found = dict(_BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def parse_agent_args(pairs: Sequence[str]) -> dict[str, Any]:
    """`["k=v", ...]` → `{k: v}`, each value a JSON literal when it parses as one, else the string."""
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise AgentSpecError(f"bad -A value {pair!r}: expected key=value with a Python identifier as key")
        try:
            args[key] = json.loads(text)
        except ValueError:
            args[key] = text
    return args


def _import(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise AgentSpecError(f"bad agent import path {target!r}: expected module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentSpecError(f"cannot import agent module {module_name!r} (from {target!r}): {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentSpecError(f"module {module_name!r} has no {attr!r} (from agent {target!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AgentSpecError(f"agent {target!r} is not a class or factory: {obj!r}")
    factory: Callable[..., Any] = obj
    return factory


def _build(name: str, factory: Callable[..., Any], args: dict[str, Any]) -> Any:
    try:
        agent = factory(**args)
    except (TypeError, ValueError) as exc:
        raise AgentSpecError(f"cannot build agent {name!r} with arguments {args}: {exc}{_accepted(factory)}") from None
    if not callable(getattr(agent, "act", None)):
        raise AgentSpecError(f"agent {name!r} built {agent!r}, which has no act() method")
    return agent


def _accepted(factory: Callable[..., Any]) -> str:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return ""
    names = [p.name for p in parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return f" (it accepts: {', '.join(names)})" if names else ""


def make_agent(
    name: str, args: dict[str, Any] | None = None, benchmark: Benchmark | None = None, *, allow_import: bool = True
) -> Any:
    """Build the agent called `name` with `args`. `expert` needs the benchmark; `module:Class` needs `allow_import`
    (an HTTP request may only name registered agents)."""
    args = dict(args or {})
    if name == "expert":
        if benchmark is None:
            raise AgentSpecError("agent 'expert' needs a benchmark")
        expert = benchmark.expert()
        if expert is None:
            raise AgentSpecError(f"benchmark {benchmark.name!r} has no expert agent")
        if args:
            return _build(name, type(expert), args)
        return expert
    registered = registered_agents()
    if name in registered:
        return _build(name, _import(registered[name]), args)
    if ":" in name:
        if not allow_import:
            raise UnknownChoice("agent (only registered agents are accepted here)", name, list(registered))
        return _build(name, _import(name), args)
    raise UnknownChoice("agent", name, [*registered, "module:Class"])
