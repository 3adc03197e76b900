"""The catalog of the interactive API: saved graphs, node types, benchmarks and agents (docs/api.md).

`router` is mounted under `/api`, over the app's graph store (`hylo.server.dependencies.graph_store`):

- `GET /graphs` — every graph (saved and built-in example) as a summary
- `GET /graphs/{name}`, `PUT /graphs/{name}`, `DELETE /graphs/{name}` — one graph; a PUT is validated whole first
  and refused with `422 {"detail": [{"node", "rule", "message"}, ...]}`, one entry per problem
- `POST /graphs/validate` — the same checks on a graph document without saving it: `{"valid", "problems"}`
- `GET /nodes` — every node type's schema, by nodeset (`hylo nodes --json`)
- `GET /benchmarks` — registered benchmarks: splits, tasks and their step budgets, availability
- `GET /agents` — registered agents: description and accepted arguments; whether jobs may name `module:Class` ones
- `GET /protocols` — registered evaluation protocols: timing, clock, latency, s, H, strategy, families

Only registered things are listed or accepted: nothing a client sends is imported or run (`check_servable`); a job
may name a `module:Class` agent only on a server started with `--allow-import`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from hylo.agents.registry import AgentInfo, describe_agent, registered_agents
from hylo.envs.registry import BenchmarkInfo, describe_benchmark, listed_benchmarks
from hylo.eval.protocols import ProtocolInfo, describe_protocol, get_protocol, registered_protocols
from hylo.graph.compile import GraphError, GraphInvalid
from hylo.graph.model import MAX_GRAPH_BYTES, Graph
from hylo.graph.nodesets import NodesetInfo, all_schemas
from hylo.graph.store import GraphSummary, GraphTooLarge, check_servable, parse_document
from hylo.graph.wires import widening
from hylo.server.dependencies import Access, Graphs
from hylo.sessions.manager import UNSAVED

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


class Validation(BaseModel):
    """What `POST /graphs/validate` found: whether the document is a graph the server would save and run, and every
    problem, one entry each (none when valid)."""

    valid: bool
    problems: list[Problem]


class Detail(BaseModel):
    """An error in one line."""

    detail: str


class UnavailableNodeset(BaseModel):
    nodeset: str
    reason: str


class Nodes(BaseModel):
    """Every node type, grouped by nodeset; a nodeset that cannot be loaded here is listed with the reason."""

    nodesets: list[NodesetInfo]
    unavailable: list[UnavailableNodeset] = Field(default_factory=list)
    widens: dict[str, list[str]] = Field(
        default_factory=dict,
        description="which wires a value may go to besides its own (an edge fits when the wires are equal, either is "
        "`any`, or the target is in the source's list)",
    )


class Benchmarks(BaseModel):
    benchmarks: list[BenchmarkInfo]


class Agents(BaseModel):
    agents: list[AgentInfo]
    import_paths: bool = Field(
        default=False,
        description="whether a job may name a `module:Class` agent importable by the server (the operator's "
        "`hylo serve --allow-import`); sessions and saved graphs never may",
    )


class Protocols(BaseModel):
    protocols: list[ProtocolInfo]


# -- routes --------------------------------------------------------------------------------------------------------

_NAME_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Detail, "description": "not a graph name (letters, digits, '_', '.', '-'; at most 64)"},
}


router = APIRouter(tags=["catalog"])


@router.get("/graphs", response_model=GraphList, summary="Every graph: saved ones and built-in examples")
def list_graphs(store: Graphs) -> GraphList:
    return GraphList(graphs=store.list())


@router.get(
    "/graphs/{name}",
    response_model=Graph,
    response_model_exclude_none=True,
    summary="A graph's document",
    responses={**_NAME_ERRORS, 404: {"model": Detail, "description": "no graph of that name"}},
)
def get_graph(name: str, store: Graphs) -> Graph:
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
async def put_graph(name: str, request: Request, store: Graphs) -> Graph:
    """The body is a graph document (the format of `GET /graphs/{name}`; `name` may be left out). It is checked whole
    — format, the compiler's rules, registered agents and placement, no import path anywhere — and saved only when
    valid, replacing a saved graph of that name; a built-in example's name saves a copy that shadows it."""
    document = _json_body(name, await request.body())
    return await run_in_threadpool(store.put, name, document)


