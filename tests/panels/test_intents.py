"""`carry_out`: the one function that carries out a panel hook's intent, for the batch runner and a session alike."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from hylo.panels import PLAYBACK_ACTIONS, SIDE_EFFECTS, EnvPanelAction, SideEffect, SideEffectName, intent
from hylo.panels.intents import UnknownIntent, carry_out, side_effect_of


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


def test_an_answer_without_a_side_effect_is_none_and_a_refusal_carries_nothing_out() -> None:
    target = Recorder()
    assert carry_out({"ok": True}, target) is SideEffect.NONE
    assert carry_out(intent("run_start", ok=False, error="no"), target) is None
    assert target.done == [("run", "none")]


def test_an_unknown_side_effect_is_refused_by_name() -> None:
    with pytest.raises(UnknownIntent, match="unknown side_effect 'warp'"):
        carry_out({"ok": True, "side_effect": "warp"}, Recorder())
    assert side_effect_of({"side_effect": None}) is SideEffect.NONE


def test_side_effects_are_strings_in_every_json_form() -> None:
    assert SIDE_EFFECTS == tuple(SideEffect) == get_args(SideEffectName)
    answer = intent(SideEffect.RUN_START)
    assert type(answer["side_effect"]) is str and json.dumps(answer) == '{"ok": true, "side_effect": "run_start"}'
    play = PLAYBACK_ACTIONS[0]
    assert play.side_effect is SideEffect.RUN_START and type(play.to_json()["side_effect"]) is str
    with pytest.raises(ValueError, match="side_effect must be one of"):
        EnvPanelAction("warp", "Warp", "warp")  # type: ignore[arg-type]
