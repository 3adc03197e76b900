"""Carrying out a panel's intent: the one function the batch runner (`hylo.panels.placement`) and an interactive
session (`hylo.sessions`) both call with a hook's answer.

A hook never does anything itself; its answer (`PanelReply`) names a `SideEffect`. `carry_out` reads it and hands it
to the owner of the execution (an `IntentTarget`): a `signal` intent to `signal(name)`, a run intent (Play, Pause,
Step, Stop, or nothing) to `run(effect)`. What each owner makes of them is its own: the batch runner delivers the
signals once the episode is placed and runs the episode it placed; a session drives its execution.
"""

from __future__ import annotations

from typing import Protocol

from hylo.panels.base import PanelReply, SideEffect, UnknownIntent

__all__ = ["IntentTarget", "UnknownIntent", "carry_out"]


class IntentTarget(Protocol):
    """Who carries out a panel's intents: the owner of the execution the panel places."""

    def signal(self, name: str) -> None:
        """Deliver the lifecycle signal `name` (e.g. `episode_reset`)."""

    def run(self, effect: SideEffect) -> None:
        """Carry out a run intent: `run_start`, `run_pause`, `run_step`, `run_stop` or `none`."""


def carry_out(reply: PanelReply, target: IntentTarget) -> SideEffect:
    """Carry out the intent of the hook's answer `reply` on `target`; returns it."""
    if reply.signal is not None:
        target.signal(reply.signal)
    else:
        target.run(reply.effect)
    return reply.effect
