"""Interactive sessions: a placement and an env living across several executions of one graph, driven by
its env panel (Play / Pause / Step / Stop), with a live feed of its trace and frames."""

from hylo.sessions.feed import Batch, Frame, FrameSlot, LiveFeed
from hylo.sessions.manager import (
    MAX_SESSIONS,
    NotFound,
    PanelRegistry,
    PlacementRequest,
    SessionManager,
    SessionRefused,
    SessionRequest,
)
from hylo.sessions.session import Session
from hylo.sessions.state import SessionConflict, SessionGone, SessionSetup, SessionState

__all__ = [
    "MAX_SESSIONS",
    "Batch",
    "Frame",
    "FrameSlot",
    "LiveFeed",
    "NotFound",
    "PanelRegistry",
    "PlacementRequest",
    "Session",
    "SessionConflict",
    "SessionGone",
    "SessionManager",
    "SessionRefused",
    "SessionRequest",
    "SessionSetup",
    "SessionState",
]
