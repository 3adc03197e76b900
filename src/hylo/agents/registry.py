"""Agents by name: `random`, `hold`, `expert` (the benchmark's own), agents registered through the entry-point group
`hylo.agents`, and any `module:Class` on the Python path, built as `Class(**args)` — import paths only where imports
are allowed (never over HTTP).

`-A key=value` arguments are parsed as JSON literals when they are one (numbers, booleans, null, lists, objects),
else kept as strings. `describe_agent` is what `hylo list agents` and `GET /api/agents` both show.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from hylo.argtypes import parse_json_pairs
from hylo.core.agent import AgentArgs
from hylo.core.errors import UnknownChoice, shown
from hylo.core.registry import Registry, RegistryError

if TYPE_CHECKING:
    from hylo.envs.benchmark import Benchmark

ENTRY_POINT_GROUP = "hylo.agents"
LIVE_PREFIX = "live:"
"""How a run names an agent object given to `hylo.evaluate(agent=...)` (`live:module:Class`): built by nobody."""
EXPERT_TARGET = "(the benchmark's scripted expert)"
"""What `registered_agents()` gives for `expert`: each benchmark has its own, so there is no one target."""

_BUILTIN: dict[str, str] = {
    "random": "hylo.agents.basic:RandomAgent",
    "hold": "hylo.agents.basic:HoldAgent",
    "mlp": "hylo.agents.mlp:MlpPolicy",
    "lerobot": "hylo.agents.lerobot:LeRobotCheckpoint",
    "expert": EXPERT_TARGET,
    "openpi-remote": "hylo.agents.openpi_remote:OpenPiRemoteAgent",
    "vlaeval-remote": "hylo.agents.vlaeval_remote:VlaEvalRemoteAgent",
}


class AgentSpecError(RegistryError):
    """An agent name, import path or argument that cannot make an agent."""


def _factory(target: str, value: Any) -> Callable[..., Any]:
    if not callable(value):
        raise AgentSpecError(f"agent {target!r} is not a class or factory: {value!r}")
    factory: Callable[..., Any] = value
    return factory


AGENT_REGISTRY: Registry[Callable[..., Any]] = Registry(
    "agent", ENTRY_POINT_GROUP, _BUILTIN, _factory, error=AgentSpecError, import_paths=True, forms=["module:Class"]
)


def registered_agents() -> dict[str, str]:
    """Agent name → `module:attr` (built-ins and the `hylo.agents` entry points)."""
    return AGENT_REGISTRY.entries()


def parse_agent_args(pairs: Sequence[str]) -> dict[str, Any]:
    """`["k=v", ...]` → `{k: v}`, each value a JSON literal when it parses as one, else the string."""
    try:
        return parse_json_pairs(pairs, "-A")
    except ValueError as exc:
        raise AgentSpecError(str(exc)) from None


def check_local_paths(name: str, factory: Callable[..., Any], args: dict[str, Any], *, allow_import: bool) -> None:
    """Refuse, where imports are not allowed (a request), an argument naming files the agent loads and that may
    import code (a checkpoint whose processors name their classes: the factory's `local_paths`)."""
    named = [field for field in getattr(factory, "local_paths", ()) if args.get(field) is not None]
    if named and not allow_import:
        raise AgentSpecError(
            f"agent {name!r} loads the files {', '.join(f'{f}={shown(args[f], 80)}' for f in named)} names, which may "
            "import code: a request may name them only on a server started with --allow-import"
        )


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
    if name.startswith(LIVE_PREFIX):
        raise AgentSpecError(
            f"agent {name!r} names an agent object given to hylo.evaluate(agent=...): only the process that holds it "
            "runs it (it is never built from its name)"
        )
    if name == "expert":
        if benchmark is None:
            raise AgentSpecError("agent 'expert' needs a benchmark")
        expert = benchmark.expert()
        if expert is None:
            raise AgentSpecError(f"benchmark {benchmark.name!r} has no expert agent")
        return type(expert)
    return AGENT_REGISTRY.resolve(name, allow_import=allow_import)


def make_agent(
    name: str, args: dict[str, Any] | None = None, benchmark: Benchmark | None = None, *, allow_import: bool = True
) -> Any:
    """Build the agent called `name` with `args` (checked against its `Args` first). `expert` needs the benchmark;
    `module:Class` needs `allow_import` (an HTTP request may only name registered agents)."""
    args = dict(args or {})
    factory = agent_factory(name, benchmark, allow_import=allow_import)
    if name == "expert" and not args and benchmark is not None:
        return benchmark.expert()  # the benchmark's own instance, as it configures it
    check_local_paths(name, factory, args, allow_import=allow_import)
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
    check_local_paths(name, factory, args, allow_import=allow_import)
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


# -- describe ------------------------------------------------------------------------------------------------------

EXPERT_DESCRIPTION = (
    "The benchmark's own scripted expert (each benchmark has its own; its arguments depend on the benchmark)."
)


class AgentArg(BaseModel):
    """One keyword argument an agent's constructor accepts."""

    name: str
    required: bool
    default: Any = Field(default=None, description="the default (its repr when it is not JSON); null when required")
    annotation: str | None = None


class AgentInfo(BaseModel):
    """A registered agent: a `reason` node's `agent` and `args`, or a job's `agent` and `agent_args`. `extra_args`:
    its constructor takes any keyword argument besides `args`. `available` is false, with the `reason`, when its
    module cannot be loaded here."""

    name: str
    target: str | None = Field(description="the registered `module:attr` (null for `expert`, the benchmark's own)")
    description: str
    args: list[AgentArg] = Field(default_factory=list)
    extra_args: bool = False
    available: bool = True
    reason: str | None = None


def describe_agent(name: str) -> AgentInfo:
    """The registered agent `name` as `hylo list agents` and `GET /api/agents` show it: its module is imported (it
    is registered), nothing is built."""
    if name == "expert":
        return AgentInfo(name=name, target=None, description=EXPERT_DESCRIPTION)
    target = AGENT_REGISTRY.target(name)
    if target is None:
        raise UnknownChoice("agent", name, AGENT_REGISTRY.names())
    try:
        factory = AGENT_REGISTRY.get(name)
    except Exception as exc:
        return AgentInfo(name=name, target=target, description="", available=False, reason=str(exc))
    args, extra = _arguments(factory)
    return AgentInfo(name=name, target=target, description=_summary(factory), args=args, extra_args=extra)


def _summary(factory: Callable[..., Any]) -> str:
    """The first paragraph of the factory's own docstring (not one it inherits)."""
    doc = factory.__doc__
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split()) if doc else ""


def _arguments(factory: Callable[..., Any]) -> tuple[list[AgentArg], bool]:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return [], True
    args: list[AgentArg] = []
    extra = False
    for p in parameters:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
        if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            continue
        required = p.default is inspect.Parameter.empty
        annotation = None if p.annotation is inspect.Parameter.empty else _annotation(p.annotation)
        args.append(AgentArg(name=p.name, required=required, default=None if required else _plain(p.default),
                             annotation=annotation))  # fmt: skip
    return args, extra


def _annotation(annotation: object) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _plain(value: object) -> object:
    """`value` when it is JSON, else its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value
