"""Play / Pause / Step / Stop on a session's playback: what each run intent does in each state (docs/live.md)."""

from __future__ import annotations

from hylo.panels import SideEffect
from hylo.sessions.playback import Mode, Playback, Start
from hylo.sessions.state import SessionState

IDLE, RUNNING, PAUSED = SessionState.IDLE, SessionState.RUNNING, SessionState.PAUSED


def test_play_begins_from_idle_and_resumes_when_paused() -> None:
    playback = Playback()
    assert playback.press(SideEffect.RUN_START, IDLE) is Start.BEGIN
    assert playback.press(SideEffect.RUN_START, RUNNING) is Start.NOTHING
    playback.mode = Mode.PAUSE
    assert playback.press(SideEffect.RUN_START, PAUSED) is Start.RESUME and playback.mode is Mode.RUN


def test_step_runs_one_iteration_at_a_time_and_a_step_in_progress_counts_as_paused() -> None:
    playback = Playback()
    assert playback.press(SideEffect.RUN_STEP, IDLE) is Start.BEGIN
    assert playback.control_state(RUNNING) is PAUSED
    assert playback.press(SideEffect.RUN_STEP, RUNNING) is Start.NOTHING  # one more after this one
    assert [playback.proceed() for _ in range(3)] == [True, True, False]


def test_pause_holds_the_next_iteration_and_stop_ends_it_once() -> None:
    playback = Playback()
    assert playback.press(SideEffect.RUN_PAUSE, IDLE) is Start.NOTHING and playback.proceed()
    playback.press(SideEffect.RUN_PAUSE, RUNNING)
    assert not playback.proceed()
    playback.press(SideEffect.RUN_STOP, IDLE)
    assert playback.halt is None
    playback.press(SideEffect.RUN_STOP, PAUSED)
    playback.stop("the session was closed")
    assert playback.halt == "Stop pressed"  # the first reason stands
    playback.rearm()
    assert playback.halt is None and playback.mode is Mode.RUN and playback.proceed()
