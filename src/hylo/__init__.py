"""hylo: truthful, fast, reproducible evaluation of embodied agents in simulation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hylo.version import __version__

if TYPE_CHECKING:
    from hylo.eval import EvalResult, EvalSpec, evaluate

__all__ = ["EvalResult", "EvalSpec", "__version__", "evaluate"]


def __getattr__(name: str) -> Any:
    # `hylo.evaluate` without importing the evaluation stack on `import hylo` (the CLI's --version stays instant)
    if name in ("evaluate", "EvalSpec", "EvalResult"):
        import hylo.eval  # start-up time: `import hylo` stays light

        return getattr(hylo.eval, name)
    raise AttributeError(f"module 'hylo' has no attribute {name!r}")
