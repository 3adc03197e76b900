"""Carrying out a panel's intent: the one function the batch runner (`hylo.panels.placement`) and an interactive
session (`hylo.sessions`) both call with a hook's answer.

A hook never does anything itself; its answer names a `SideEffect`. `carry_out` reads it and hands it to the
owner of the execution (an `IntentTarget`): a `signal` intent to `signal(name)`, a run intent (Play, Pause, Step,
Stop, or nothing) to `run(effect)`. What each owner makes of them is its own: the batch runner delivers the signals
once the episode is placed and runs the episode Play placed; a session drives its execution.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hylo.core.errors import HyloError
from hylo.panels.base import SideEffect


class UnknownIntent(HyloError):
    """A hook answered a `side_effect` that is not one of `SideEffect`'s."""


class IntentTarget(Protocol):
    """Who carries out a panel's intents: the owner of the execution the panel places."""

    def signal(self, name: str) -> None:
        """Deliver the lifecycle signal `name` (e.g. `episode_reset`)."""

    def run(self, effect: SideEffect) -> None:
        """Carry out a run intent: `run_start`, `run_pause`, `run_step`, `run_stop` or `none`."""


def side_effect_of(result: Mapping[str, Any]) -> SideEffect:
    """The intent of a hook's answer (`none` when it names none); raises `UnknownIntent` for a value that is not a
    side effect."""
    value = str(result.get("side_effect") or "none")
    try:
        return SideEffect(value)
    except ValueError:
        raise UnknownIntent(f"unknown side_effect {value!r}") from None


def carry_out(result: Mapping[str, Any], target: IntentTarget) -> SideEffect | None:
    """Carry out the intent of the hook's answer `result` on `target`; returns it. A refusal (`ok` false) carries
    nothing out: None."""
    if not result.get("ok", True):
        return None
    effect = side_effect_of(result)
    if effect is SideEffect.SIGNAL:
        target.signal(str(result["signal_name"]))
    else:
        target.run(effect)
    return effect
