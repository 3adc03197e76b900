"""Env panels: the declarative control plane for episode placement and Play / Stop."""

from hylo.panels.base import (
    PLAYBACK_ACTIONS,
    SIDE_EFFECTS,
    BaseEnvPanel,
    EnvPanelAction,
    EnvPanelField,
    PanelContext,
    PanelRefused,
    PanelReply,
    PanelState,
    Placement,
    SideEffect,
    SideEffectName,
    UnknownIntent,
    intent,
)
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.budget import resolve_step_budget
from hylo.panels.intents import IntentTarget, carry_out
from hylo.panels.remote import RemoteEnvPanelProxy, RemotePanelError

__all__ = [
    "PLAYBACK_ACTIONS",
    "SIDE_EFFECTS",
    "BaseEnvPanel",
    "BenchmarkPanel",
    "EnvPanelAction",
    "EnvPanelField",
    "IntentTarget",
    "PanelContext",
    "PanelRefused",
    "PanelReply",
    "PanelState",
    "Placement",
    "RemoteEnvPanelProxy",
    "RemotePanelError",
    "SideEffect",
    "SideEffectName",
    "UnknownIntent",
    "carry_out",
    "intent",
    "resolve_step_budget",
]
