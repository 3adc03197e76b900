"""`carry_out`: the one function that carries out a panel hook's intent, for the batch runner and a session alike; and
`PanelReply`, the typed answer it reads."""

from __future__ import annotations

import json
import pickle
from typing import get_args

import pytest

from hylo.panels import (
    PLAYBACK_ACTIONS,
    SIDE_EFFECTS,
    EnvPanelAction,
    PanelReply,
    PanelState,
    SideEffect,
    SideEffectName,
    UnknownIntent,
    intent,
)
from hylo.panels.intents import carry_out


class Recorder:
    def __init__(self) -> None:
        self.done: list[tuple[str, str]] = []

    def signal(self, name: str) -> None:
        self.done.append(("signal", name))

    def run(self, effect: SideEffect) -> None:
        assert isinstance(effect, SideEffect)
        self.done.append(("run", effect.value))


def test_a_signal_intent_reaches_the_target_by_name() -> None:
    target = Recorder()
    assert carry_out(intent("signal", signal_name="episode_reset"), target) is SideEffect.SIGNAL
    assert target.done == [("signal", "episode_reset")]


@pytest.mark.parametrize("effect", ["run_start", "run_pause", "run_step", "run_stop", "none"])
def test_a_run_intent_reaches_the_target_typed(effect: SideEffectName) -> None:
    target = Recorder()
    assert carry_out(intent(effect), target) == effect
    assert target.done == [("run", effect)]


def test_an_answer_without_a_side_effect_is_none() -> None:
    target = Recorder()
    assert carry_out(PanelReply(), target) is SideEffect.NONE
    assert target.done == [("run", "none")]


def test_an_unknown_side_effect_is_refused_by_name() -> None:
    with pytest.raises(UnknownIntent, match="unknown side_effect 'warp'"):
        PanelReply("warp")  # type: ignore[arg-type]
    with pytest.raises(UnknownIntent, match="unknown side_effect 'warp'"):
        intent("warp")  # type: ignore[arg-type]
    assert PanelReply("run_stop").effect is SideEffect.RUN_STOP  # type: ignore[arg-type]


def test_a_signal_intent_names_its_signal_and_only_it_does() -> None:
    with pytest.raises(ValueError, match="names the signal"):
        PanelReply(SideEffect.SIGNAL)
    with pytest.raises(ValueError, match="delivers no signal"):
        PanelReply(SideEffect.RUN_START, "episode_reset")


def test_side_effects_are_strings_in_every_json_form() -> None:
    assert SIDE_EFFECTS == tuple(SideEffect) == get_args(SideEffectName)
    answer = intent(SideEffect.RUN_START).to_json()
    assert type(answer["side_effect"]) is str and json.dumps(answer) == '{"ok": true, "side_effect": "run_start"}'
    play = PLAYBACK_ACTIONS[0]
    assert play.side_effect is SideEffect.RUN_START and type(play.to_json()["side_effect"]) is str
    with pytest.raises(ValueError, match="side_effect must be one of"):
        EnvPanelAction("warp", "Warp", "warp")  # type: ignore[arg-type]


def test_the_json_of_an_answer_is_the_http_apis() -> None:
    moved = intent("signal", signal_name="episode_reset", signal_payload={"episode_index": 2}, note="x")
    assert moved.to_json() == {"ok": True, "side_effect": "signal", "note": "x", "signal_name": "episode_reset",
                               "signal_payload": {"episode_index": 2}}  # fmt: skip
    assert intent(options=["a", "b"]).to_json() == {"ok": True, "side_effect": "none", "options": ["a", "b"]}
    state = PanelState(available=False, status="not installed", step_budget=None, values={"task": "t"})
    assert state.to_json() == {"available": False, "status": "not installed", "step_budget": None, "task": "t"}


def test_answers_are_frozen_values_that_travel() -> None:
    reply = intent("signal", signal_name="episode_reset", signal_payload={"seed": 1}, options=("x",))
    with pytest.raises(AttributeError):
        reply.effect = SideEffect.NONE  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(reply)) == reply
    state = PanelState(step_budget=3, values={"task": "t"})
    assert pickle.loads(pickle.dumps(state)) == state
