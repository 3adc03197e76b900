"""Trace events: one typed class per kind, joined in a tagged union on `event`. The bus schema is the log schema.

Every event carries the run id, the episode id, a per-episode sequence number, simulated time and wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from hylo.core.status import EpisodeStatus


class BaseEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    event: str
    run_id: str = ""
    episode_id: str = ""
    seq: int = 0
    sim_time: float = 0.0
    wall_time: float = 0.0


class EpisodeStartEvent(BaseEvent):
    event: Literal["episode.start"] = "episode.start"
    task: dict[str, Any]
    task_digest: str
    seed: int
    agent: str
    guards: list[str]
    timing: str
    mode: Literal["driven", "served"] = "driven"
    warnings: list[str] = []
    """What the bind-time check could not check (an action convention unknown on one side, a frame or unit that
    differs): recorded, never refused."""


class ObservationEvent(BaseEvent):
    event: Literal["observation"] = "observation"
    obs: dict[str, Any]
    terminal: bool = False


class EnvPrologueEvent(BaseEvent):
    """The actions the env's reset executed before the agent's first step (a protocol's settle steps)."""

    event: Literal["env.prologue"] = "env.prologue"
    steps: int
    actions: list[Any]


class AgentDecisionEvent(BaseEvent):
    event: Literal["agent.decision"] = "agent.decision"
    content: dict[str, Any]


class MemoryRetrievalEvent(BaseEvent):
    event: Literal["memory.retrieval"] = "memory.retrieval"
    content: dict[str, Any]


class AgentChunkEvent(BaseEvent):
    event: Literal["agent.chunk"] = "agent.chunk"
    size: int
    execution_steps: int
    latency_s: float
    dropped: int = 0
    requested_at: int
    delay_steps: int = 0
    """Control steps between the request and the merge."""
    virtual_latency_s: float | None = None
    """The latency the virtual clock charged (modelled, or the measured one); None under the wall clock and sync."""
    actions: list[Any]


class AgentBatchEvent(BaseEvent):
    """How the chunk that follows was computed under `--batch`: in a call of `act_batch` on `size` requests, after
    waiting `queue_s` in the policy host's queue, the call itself taking `call_s` (the `agent.chunk` that follows
    has the latency the episode saw: queue, call and transport)."""

    event: Literal["agent.batch"] = "agent.batch"
    size: int
    queue_s: float
    call_s: float


class SafetyReviewEvent(BaseEvent):
    event: Literal["safety.review"] = "safety.review"
    approved: bool
    modified: bool
    reasons: list[str] = Field(default_factory=list)
    guard: str | None = None


class ActionEvent(BaseEvent):
    event: Literal["action"] = "action"
    step: int
    action: Any
    hold: bool = False


class StepResultEvent(BaseEvent):
    event: Literal["step.result"] = "step.result"
    step: int
    reward: float
    terminated: bool
    truncated: bool
    success: bool
    info: dict[str, Any] = Field(default_factory=dict)


class PrivilegedStateEvent(BaseEvent):
    event: Literal["privileged.state"] = "privileged.state"
    name: str
    value: Any


class EpisodeEndEvent(BaseEvent):
    event: Literal["episode.end"] = "episode.end"
    status: EpisodeStatus  # written as its value: "success", "failure", ...
    success: bool
    steps: int
    reason: str
    safety_interventions: int
    detail: str | None = None


class MemoryWriteEvent(BaseEvent):
    event: Literal["memory.write"] = "memory.write"
    content: dict[str, Any]


class SignalEvent(BaseEvent):
    event: Literal["signal"] = "signal"
    signal: str
    scope_id: str = ""


class ContainerCheckpointEvent(BaseEvent):
    """The graph's state containers at the end of a loop iteration, before step_end clears the step ones."""

    event: Literal["container.checkpoint"] = "container.checkpoint"
    step: int
    values: dict[str, Any]


Event = Annotated[
    EpisodeStartEvent
    | ObservationEvent
    | EnvPrologueEvent
    | AgentDecisionEvent
    | MemoryRetrievalEvent
    | AgentChunkEvent
    | AgentBatchEvent
    | SafetyReviewEvent
    | ActionEvent
    | StepResultEvent
    | PrivilegedStateEvent
    | EpisodeEndEvent
    | MemoryWriteEvent
    | SignalEvent
    | ContainerCheckpointEvent,
    Field(discriminator="event"),
]

EVENT_TYPES: dict[str, type[BaseEvent]] = {
    cls.model_fields["event"].default: cls for cls in get_args(get_args(Event)[0])
}
"""Event kind -> class."""

AGENT_EVENT_KINDS = frozenset({"agent.decision", "memory.retrieval", "memory.write"})
"""Kinds an agent may emit through `EpisodeContext.emit`; the rest belong to the Kernel."""

event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(line: str | bytes) -> BaseEvent:
    """Read one JSONL trace line back into its typed event."""
    return event_adapter.validate_json(line)


TEMPLATES: dict[type[BaseEvent], dict[str, Any]] = {}
"""Each kind's fields with their defaults, in order, once `defaults` made them (read it on hot paths, else call
`defaults`). Shared: do not mutate."""

Record = tuple[type[BaseEvent], str, str, int, float, float, Mapping[str, Any]]
"""An event as the bus hands it to a `RecordSubscriber`: (class, run_id, episode_id, seq, sim_time, wall_time,
payload). The payload holds the kind's own fields (or all of them); `record_fields` makes the event's field dict."""


def defaults(cls: type[BaseEvent]) -> Mapping[str, Any]:
    """`cls`'s fields in declaration order (the JSON's order), holding the defaults. Shared: do not mutate."""
    tpl = TEMPLATES.get(cls)
    if tpl is None:
        tpl = TEMPLATES[cls] = {
            name: (info.get_default(call_default_factory=True) if not info.is_required() else None)
            for name, info in cls.model_fields.items()
        }
    return tpl


def record_fields(record: Record) -> dict[str, Any]:
    """The plain field dict of a record, in the JSON's order: what `model_dump(mode="json")` gives for a payload of
    JSON-ready values."""
    cls, run_id, episode_id, seq, sim_time, wall_time, payload = record
    return {
        **defaults(cls),
        "run_id": run_id,
        "episode_id": episode_id,
        "seq": seq,
        "sim_time": sim_time,
        "wall_time": wall_time,
        **payload,
    }
