"""What became of a hook's intent in a session (`Delivery`, `Delivered`): a signal forwarded to the runner (or the
error it failed with, the hook's own change standing), a run intent pressed; and the answer's JSON, as the HTTP API
gives it."""

from __future__ import annotations

import pytest

from hylo.core.errors import HyloError, HyloFailure
from hylo.panels import PanelReply, SideEffect, intent
from hylo.sessions.playback import Delivered, Delivery


def test_a_forwarded_signal_says_so() -> None:
    forwarded: list[str] = []
    reply = intent("signal", signal_name="episode_reset", signal_payload={"episode_index": 3})
    done = Delivery(forward=forwarded.append, press=lambda effect: None).of(reply)
    assert forwarded == ["episode_reset"]
    assert done == Delivered(reply, forwarded=True)
    assert done.to_json() == {"ok": True, "side_effect": "signal", "signal_name": "episode_reset",
                              "signal_payload": {"episode_index": 3}, "forwarded": True}  # fmt: skip


def test_a_signal_that_failed_is_answered_with_its_error_and_a_broken_runner_raises() -> None:
    def refuse(name: str) -> None:
        raise HyloError(f"the {name} signal failed: agent on_signal raised")

    reply = intent("signal", signal_name="episode_reset")
    done = Delivery(forward=refuse, press=lambda effect: None).of(reply)
    assert (done.forwarded, done.signal_error) == (False, "the episode_reset signal failed: agent on_signal raised")
    assert done.to_json()["forwarded"] is False and done.to_json()["signal_error"] == done.signal_error

    def crash(name: str) -> None:
        raise HyloFailure("the runner crashed")

    with pytest.raises(HyloFailure, match="crashed"):
        Delivery(forward=crash, press=lambda effect: None).of(reply)


def test_a_run_intent_is_pressed_and_said_carried_out() -> None:
    pressed: list[SideEffect] = []
    done = Delivery(forward=lambda name: None, press=pressed.append).of(PanelReply(SideEffect.RUN_STEP))
    assert pressed == [SideEffect.RUN_STEP] and done.carried_out is SideEffect.RUN_STEP and done.forwarded is None
    assert done.to_json() == {"ok": True, "side_effect": "run_step", "carried_out": "run_step"}
