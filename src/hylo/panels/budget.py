"""The step-budget cascade: explicit request > panel `on_load` step_budget > benchmark default."""

from __future__ import annotations

from hylo.panels.base import PanelState


def resolve_step_budget(requested: int | None, loaded: PanelState | None, default: int | None) -> int:
    """The per-episode step budget. `loaded` is the panel's `on_load()` answer (its `step_budget`, else a
    `max_steps_default` among its values). A budget below 1 is refused: there are no zero-step episodes."""
    panel = loaded if loaded is not None else PanelState()
    for source, value in (
        ("the request", requested),
        ("the panel's step_budget", panel.step_budget),
        ("the panel's max_steps_default", panel.values.get("max_steps_default")),
        ("the benchmark default", default),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"step budget from {source} must be an integer, got {value!r}")
        if value < 1:
            raise ValueError(f"step budget must be >= 1, got {value} (from {source})")
        return value
    raise ValueError("no step budget: pass one explicitly (--max-steps)")
