"""Graphs by name: the built-in examples that ship with hylo, and the saved graphs of a server (`GraphStore`).

A graph's name is `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}` — a name, never a path. A store keeps each graph as
`<directory>/<name>.json`, written atomically, and lists the built-in examples beside its own graphs; the examples are
read-only, and saving a graph under an example's name keeps a copy in the directory that shadows the example.

A store validates what it saves as a server must: with the graph compiler, and with no import path anywhere — no
`module:attr` node type or nodeset, no `module:Class` agent in a `reason` node, no `gym:module:Env` placement
(`check_servable`).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from hylo.agents.registry import AgentSpecError, agent_factory, registered_agents
from hylo.confined import confined_file
from hylo.core.errors import HyloError, UnknownChoice
from hylo.envs.registry import get_benchmark, registered_benchmarks
from hylo.graph.agent_nodes import Reason, ReasonConfig
from hylo.graph.compile import GraphError, GraphInvalid, check_graph
from hylo.graph.model import MAX_GRAPH_BYTES, Graph, GraphFormatError, Placement, load_graph
from hylo.graph.nodesets import node_type

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
"""The built-in example graphs (package data): `<name>.json` each."""

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""What a stored graph may be called."""


class GraphNameError(HyloError, ValueError):
    """A graph name that is not `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`; the message names it."""


class GraphNotFound(HyloError, LookupError):
    """No saved graph and no built-in example of that name; the message names it and what exists."""


class GraphReadOnly(HyloError, PermissionError):
    """A built-in example cannot be deleted (saving under its name shadows it instead); a store whose directory is a
    link takes no graph (it would write where the link points)."""


class GraphTooLarge(GraphFormatError):
    """A graph whose file would be larger than the graph limit (`MAX_GRAPH_BYTES`)."""


class GraphSummary(BaseModel):
    """One graph of a listing. `builtin`: a read-only example shipped with hylo; `shadows_builtin`: a saved graph
    named as an example, served in its stead. `error` says why a saved file cannot be read (its other fields are then
    empty)."""

    name: str
    description: str = ""
    placement: Placement | None = None
    nodes: int = Field(default=0, description="how many nodes the graph has")
    builtin: bool = False
    shadows_builtin: bool = False
    modified: float | None = Field(default=None, description="the file's modification time (Unix seconds)")
    error: str | None = None


def check_name(name: str) -> str:
    """`name` when it may name a stored graph; raises `GraphNameError` naming it otherwise."""
    if not NAME_PATTERN.fullmatch(name):
        raise GraphNameError(
            f"bad graph name {name!r}: a name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter "
            "or digit"
        )
    return name


def builtin_examples() -> dict[str, Path]:
    """The built-in example graphs, name → file, sorted by name."""
    return {path.stem: path for path in sorted(EXAMPLES_DIR.glob("*.json")) if NAME_PATTERN.fullmatch(path.stem)}


def find_graph(file_or_name: str | Path) -> Graph:
    """The graph in a file, else the built-in example of that name (`babyai_expert`); raises `GraphFormatError`
    naming the argument and the examples when it is neither."""
    path = Path(file_or_name)
    if path.exists():
        return load_graph(path)
    examples = builtin_examples()
    if str(file_or_name) in examples:
        return load_graph(examples[str(file_or_name)])
    raise GraphFormatError(
        f"no graph file {str(file_or_name)!r} and no built-in example of that name; built-in examples: "
        f"{', '.join(examples) or 'none'}"
    )


def check_servable(graph: Graph) -> list[GraphError]:
    """Every problem of `graph` as a server sees it (empty when it is valid): the compiler's, without import paths,
    plus a `reason` node's agent that is not registered (`unknown_agent`) or given arguments it does not take
    (`bad_agent_args`), and a placement on a benchmark, split or task that does not exist (`bad_placement`)."""
    errors = check_graph(graph, allow_import=False)
    errors.extend(_agent_errors(graph))
    if not any(error.rule == "bad_placement" for error in errors):
        errors.extend(_placement_errors(graph.placement))
    return errors


