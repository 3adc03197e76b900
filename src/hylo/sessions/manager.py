"""The panels and sessions of one server: which panels exist, which session each belongs to, and how a session is
made from a request (a registered agent, a saved graph or a graph document, plus a placement).

Only registered benchmarks, agents and nodesets are accepted here (never an import path): a request is data, not
code. A graph document sent with the request (the canvas' unsaved graph) is checked exactly as a saved one is
(`check_servable`) before it is compiled.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hylo.agents.registry import AgentSpecError, registered_agents
from hylo.core.errors import HyloError, HyloFailure, UnknownChoice
from hylo.core.types import MAX_SEED, NodesetMode
from hylo.envs.benchmark import Benchmark
from hylo.envs.gym_adapter import NamespaceRefused
from hylo.envs.registry import get_benchmark, registered_benchmarks
from hylo.eval.resolve import ForeignEnvNodes, compile_for
from hylo.eval.spec import MAX_EPISODES, MAX_NAME, MAX_SECONDS, MAX_STEPS, check_json_value
from hylo.graph.agent_nodes import vet_agents
from hylo.graph.builder import agent_graph
from hylo.graph.compile import GraphInvalid, Plan
from hylo.graph.model import Graph
from hylo.graph.store import check_servable, parse_document
from hylo.panels.base import BaseEnvPanel, PanelRefused
from hylo.panels.benchmark import BenchmarkPanel
from hylo.sessions.session import Session
from hylo.sessions.state import SessionConflict, SessionGone, SessionSetup

MAX_SESSIONS = 8
"""How many sessions a server keeps at once (each holds an env, maybe subprocesses)."""

PLACEMENT_ORDER = ("split", "task", "seed", "episode_index")


class SessionRefused(HyloError):
    """A session request that cannot be served as given (HTTP 422); `field` names the part at fault and `errors`
    holds a graph's typed problems."""

    def __init__(self, message: str, field: str | None = None, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.errors = errors or []


class NotFound(HyloError):
    """No such panel or session (HTTP 404); the message lists what exists."""


class PlacementRequest(BaseModel):
    """Where a session's episodes are placed; unset values keep the panel's (or the graph's) own."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str | None = Field(default=None, max_length=MAX_NAME)
    split: str | None = Field(default=None, max_length=MAX_NAME)
    task: str | None = Field(default=None, max_length=MAX_NAME)
    episode_index: int | None = Field(default=None, ge=0, le=MAX_EPISODES - 1)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)


UNSAVED = "unsaved"
"""The name of a graph document sent without one."""


class SessionRequest(BaseModel):
    """`POST /api/sessions`: exactly one of `agent` (a registered agent, run in the canonical loop), `graph` (a saved
    graph's name) and `document` (a graph document, as `PUT /api/graphs/{name}` takes it), and a placement (its
    benchmark is required for an agent; a graph gives its own)."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = Field(default=None, max_length=MAX_NAME)
    agent_args: dict[str, Any] = Field(default_factory=dict)
    graph: str | None = Field(default=None, max_length=64)
    document: dict[str, Any] | None = Field(
        default=None,
        description="a graph document to run unsaved (the canvas' open graph); checked as a saved graph is",
    )
    placement: PlacementRequest = Field(default_factory=PlacementRequest)
    step_budget: int | None = Field(default=None, ge=1, le=MAX_STEPS)
    env_mode: NodesetMode = NodesetMode.LOCAL
    shield: bool = True
    render: bool = True
    act_timeout_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)

    @field_validator("agent_args")
    @classmethod
    def _plain_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_json_value(value, "agent_args")
        return value

    @model_validator(mode="after")
    def _one_program(self) -> SessionRequest:
        given = [name for name in ("agent", "graph", "document") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'agent' (a registered agent), 'graph' (a saved graph's name) and 'document' (a "
                f"graph document); got {' and '.join(map(repr, given)) or 'none'}"
            )
        if self.agent is None and self.agent_args:
            raise ValueError("'agent_args' is for an agent session; a graph's reason nodes carry their own args")
        if self.agent is None and self.env_mode != NodesetMode.LOCAL:
            raise ValueError("'env_mode' is for an agent session; a graph sets its nodesets' modes itself")
        return self


class PanelRegistry:
    """Every panel of the server: one local `env_<benchmark>` panel per registered benchmark (built on first use;
    `env_gym:<id>` too) and the proxies of the panels living in sessions' subprocesses (`env_<benchmark>#<k>`)."""

    def __init__(self) -> None:
        self._local: dict[str, BenchmarkPanel] = {}
        self._remote: dict[str, BaseEnvPanel] = {}
        self._owners: dict[str, Session | object] = {}  # a session, or the claim of one being built
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        with self._lock:
            made = set(self._local) | set(self._remote)
        return sorted({f"env_{name}" for name in registered_benchmarks()} | made)

    def get(self, name: str) -> BaseEnvPanel:
        with self._lock:
            panel = self._remote.get(name) or self._local.get(name)
        if panel is not None:
            return panel
        if not name.startswith("env_") or "#" in name:
            raise NotFound(f"no panel {name!r}; panels: {self.names()}")
        try:
            benchmark = get_benchmark(name.removeprefix("env_"), allow_import=False)
        except (UnknownChoice, NamespaceRefused):
            raise NotFound(f"no panel {name!r}; panels: {self.names()}") from None
        return self.local(benchmark)

    def local(self, benchmark: Benchmark) -> BenchmarkPanel:
        """The local panel of `benchmark` (made on first use)."""
        name = f"env_{benchmark.name}"
        with self._lock:
            panel = self._local.get(name)
        if panel is None:
            made = BenchmarkPanel(benchmark)
            with self._lock:
                panel = self._local.setdefault(name, made)
        return panel

    def session_of(self, name: str) -> Session | None:
        """The session a panel belongs to, if any (until that session has closed)."""
        with self._lock:
            owner = self._owners.get(name)
        return owner if isinstance(owner, Session) and not owner.closed else None

    def claim(self, name: str, claim: object) -> None:
        """Hold a panel for a session being built; 409 when another session has it, or is being built on it."""
        with self._lock:
            owner = self._owners.get(name)
            if isinstance(owner, Session) and not owner.closed:
                raise SessionConflict(f"panel {name!r} belongs to session {owner.id}; delete it first")
            if owner is not None and not isinstance(owner, Session):
                raise SessionConflict(f"panel {name!r} is taken by a session being started")
            self._owners[name] = claim

    def attach(self, panel: BaseEnvPanel, session: Session, *, remote: bool, claim: object = None) -> None:
        """Give a panel to a built session (in place of its claim)."""
        with self._lock:
            owner = self._owners.get(panel.name)
            if owner is not None and owner is not claim and not (isinstance(owner, Session) and owner.closed):
                raise SessionConflict(f"panel {panel.name!r} is taken")
            self._owners[panel.name] = session
            if remote:
                self._remote[panel.name] = panel

    def release(self, claim: object) -> None:
        """Drop a claim whose session did not start (its local panel forgets the session's graph budget)."""
        with self._lock:
            for name in [n for n, owner in self._owners.items() if owner is claim]:
                del self._owners[name]
                local = self._local.get(name)
                if local is not None:
                    local.default_step_budget = None

    def detach(self, session: Session) -> None:
        """Free the panels of a closed session (a local one forgets the session's graph budget)."""
        with self._lock:
            for name in [n for n, s in self._owners.items() if s is session]:
                del self._owners[name]
                self._remote.pop(name, None)
                local = self._local.get(name)
                if local is not None:
                    local.default_step_budget = None


class SessionManager:
    """Makes, finds and closes the sessions of a server. `graphs(name)` returns a saved graph (raising `KeyError`
    or a `HyloError` naming it when there is none). `check_url` is asked about every URL a session's agents would
    connect to, and refuses one by raising `ValueError` (a server's `--allow-remote`; None: any)."""

    def __init__(
        self,
        graphs: Callable[[str], Graph] | None = None,
        *,
        max_sessions: int = MAX_SESSIONS,
        check_url: Callable[[str], None] | None = None,
    ) -> None:
        self.panels = PanelRegistry()
        self._graphs = graphs
        self.check_url = check_url
        self._sessions: dict[str, Session] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._starting = 0
        self._closed = False
        self.max_sessions = max_sessions

    # -- sessions -------------------------------------------------------------------------------------------------

    def all(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def get(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}; sessions: {sorted(self._sessions)}")
        return session

    def delete(self, session_id: str) -> bool:
        """Close a session; returns whether it is closed (False: its thread is still in an env or agent call, and
        the session stays listed, `closing`, with its panel, until that call returns)."""
        return self.get(session_id).close()

    def close(self) -> None:
        """Close every session (the server is stopping): all are told at once, then each is waited for."""
        with self._lock:
            self._closed = True
        sessions = self.all()
        for session in sessions:
            session.begin_close()
        for session in sessions:
            session.close()

    def _forget(self, session: Session) -> None:
        """A session has closed (called from its thread): free its panels and forget it."""
        self.panels.detach(session)
        with self._lock:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]

    def create(self, request: SessionRequest) -> Session:
        """Build and start a session (blocks until its env and runner exist). Raises `SessionRefused` (422) for a
        bad request, `SessionConflict` (409) when its panel is taken or the server holds too many sessions."""
        graph = self._program_graph(request)
        bench_name = request.placement.benchmark or (graph.placement.benchmark if graph and graph.placement else None)
        if bench_name is None:
            raise SessionRefused("a session needs a benchmark: give placement.benchmark", "placement.benchmark")
        try:
            benchmark = get_benchmark(bench_name, allow_import=False)
        except (UnknownChoice, NamespaceRefused) as exc:
            raise SessionRefused(str(exc), "placement.benchmark") from None
        if graph is None:
            assert request.agent is not None
            self._check_agent(request.agent)
            server = (benchmark.name,) if request.env_mode == NodesetMode.SERVER else ()
            graph = agent_graph(benchmark.name, request.agent, request.agent_args, server=server)
        try:
            plan = compile_for(graph, benchmark, allow_import=False)
        except GraphInvalid as exc:
            errors = [{"node": e.node, "rule": e.rule, "message": e.message} for e in exc.errors]
            raise SessionRefused(f"graph {graph.name!r} is not valid: {exc}", _graph_field(request), errors) from None
        except ForeignEnvNodes as exc:
            raise SessionRefused(
                f"graph {graph.name!r} uses env nodes of {exc.others}, but the session places episodes of "
                f"{benchmark.name!r}",
                "placement.benchmark",
            ) from None
        self._vet_agents(plan, benchmark, "agent_args" if request.agent is not None else _graph_field(request))
        options = graph.nodesets.get(benchmark.name)
        remote = options is not None and options.mode == NodesetMode.SERVER
        setup = SessionSetup(
            plan=plan,
            benchmark=benchmark,
            agent=request.agent,
            step_budget=request.step_budget,
            shield=request.shield,
            render=request.render,
            act_timeout_s=request.act_timeout_s,
        )
        with self._lock:
            if self._closed:
                raise SessionGone("the server is stopping: it starts no session")
            live = [s for s in self._sessions.values() if not s.closed]
            if len(live) + self._starting >= self.max_sessions:
                raise SessionConflict(
                    f"this server holds {len(live)} sessions and is starting {self._starting}, its limit is "
                    f"{self.max_sessions}; delete one first ({', '.join(s.id for s in live)})"
                )
            self._starting += 1
        claim = object()
        try:
            return self._start(setup, graph, self._placement(request, graph), remote, claim)
        except BaseException:
            self.panels.release(claim)
            raise
        finally:
            with self._lock:
                self._starting -= 1

    def _start(
        self, setup: SessionSetup, graph: Graph, placement: list[tuple[str, Any]], remote: bool, claim: object
    ) -> Session:
        panel: BaseEnvPanel | None = None
        if not remote:
            local = self.panels.local(setup.benchmark)
            self.panels.claim(local.name, claim)
            _place_now(local, placement)
            local.default_step_budget = graph.step_budget
            panel = local
        session = Session(uuid.uuid4().hex[:12], setup, panel, number=next(self._numbers), on_closed=self._forget)
        try:
            session.start()
        except HyloFailure:  # broke while building (a crashed subprocess): not a refusal
            session.close()
            raise
        except (HyloError, ValueError, TypeError) as exc:
            session.close()
            field = "agent" if setup.agent else "graph"  # a document's graph is refused before it is built
            raise SessionRefused(f"the session could not start: {exc}", field) from exc
        except BaseException:
            session.close()
            raise
        try:
            assert session.panel is not None
            self.panels.attach(session.panel, session, remote=remote, claim=claim)
            with self._lock:
                self._sessions[session.id] = session
                stopping = self._closed
            if stopping:
                raise SessionGone("the server is stopping: it starts no session")
            if remote:
                for name, value in placement:
                    try:
                        session.change_field(name, value).result()
                    except PanelRefused as exc:
                        raise SessionRefused(str(exc), f"placement.{name}") from None
                    except HyloFailure:
                        raise
                    except HyloError as exc:
                        raise SessionRefused(f"placing {name}={value!r} failed: {exc}", f"placement.{name}") from exc
        except BaseException:
            session.close()
            raise
        return session

    def _program_graph(self, request: SessionRequest) -> Graph | None:
        """The graph a request runs: a saved one, or its document checked as a saved one is; None for an agent."""
        if request.graph is not None:
            return self._graph(request.graph)
        if request.document is not None:
            return _document_graph(request.document)
        return None

    def _graph(self, name: str) -> Graph:
        if self._graphs is None:
            raise SessionRefused("this server keeps no graphs", "graph")
        try:
            return self._graphs(name)
        except (KeyError, HyloError, ValueError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise SessionRefused(str(message), "graph") from None

    def _vet_agents(self, plan: Plan, benchmark: Benchmark, field: str) -> None:
        """Refuse agents with bad arguments, or that would connect where `check_url` does not allow, before anything
        is built."""
        check = self.check_url
        try:
            urls = vet_agents(plan, benchmark, allow_import=False)
            if check is not None:
                for url in urls:
                    check(url)
        except (AgentSpecError, ValueError) as exc:
            raise SessionRefused(str(exc), field) from None

    @staticmethod
    def _check_agent(agent: str) -> None:
        known = registered_agents()
        if agent not in known:
            raise SessionRefused(str(UnknownChoice("agent", agent, list(known))), "agent")

    @staticmethod
    def _placement(request: SessionRequest, graph: Graph) -> list[tuple[str, Any]]:
        """The field values to push, in cascade order: the request's, else the graph's split and task."""
        given = request.placement
        fallback = graph.placement
        values: dict[str, Any] = {
            "split": given.split or (fallback.split if fallback else None),
            "task": given.task or (fallback.task if fallback else None),
            "seed": given.seed,
            "episode_index": given.episode_index,
        }
        return [(name, values[name]) for name in PLACEMENT_ORDER if values[name] is not None]


def _graph_field(request: SessionRequest) -> str:
    return "document" if request.document is not None else "graph"


def _document_graph(document: dict[str, Any]) -> Graph:
    """The graph of a document sent with a request, refused with every problem (its typed per-node errors) when it
    is not one a server would save."""
    given = document.get("name")
    name = given if isinstance(given, str) and given else UNSAVED
    try:
        graph = parse_document(name, document)
    except GraphInvalid as exc:
        errors = [error.to_json() for error in exc.errors]
        raise SessionRefused(str(exc), "document", errors) from None
    problems = check_servable(graph)
    if problems:
        errors = [error.to_json() for error in problems]
        raise SessionRefused(str(GraphInvalid(name, problems)), "document", errors)
    return graph


def _place_now(panel: BaseEnvPanel, placement: list[tuple[str, Any]]) -> None:
    """Push field values to a local panel no session drives yet; a refused value is the request's fault."""

    async def push() -> None:
        for name, value in placement:
            try:
                await panel.on_field_change(name, value)
            except PanelRefused as exc:
                raise SessionRefused(str(exc), f"placement.{name}") from None

    asyncio.run(push())
