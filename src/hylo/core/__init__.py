"""hylo's core contract: the Kernel and everything that crosses its boundaries."""

from hylo.core.agent import Agent, AgentBase, AgentRequirements, BatchAgent, acts_in_batches, check_compatible
from hylo.core.bus import EventBus, JsonlRecorder, MemoryRecorder
from hylo.core.chunk import ActionChunk, ChunkExecutor
from hylo.core.context import EpisodeContext
from hylo.core.environment import Environment
from hylo.core.errors import (
    AgentTimeout,
    HyloError,
    HyloFailure,
    IncompatibleComponents,
    InvalidAction,
    SafetyAbort,
    SignalFailed,
    SimulationDiverged,
)
from hylo.core.events import EVENT_TYPES, BaseEvent, Event, parse_event
from hylo.core.isolation import AgentCrashed, ProcessAgent
from hylo.core.kernel import Kernel
from hylo.core.shield import (
    BoundsGuard,
    FiniteGuard,
    Guard,
    GuardMode,
    RotationGuard,
    RotationRepr,
    SafetyShield,
    ShieldReview,
)
from hylo.core.signals import ContainerSet, ContainerSpec, Lifetime, Reducer, Signal, StateContainer
from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.core.timing import ChunkedTiming, Clock, RealtimeTiming, RefillTiming, SyncTiming, Timing, timing_from
from hylo.core.types import (
    Action,
    EnvCapabilities,
    EnvSpec,
    Observation,
    StepResult,
    TaskInstance,
    derive_seed,
)

__all__ = [
    "EVENT_TYPES",
    "Action",
    "ActionChunk",
    "Agent",
    "AgentBase",
    "AgentCrashed",
    "AgentRequirements",
    "AgentTimeout",
    "BaseEvent",
    "BatchAgent",
    "BoundsGuard",
    "ChunkExecutor",
    "ChunkedTiming",
    "Clock",
    "ContainerSet",
    "ContainerSpec",
    "EnvCapabilities",
    "EnvSpec",
    "Environment",
    "EpisodeContext",
    "EpisodeOutcome",
    "EpisodeStatus",
    "Event",
    "EventBus",
    "FiniteGuard",
    "Guard",
    "GuardMode",
    "HyloError",
    "HyloFailure",
    "IncompatibleComponents",
    "InvalidAction",
    "JsonlRecorder",
    "Kernel",
    "Lifetime",
    "MemoryRecorder",
    "Observation",
    "ProcessAgent",
    "RealtimeTiming",
    "Reducer",
    "RefillTiming",
    "RotationGuard",
    "RotationRepr",
    "SafetyAbort",
    "SafetyShield",
    "ShieldReview",
    "Signal",
    "SignalFailed",
    "SimulationDiverged",
    "StateContainer",
    "StepResult",
    "SyncTiming",
    "TaskInstance",
    "Timing",
    "acts_in_batches",
    "check_compatible",
    "derive_seed",
    "parse_event",
    "timing_from",
]
