"""The catalog of the interactive API: saved graphs, node types, benchmarks and agents (docs/api.md).

`catalog_routes(store)` is mounted under `/api`:

- `GET /graphs` — every graph (saved and built-in example) as a summary
- `GET /graphs/{name}`, `PUT /graphs/{name}`, `DELETE /graphs/{name}` — one graph; a PUT is validated whole first
  and refused with `422 {"detail": [{"node", "rule", "message"}, ...]}`, one entry per problem
- `GET /nodes` — every node type's schema, by nodeset (`hylo nodes --json`)
- `GET /benchmarks` — registered benchmarks: splits, tasks and their step budgets, availability
- `GET /agents` — registered agents: description and accepted arguments

Only registered things are listed or accepted: nothing a client sends is imported or run (`check_servable`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from hylo.graph.compile import GraphError, GraphInvalid
from hylo.graph.model import MAX_GRAPH_BYTES, Graph
from hylo.graph.store import (
    GraphStore,
    GraphSummary,
)

# -- response shapes -----------------------------------------------------------------------------------------------


class GraphList(BaseModel):
    """Every graph, sorted by name: the saved ones and the built-in examples none of them shadows."""

    graphs: list[GraphSummary]


class Problem(BaseModel):
    """One problem of a refused graph: the node at fault (null for the graph as a whole), the rule, a message."""

    node: str | None
    rule: str
    message: str


class Refused(BaseModel):
    """A graph refused with every problem found (`422`)."""

    detail: list[Problem]


class Detail(BaseModel):
    """An error in one line."""

    detail: str


class NodesetSchemas(BaseModel):
    """One nodeset's node types, each as `hylo nodes --json` describes it: `type`, `nodeset`, `description`, `role`,
    `owner`, `inputs` and `outputs` (`{name, wire, required, description}`), `dynamic_ports`, `config` (a JSON
    schema, or null) and `async`."""

    nodeset: str
    owner: str
    description: str
    nodes: list[dict[str, Any]]


class UnavailableNodeset(BaseModel):
    nodeset: str
    reason: str


class Nodes(BaseModel):
    """Every node type, grouped by nodeset; a nodeset that cannot be loaded here is listed with the reason."""

    nodesets: list[NodesetSchemas]
    unavailable: list[UnavailableNodeset] = Field(default_factory=list)
    widens: dict[str, list[str]] = Field(
        default_factory=dict,
        description="which wires a value may go to besides its own (an edge fits when the wires are equal, either is "
        "`any`, or the target is in the source's list)",
    )


class TaskInfo(BaseModel):
    name: str
    step_budget: int | None = Field(description="the default step budget of an episode of the task")
    instruction: str | None = Field(default=None, description="the task's instruction when it is fixed per task")


class SplitInfo(BaseModel):
    name: str
    tasks: list[TaskInfo]


class BenchmarkInfo(BaseModel):
    """A registered benchmark. `available` is false, with the `reason`, when it cannot run here (a missing package);
    its splits are still listed when they can be."""

    name: str
    display_name: str
    target: str = Field(description="the registered `module:attr`")
    available: bool
    reason: str | None = None
    default_split: str | None = None
    splits: list[SplitInfo] = Field(default_factory=list)
    observation_keys: dict[str, str] = Field(default_factory=dict)


class Benchmarks(BaseModel):
    benchmarks: list[BenchmarkInfo]


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


class Agents(BaseModel):
    agents: list[AgentInfo]


# -- routes --------------------------------------------------------------------------------------------------------

_NAME_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Detail, "description": "not a graph name (letters, digits, '_', '.', '-'; at most 64)"},
}


def catalog_routes(store: GraphStore) -> APIRouter:
    """The catalog's routes over `store` (mount them under `/api`)."""
    router = APIRouter(tags=["catalog"])

    @router.get("/graphs", response_model=GraphList, summary="Every graph: saved ones and built-in examples")
    def list_graphs() -> GraphList:
        return GraphList(graphs=store.list())

    @router.get(
        "/graphs/{name}",
        response_model=Graph,
        response_model_exclude_none=True,
        summary="A graph's document",
        responses={**_NAME_ERRORS, 404: {"model": Detail, "description": "no graph of that name"}},
    )
    def get_graph(name: str) -> Graph:
        return store.get(name)

    @router.put(
        "/graphs/{name}",
        response_model=Graph,
        response_model_exclude_none=True,
        summary="Validate a graph and save it",
        responses={
            **_NAME_ERRORS,
            413: {"model": Detail, "description": f"a graph larger than {MAX_GRAPH_BYTES} bytes"},
            422: {"model": Refused, "description": "the graph is invalid: every problem, one entry each"},
        },
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object", "description": "a graph document"}}},
            }
        },
    )
    async def put_graph(name: str, request: Request) -> Graph:
        """The body is a graph document (the format of `GET /graphs/{name}`; `name` may be left out). It is checked
        whole — format, the compiler's rules, registered agents and placement, no import path anywhere — and saved
        only when valid, replacing a saved graph of that name; a built-in example's name saves a copy that shadows
        it."""
        document = _json_body(name, await request.body())
        return await run_in_threadpool(store.put, name, document)

    @router.delete(
        "/graphs/{name}",
        status_code=204,
        response_class=Response,
        summary="Delete a saved graph",
        responses={
            **_NAME_ERRORS,
            404: {"model": Detail, "description": "no saved graph of that name"},
            409: {"model": Detail, "description": "a built-in example (read-only)"},
        },
    )
    def delete_graph(name: str) -> Response:
        """Deleting a saved copy of a built-in example serves the example again."""
        store.delete(name)
        return Response(status_code=204)

    @router.get("/nodes", response_model=Nodes, summary="Every node type's schema, by nodeset")
    def nodes() -> Nodes:
        from hylo.graph.nodesets import all_schemas
        from hylo.graph.wires import widening

        unavailable: list[UnavailableNodeset] = []

        def skipped(name: str, exc: Exception) -> None:
            unavailable.append(UnavailableNodeset(nodeset=name, reason=str(exc)))

        groups = all_schemas(on_error=skipped)
        return Nodes(
            nodesets=[NodesetSchemas.model_validate(group) for group in groups],
            unavailable=unavailable,
            widens=widening(),
        )

    @router.get("/benchmarks", response_model=Benchmarks, summary="Registered benchmarks: splits and tasks")
    def benchmarks() -> Benchmarks:
        from hylo.envs.benchmark import registered_benchmarks

        return Benchmarks(
            benchmarks=[describe_benchmark(name, target) for name, target in registered_benchmarks().items()]
        )

    @router.get("/agents", response_model=Agents, summary="Registered agents: description and arguments")
    def agents() -> Agents:
        from hylo.agents.registry import registered_agents

        return Agents(agents=[describe_agent(name, target) for name, target in registered_agents().items()])

    return router