@router.post(
    "/graphs/validate",
    response_model=Validation,
    summary="Validate a graph document without saving it",
    responses={413: {"model": Detail, "description": f"a graph larger than {MAX_GRAPH_BYTES} bytes"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "description": "a graph document"}}},
        }
    },
)
async def validate_graph(request: Request) -> Validation:
    """The body is a graph document, as `PUT /graphs/{name}` takes it (its `name` may be left out). It is checked
    exactly as a saved graph is — format, the compiler's rules over the registered nodesets, registered agents and
    placement, no import path anywhere — and nothing is stored: the answer lists every problem, or says it is
    valid. A body that is not a JSON object is a `format` problem; one over the graphs' body limit is refused (413)."""
    body = await request.body()
    if len(body) > MAX_GRAPH_BYTES:  # the body limit of the graphs' routes refuses it first; kept here as well
        raise GraphTooLarge(f"the graph is {len(body)} bytes, more than the {MAX_GRAPH_BYTES} a graph may have")
    problems = await run_in_threadpool(_problems, body)
    return Validation(valid=not problems, problems=[Problem.model_validate(p.to_json()) for p in problems])


def _problems(body: bytes) -> list[GraphError]:
    """Every problem of the graph document in `body` (none: it is valid)."""
    try:
        document = _json_body(UNSAVED, body)
        given = document.get("name") if isinstance(document, dict) else None
        graph = parse_document(given if isinstance(given, str) and given else UNSAVED, document)
    except GraphInvalid as exc:
        return exc.errors
    return check_servable(graph)


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
def delete_graph(name: str, store: Graphs) -> Response:
    """Deleting a saved copy of a built-in example serves the example again."""
    store.delete(name)
    return Response(status_code=204)


@router.get("/nodes", response_model=Nodes, summary="Every node type's schema, by nodeset")
def nodes() -> Nodes:
    unavailable: list[UnavailableNodeset] = []

    def skipped(name: str, exc: Exception) -> None:
        unavailable.append(UnavailableNodeset(nodeset=name, reason=str(exc)))

    groups = all_schemas(on_error=skipped)
    return Nodes(
        nodesets=[NodesetInfo.model_validate(group) for group in groups],
        unavailable=unavailable,
        widens=widening(),
    )


@router.get(
    "/benchmarks",
    response_model=Benchmarks,
    summary="Registered benchmarks and the extras' envs: splits, tasks, options",
)
def benchmarks() -> Benchmarks:
    return Benchmarks(benchmarks=[describe_benchmark(name) for name in listed_benchmarks()])


@router.get("/agents", response_model=Agents, summary="Registered agents: description and arguments")
def agents(access: Access) -> Agents:
    """Every registered agent, and `import_paths`: whether a job may name a `module:Class` agent instead (the
    operator's `hylo serve --allow-import`)."""
    return Agents(agents=[describe_agent(name) for name in registered_agents()], import_paths=access.allow_import)


@router.get("/protocols", response_model=Protocols, summary="Registered evaluation protocols: how runs are timed")
def protocols() -> Protocols:
    return Protocols(protocols=[describe_protocol(get_protocol(name)) for name in registered_protocols()])


def _json_body(name: str, body: bytes) -> object:
    def refuse(message: str) -> GraphInvalid:
        return GraphInvalid(name, [GraphError(None, "format", message)])

    if not body.strip():
        raise refuse(f"the body is empty: send graph {name!r} as a JSON object")
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        raise refuse("the body is not text in UTF-8, UTF-16 or UTF-32: send the graph as a JSON object") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"the body is not JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep, or a number too long to read
        raise refuse(f"the body cannot be read as a graph: {type(exc).__name__}") from None
