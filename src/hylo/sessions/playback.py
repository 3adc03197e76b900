"""Play / Pause / Step / Stop: how a session's run intents move its execution, and whether the execution goes on at
its next gate (the runner asks before every iteration). A hook's intent reaches the session through a `Delivery`,
which says what became of it (`Delivered`).

- `run_start`: idle → a new execution of the placed episode; paused → resume.
- `run_pause`: the running execution stops before its next iteration and waits.
- `run_step`: one iteration (one env step), then paused; from idle, a new execution that pauses after its first step.
- `run_stop`: the execution ends before its next iteration, `infra_invalid` ("stopped"): not a success, not a failure.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hylo.core.errors import HyloError, HyloFailure
from hylo.panels.base import PanelReply, SideEffect
from hylo.panels.intents import carry_out
from hylo.sessions.state import SessionState


class Mode(enum.Enum):
    RUN = "run"
    STEP = "step"
    PAUSE = "pause"


class Start(enum.Enum):
    """What a run intent asks of the session beyond the playback state: nothing, a new execution, or to resume."""

    NOTHING = "nothing"
    BEGIN = "begin"
    RESUME = "resume"


class Playback:
    """The playback state of one session's execution: its `mode`, the steps a Step still allows (`permits`) and why
    it must end at its next gate (`halt`, None to go on)."""

    def __init__(self) -> None:
        self.mode = Mode.RUN
        self.permits = 0
        self.halt: str | None = None

    def control_state(self, state: SessionState) -> SessionState:
        """The state the panel's actions see: a Step in progress counts as paused (Play resumes it, Step adds one)."""
        if state is SessionState.RUNNING and self.mode is Mode.STEP:
            return SessionState.PAUSED
        return state

    def press(self, effect: SideEffect, state: SessionState) -> Start:
        """Carry out the run intent `effect` in session state `state`."""
        control = self.control_state(state)
        if effect is SideEffect.RUN_START:
            if control is SessionState.IDLE:
                self.mode = Mode.RUN
                return Start.BEGIN
            if control is SessionState.PAUSED:
                self.mode = Mode.RUN
                return Start.RESUME
        elif effect is SideEffect.RUN_STEP:
            if control is SessionState.IDLE:
                self.mode, self.permits = Mode.STEP, 1
                return Start.BEGIN
            if state is SessionState.PAUSED:
                self.mode, self.permits = Mode.STEP, 1
            elif control is SessionState.PAUSED:  # a step in progress: one more after it
                self.permits += 1
        elif effect is SideEffect.RUN_PAUSE:
            if control is SessionState.RUNNING:
                self.mode, self.permits = Mode.PAUSE, 0
        elif effect is SideEffect.RUN_STOP and state in (SessionState.RUNNING, SessionState.PAUSED):
            self.halt = "Stop pressed"
        return Start.NOTHING

    def stop(self, why: str) -> None:
        """End the execution at its next gate (the first reason given stands)."""
        self.halt = self.halt or why

    def proceed(self) -> bool:
        """At a gate: whether the next iteration runs now (using one of a Step's permits)."""
        if self.mode is Mode.RUN:
            return True
        if self.mode is Mode.STEP and self.permits > 0:
            self.permits -= 1
            return True
        return False

    def rearm(self) -> None:
        """After an execution: the next one plays through unless told otherwise."""
        self.halt = None
        self.mode, self.permits = Mode.RUN, 0


@dataclass(frozen=True, slots=True)
class Delivered:
    """A hook's answer as a session carried it out: the panel's `reply`, and what became of its intent. A signal was
    `forwarded` to the session's runner (False with `signal_error` when that failed: the hook's own change stands); a
    run intent was pressed on its playback (`carried_out`)."""

    reply: PanelReply
    forwarded: bool | None = None
    signal_error: str | None = None
    carried_out: SideEffect | None = None

    def to_json(self) -> dict[str, Any]:
        """As the HTTP API answers it: the reply's JSON with `forwarded`, `signal_error` and `carried_out` where set."""
        data = self.reply.to_json()
        if self.forwarded is not None:
            data["forwarded"] = self.forwarded
        if self.signal_error is not None:
            data["signal_error"] = self.signal_error
        if self.carried_out is not None:
            data["carried_out"] = str(self.carried_out)
        return data


class Delivery:
    """A session as the target of one hook's intent (`hylo.panels.intents.carry_out`): a signal is forwarded to its
    runner, a run intent is pressed on its playback. `of(reply)` carries a reply out and says what became of it."""

    def __init__(self, *, forward: Callable[[str], None], press: Callable[[SideEffect], None]) -> None:
        self._forward = forward
        self._press = press
        self.forwarded: bool | None = None
        self.signal_error: str | None = None
        self.carried_out: SideEffect | None = None

    def of(self, reply: PanelReply) -> Delivered:
        carry_out(reply, self)
        return Delivered(reply, self.forwarded, self.signal_error, self.carried_out)

    def signal(self, name: str) -> None:
        self.forwarded = False
        try:
            self._forward(name)
        except HyloFailure:
            raise
        except HyloError as exc:
            self.signal_error = str(exc)
        else:
            self.forwarded = True

    def run(self, effect: SideEffect) -> None:
        self._press(effect)
        self.carried_out = effect
