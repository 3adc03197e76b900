"""Specs of real jobs for the scheduler tests: one that ends in about a second, one that takes several."""

from __future__ import annotations

from typing import Any

from hylo.eval.spec import EvalSpec


def quick(**overrides: Any) -> EvalSpec:
    """BabyAI's expert on GoToLocal, 3 episodes: about a second."""
    return EvalSpec.model_validate(
        {"benchmark": "babyai", "agent": "expert", "tasks": ["GoToLocal"], "episodes": 3, **overrides}
    )


def slow(**overrides: Any) -> EvalSpec:
    """A random agent on Meta-World reach-v3 paced at the control rate (wall clock): several seconds."""
    return EvalSpec.model_validate(
        {
            "benchmark": "metaworld",
            "agent": "random",
            "tasks": ["reach-v3"],
            "episodes": 12,
            "max_steps": 40,
            "timing": "realtime",
            "timing_options": {"clock": "wall"},
            **overrides,
        }
    )