def _agent_errors(graph: Graph) -> Iterator[GraphError]:
    registered = registered_agents()
    for spec in graph.nodes:
        try:
            is_reason = node_type(spec.type, allow_import=False)[1] is Reason
            config = ReasonConfig.model_validate(spec.config) if is_reason else None
        except Exception:  # an unknown type or a bad config: the compiler reports it
            continue
        if config is None or config.agent == "expert":
            continue
        if config.agent not in registered:
            what = "an import path" if ":" in config.agent else "not a registered agent"
            yield GraphError(spec.id, "unknown_agent", f"agent {config.agent!r} is {what}; a served graph names a "
                             f"registered agent: {', '.join(registered)}")  # fmt: skip
            continue
        try:
            parameters = inspect.signature(agent_factory(config.agent, allow_import=False)).parameters
        except (AgentSpecError, TypeError, ValueError):
            continue  # an agent that cannot be loaded or inspected here: checked when it is built
        problem = _bad_args(parameters, config.args)
        if problem:
            yield GraphError(spec.id, "bad_agent_args", f"agent {config.agent!r} {problem}")


def _bad_args(parameters: Mapping[str, inspect.Parameter], args: Mapping[str, Any]) -> str | None:
    """What is wrong with `args` as keyword arguments of a callable with `parameters`, or None."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {name: p for name, p in parameters.items() if p.kind in kinds}
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        unknown = sorted(set(args) - set(named))
        if unknown:
            return f"takes no argument {', '.join(map(repr, unknown))}; it accepts: {', '.join(named) or 'none'}"
    missing = [name for name, p in named.items() if p.default is inspect.Parameter.empty and name not in args]
    if missing:
        return f"needs the argument{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}"
    return None


def _placement_errors(placement: Placement | None) -> Iterator[GraphError]:
    if placement is None or placement.benchmark.startswith("gym:"):
        if placement is not None and ":" in placement.benchmark.removeprefix("gym:"):
            yield GraphError(None, "bad_placement", f"the placement names {placement.benchmark!r}, an import path; "
                             "a served graph is placed on a registered benchmark or gym:<registered id>")  # fmt: skip
        return
    if placement.benchmark not in registered_benchmarks():
        yield GraphError(None, "bad_placement", f"the placement names benchmark {placement.benchmark!r}, which is "
                         f"not registered; registered: {', '.join(registered_benchmarks())}")  # fmt: skip
        return
    try:
        benchmark = get_benchmark(placement.benchmark, allow_import=False)
        split = benchmark.check_split(placement.split)
        if placement.task is not None:
            benchmark.check_tasks(split, [placement.task])
    except UnknownChoice as exc:
        yield GraphError(None, "bad_placement", f"the placement: {exc}")
    except Exception:  # a benchmark that cannot load here: a run on it says why
        return


def _format_errors(exc: ValidationError, document: Mapping[str, Any]) -> list[GraphError]:
    """One `format` error per problem of a document that is not a graph, naming the node when it is in one."""
    nodes = document.get("nodes")
    errors: list[GraphError] = []
    for err in exc.errors():
        loc = err["loc"]
        node: str | None = None
        if len(loc) > 1 and loc[0] == "nodes" and isinstance(loc[1], int) and isinstance(nodes, list):
            item = nodes[loc[1]] if loc[1] < len(nodes) else None
            node_id = item.get("id") if isinstance(item, dict) else None
            node = node_id if isinstance(node_id, str) and node_id else None
        where = ".".join(str(p) for p in loc) or "(document)"
        errors.append(GraphError(node, "format", f"{where}: {err['msg']}"))
    return errors


def parse_document(name: str, document: object) -> Graph:
    """The graph a client sent to be saved as `name`: a JSON object in the graph format whose `name` is `name` (filled
    in when absent). Raises `GraphInvalid` with one `format` (or `name_mismatch`) error per problem."""
    if not isinstance(document, dict):
        raise GraphInvalid(name, [GraphError(None, "format", f"a graph is a JSON object, got {_json_type(document)}")])
    data = dict(document)
    given = data.setdefault("name", name)
    if given != name:
        message = f"the document is named {given!r}, but it is saved as {name!r}: the names must agree (or omit it)"
        raise GraphInvalid(name, [GraphError(None, "name_mismatch", message)])
    try:
        return Graph.model_validate(data)
    except ValidationError as exc:
        raise GraphInvalid(name, _format_errors(exc, data)) from None


def _json_type(value: object) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


class GraphStore:
    """The saved graphs of a server in `directory` (created on the first save), listed with the built-in examples.

    A saved graph is a file written in `directory`: a link there, or `directory` itself a link (a server's is
    `graphs` in its log dir; the log dir may be one), is no graph of the store, wherever it points."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def _path(self, name: str) -> Path:
        return self.directory / f"{check_name(name)}.json"

    def _file(self, name: str) -> Path | None:
        """The saved graph `name`'s file, if there is one (`confined_file` from the directory above the store's)."""
        return confined_file(self.directory.parent, PurePath(self.directory.name, f"{name}.json"))

    def _saved(self) -> dict[str, Path]:
        if not self.directory.is_dir():
            return {}
        names = sorted(path.stem for path in self.directory.glob("*.json") if NAME_PATTERN.fullmatch(path.stem))
        return {name: path for name in names if (path := self._file(name)) is not None}

    def names(self) -> builtins.list[str]:
        """The name of every graph, saved or built in, sorted."""
        return sorted({*self._saved(), *builtin_examples()})

    def list(self) -> builtins.list[GraphSummary]:
        """Every graph, sorted by name: the saved ones, and the built-in examples none of them shadows."""
        examples = builtin_examples()
        found = {name: _summary(path, builtin=False, shadows=name in examples) for name, path in self._saved().items()}
        for name, path in examples.items():
            found.setdefault(name, _summary(path, builtin=True, shadows=False))
        return [found[name] for name in sorted(found)]

    def get(self, name: str) -> Graph:
        """The graph called `name`: a saved one, else the built-in example. Raises `GraphNameError`,
        `GraphNotFound`, or `GraphFormatError` for a saved file that cannot be read."""
        path = self._file(check_name(name))
        if path is not None:
            return load_graph(path)
        example = builtin_examples().get(name)
        if example is None:
            raise GraphNotFound(f"no graph {name!r}; graphs: {', '.join(self.names()) or 'none'}")
        return load_graph(example)

    def put(self, name: str, document: object) -> Graph:
        """Validate `document` (`parse_document`, then `check_servable`) and save it as `name`, replacing a saved
        graph of that name; returns the saved graph. Raises `GraphNameError`, `GraphInvalid` with every problem,
        `GraphTooLarge`, or `GraphReadOnly` when the store's directory is a link."""
        path = self._path(name)
        if self.directory.is_symlink():
            raise GraphReadOnly(f"the saved graphs' directory {self.directory} is a link: it takes no graph "
                                "(move what it points at in its place)")  # fmt: skip
        graph = parse_document(name, document)
        errors = check_servable(graph)
        if errors:
            raise GraphInvalid(name, errors)
        data = graph.dumps().encode("utf-8")
        if len(data) > MAX_GRAPH_BYTES:
            raise GraphTooLarge(f"graph {name!r} is {len(data)} bytes as saved, more than the {MAX_GRAPH_BYTES} a "
                                "graph may have")  # fmt: skip
        _write_atomic(path, data)
        return graph

    def delete(self, name: str) -> bool:
        """Delete the saved graph `name`; returns whether a built-in example of that name is served again. Raises
        `GraphReadOnly` for a built-in example that no saved graph shadows, `GraphNotFound` when there is neither."""
        path = self._file(check_name(name))
        is_example = name in builtin_examples()
        if path is None:
            if is_example:
                raise GraphReadOnly(f"graph {name!r} is a built-in example, which cannot be deleted")
            raise GraphNotFound(f"no saved graph {name!r}")
        path.unlink(missing_ok=True)
        return is_example


def _summary(path: Path, *, builtin: bool, shadows: bool) -> GraphSummary:
    try:
        modified: float | None = path.stat().st_mtime
    except OSError:
        modified = None
    try:
        graph = load_graph(path)
    except GraphFormatError as exc:
        return GraphSummary(name=path.stem, builtin=builtin, shadows_builtin=shadows, modified=modified, error=str(exc))
    return GraphSummary(
        name=path.stem,
        description=graph.description,
        placement=graph.placement,
        nodes=len(graph.nodes),
        builtin=builtin,
        shadows_builtin=shadows,
        modified=modified,
    )


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `path` so that a reader sees the old file or the new one, never a part (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = [
    "EXAMPLES_DIR",
    "NAME_PATTERN",
    "GraphNameError",
    "GraphNotFound",
    "GraphReadOnly",
    "GraphStore",
    "GraphSummary",
    "GraphTooLarge",
    "builtin_examples",
    "check_name",
    "check_servable",
    "find_graph",
    "parse_document",
]
