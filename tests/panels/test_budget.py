"""The step-budget cascade: explicit request > panel `step_budget` > a `max_steps_default` value > default."""

from __future__ import annotations

from typing import Any

import pytest

from hylo.panels import PanelState, resolve_step_budget


def state(loaded: dict[str, Any]) -> PanelState:
    """The `on_load` answer whose JSON has these keys (a panel's `max_steps_default` among its values)."""
    values = {key: value for key, value in loaded.items() if key != "step_budget"}
    return PanelState(step_budget=loaded.get("step_budget"), values=values)


@pytest.mark.parametrize(
    "requested, loaded, default, expected",
    [
        (5, {"step_budget": 10, "max_steps_default": 20}, 64, 5),  # the request wins
        (None, {"step_budget": 10, "max_steps_default": 20}, 64, 10),  # then the panel
        (None, {"max_steps_default": 20}, 64, 20),  # a panel that names it max_steps_default
        (None, {"step_budget": None, "max_steps_default": 20}, 64, 20),
        (None, {}, 64, 64),  # then the benchmark default
        (None, {"available": True, "task": "GoToLocal"}, 64, 64),  # other on_load keys do not count
        (1, {}, None, 1),  # one step is the smallest budget
        (7, {}, None, 7),
        (None, {"step_budget": 3}, None, 3),
    ],
)
def test_cascade_order(requested: int | None, loaded: dict[str, Any], default: int | None, expected: int) -> None:
    assert resolve_step_budget(requested, state(loaded), default) == expected


@pytest.mark.parametrize("bad", [0, -1, -100])
@pytest.mark.parametrize(
    "where, source",
    [
        ("request", "the request"),
        ("step_budget", "the panel's step_budget"),
        ("max_steps_default", "the panel's max_steps_default"),
        ("default", "the benchmark default"),
    ],
)
def test_budget_below_one_is_refused_naming_source_and_value(where: str, source: str, bad: int) -> None:
    requested = bad if where == "request" else None
    loaded = {where: bad} if where in ("step_budget", "max_steps_default") else {}
    default = bad if where == "default" else None
    with pytest.raises(ValueError, match=rf"got {bad} \(from {source}\)"):
        resolve_step_budget(requested, state(loaded), default)


def test_a_bad_panel_budget_is_not_silently_skipped_for_the_default() -> None:
    with pytest.raises(ValueError, match="step_budget"):
        resolve_step_budget(None, state({"step_budget": 0}), 64)


@pytest.mark.parametrize("bad", [2.5, 10.0, "10", True, [10]])
@pytest.mark.parametrize("where", ["request", "step_budget", "max_steps_default", "default"])
def test_non_integer_budget_is_refused(where: str, bad: Any) -> None:
    requested = bad if where == "request" else None
    loaded = {where: bad} if where in ("step_budget", "max_steps_default") else {}
    default = bad if where == "default" else None
    with pytest.raises(ValueError, match="must be an integer") as info:
        resolve_step_budget(requested, state(loaded), default)
    assert repr(bad) in str(info.value)


def test_no_budget_anywhere_is_refused() -> None:
    with pytest.raises(ValueError, match="no step budget"):
        resolve_step_budget(None, state({}), None)
    with pytest.raises(ValueError, match="no step budget"):
        resolve_step_budget(None, state({"step_budget": None, "max_steps_default": None}), None)