def _json_body(name: str, body: bytes) -> object:
    def refuse(message: str) -> GraphInvalid:
        return GraphInvalid(name, [GraphError(None, "format", message)])

    if not body.strip():
        raise refuse(f"the body is empty: send graph {name!r} as a JSON object")
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise refuse("the body is not UTF-8 text: send the graph as a JSON object") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"the body is not JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep, or a number too long to read
        raise refuse(f"the body cannot be read as a graph: {type(exc).__name__}") from None


# -- descriptions --------------------------------------------------------------------------------------------------


def describe_benchmark(name: str, target: str) -> BenchmarkInfo:
    """A registered benchmark as `GET /benchmarks` lists it: nothing is built, no env made."""
    from hylo.envs.benchmark import get_benchmark

    try:
        bench = get_benchmark(name, allow_import=False)
    except Exception as exc:  # a registered benchmark whose module cannot load here
        return BenchmarkInfo(name=name, display_name=name, target=target, available=False, reason=str(exc))
    available, why = bench.available()
    info = BenchmarkInfo(
        name=name,
        display_name=bench.display_name or name,
        target=target,
        available=available,
        reason=None if available else why or "unavailable",
        observation_keys=dict(bench.observation_keys),
    )
    try:
        splits = bench.splits()
        info.default_split = bench.default_split or (splits[0] if splits else None)
        info.splits = [
            SplitInfo(name=split, tasks=[_task(bench, task) for task in bench.tasks(split)]) for split in splits
        ]
    except Exception as exc:
        info.available = False
        info.reason = info.reason or f"its splits cannot be listed: {exc}"
    return info


def _task(bench: Any, task: str) -> TaskInfo:
    try:
        budget: int | None = int(bench.default_step_budget(task))
    except Exception:
        budget = None
    try:
        instruction = bench.instruction(task)
    except Exception:
        instruction = None
    return TaskInfo(name=task, step_budget=budget, instruction=instruction)


EXPERT_DESCRIPTION = (
    "The benchmark's own scripted expert (each benchmark has its own; its arguments depend on the benchmark)."
)


def describe_agent(name: str, target: str) -> AgentInfo:
    """A registered agent as `GET /agents` lists it: its module is imported (it is registered), nothing is built."""
    from hylo.agents.registry import _import

    if name == "expert":
        return AgentInfo(name=name, target=None, description=EXPERT_DESCRIPTION)
    try:
        factory = _import(target)
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
