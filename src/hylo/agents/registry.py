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

from pydantic import ValidationError

from hylo.core.agent import AgentArgs
from hylo.core.errors import HyloError, shown
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
    args = check_args(name, factory, args)
    try:
        agent = factory(**args)
    except (TypeError, ValueError) as exc:
        raise AgentSpecError(f"cannot build agent {name!r} with arguments {args}: {exc}{_accepted(factory)}") from None
    if not callable(getattr(agent, "act", None)):
        raise AgentSpecError(f"agent {name!r} built {agent!r}, which has no act() method")
    return agent


def args_model(factory: Callable[..., Any]) -> type[AgentArgs] | None:
    """The `Args` an agent class declares, if any."""
    model = getattr(factory, "Args", None)
    return model if isinstance(model, type) and issubclass(model, AgentArgs) else None


def check_args(name: str, factory: Callable[..., Any], args: dict[str, Any]) -> dict[str, Any]:
    """`args` checked against the agent's declared `Args` (unchanged when it declares none); raises
    `AgentSpecError` naming each bad argument and what the agent accepts."""
    model = args_model(factory)
    if model is None:
        return args
    try:
        checked = model.model_validate(args)
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        accepted = ", ".join(model.model_fields) or "no arguments"
        raise AgentSpecError(
            f"cannot build agent {name!r} with arguments {shown(args, 200)}: {problems} (it accepts: {accepted})"
        ) from None
    return checked.model_dump(exclude_unset=True)


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    given = "" if error["type"] == "missing" else f", got {shown(error['input'])}"
    return f"{where}: {error['msg']}{given}"


def _accepted(factory: Callable[..., Any]) -> str:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return ""
    names = [p.name for p in parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return f" (it accepts: {', '.join(names)})" if names else ""


def agent_factory(name: str, benchmark: Benchmark | None = None, *, allow_import: bool = True) -> Callable[..., Any]:
    """What builds the agent called `name`, without building it: the benchmark's expert class for `expert`, a
    registered agent's class, or (with `allow_import`) the `module:Class` named."""
    if name == "expert":
        if benchmark is None:
            raise AgentSpecError("agent 'expert' needs a benchmark")
        expert = benchmark.expert()
        if expert is None:
            raise AgentSpecError(f"benchmark {benchmark.name!r} has no expert agent")
        return type(expert)
    registered = registered_agents()
    if name in registered:
        return _import(registered[name])
    if ":" in name:
        if not allow_import:
            raise UnknownChoice("agent (only registered agents are accepted here)", name, list(registered))
        return _import(name)
    raise UnknownChoice("agent", name, [*registered, "module:Class"])


def make_agent(
    name: str, args: dict[str, Any] | None = None, benchmark: Benchmark | None = None, *, allow_import: bool = True
) -> Any:
    """Build the agent called `name` with `args` (checked against its `Args` first). `expert` needs the benchmark;
    `module:Class` needs `allow_import` (an HTTP request may only name registered agents)."""
    args = dict(args or {})
    factory = agent_factory(name, benchmark, allow_import=allow_import)
    if name == "expert" and not args and benchmark is not None:
        return benchmark.expert()  # the benchmark's own instance, as it configures it
    return _build(name, factory, args)


def vet_agent(
    name: str, args: dict[str, Any] | None = None, benchmark: Benchmark | None = None, *, allow_import: bool = True
) -> list[str]:
    """Check that `make_agent(name, args, benchmark)` would get a known agent and arguments it accepts, without
    building it (building may connect to a server, or allocate what its arguments size): against the agent's `Args`
    when it declares them, else against its constructor's signature (its own checks of the values run when it is
    built). Returns the URLs the agent would connect to (its `RemoteUrl` arguments). Raises `AgentSpecError` /
    `UnknownChoice` naming the bad value."""
    args = dict(args or {})
    factory = agent_factory(name, benchmark, allow_import=allow_import)
    model = args_model(factory)
    if model is None:
        try:
            inspect.signature(factory).bind(**args)
        except TypeError as exc:
            raise AgentSpecError(
                f"cannot build agent {name!r} with arguments {shown(args, 200)}: {exc}{_accepted(factory)}"
            ) from None
        except ValueError:  # no signature to read (a builtin): it is checked when built
            pass
        return []
    checked = check_args(name, factory, args)
    return [str(checked[field]) for field in model.remote_fields() if checked.get(field) is not None]
