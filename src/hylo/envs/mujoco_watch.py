"""MuJoCo divergence detection, shared by every MuJoCo-based environment (Meta-World, `gym:` MuJoCo envs).

MuJoCo silently resets the state after a divergence, so its warning counters are the only reliable signal: they
are compared before and after each step. BADQPOS / BADQVEL / BADQACC → `SimulationDiverged` (infra_invalid);
BADCTRL (a bad control from the agent) → `InvalidAction` (the agent's error). Warnings are looked up by name in
`mujoco.mjtWarning`, never by index.

MuJoCo's own warning printer writes to file descriptor 1 and appends to MUJOCO_LOG.TXT in the working directory;
`route_mujoco_warnings()` sends them to Python logging instead.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from hylo.core.errors import InvalidAction, SimulationDiverged

log = logging.getLogger("hylo.mujoco")

DIVERGENCE_WARNINGS = ("mjWARN_BADQPOS", "mjWARN_BADQVEL", "mjWARN_BADQACC")
AGENT_WARNINGS = ("mjWARN_BADCTRL",)

_routed = False


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to the `hylo.mujoco` logger (not stdout, not MUJOCO_LOG.TXT). Idempotent."""
    global _routed
    if _routed:
        return
    import mujoco  # optional: the MuJoCo benchmarks' extras

    mujoco.set_mju_user_warning(_log_warning)
    _routed = True


def _log_warning(message: str) -> None:
    log.warning("MuJoCo: %s", message.strip())


def find_mjdata(env: Any) -> Any | None:
    """The `mujoco.MjData` behind a (possibly wrapped) gymnasium env, or None when it has none."""
    try:
        import mujoco  # optional: the MuJoCo benchmarks' extras
    except ImportError:
        return None
    seen: set[int] = set()
    current: Any = env
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        data = getattr(current, "data", None)
        if isinstance(data, mujoco.MjData):
            return data
        current = getattr(current, "env", None)
    unwrapped = getattr(env, "unwrapped", None)
    data = getattr(unwrapped, "data", None)
    return data if isinstance(data, mujoco.MjData) else None


class DivergenceWatch:
    """Compares MuJoCo's warning counters around a step.

    ```
    watch = DivergenceWatch(lambda: data)
    before = watch.counts()
    env.step(action)
    watch.check(before)  # raises SimulationDiverged / InvalidAction naming the warning
    ```

    `data` is given as a callable because some envs rebuild their `MjData` (on a task switch).
    """

    def __init__(self, data: Any) -> None:
        import mujoco  # optional: the MuJoCo benchmarks' extras

        self._data = data if callable(data) else (lambda: data)
        self._names = (*DIVERGENCE_WARNINGS, *AGENT_WARNINGS)
        self._index_array = np.array([int(getattr(mujoco.mjtWarning, name)) for name in self._names])
        route_mujoco_warnings()

    def counts(self) -> tuple[Any, float]:
        """The watched warning counters and the simulation time, before a step."""
        data = self._data()
        return data.warning.number[self._index_array].copy(), float(data.time)

    def check(self, before: tuple[Any, float]) -> None:
        """Raise if the step that followed `before = counts()` diverged or was refused."""
        data = self._data()
        numbers, time_before = before
        after = data.warning.number[self._index_array]
        went_back = data.time < time_before
        if not went_back and (after == numbers).all():
            return
        increased = [name for name, b, a in zip(self._names, numbers, after, strict=True) if a > b]
        diverged = [name for name in increased if name in DIVERGENCE_WARNINGS]
        if not diverged and (went_back or (after < numbers).any()):
            # MuJoCo's automatic reset after a divergence clears the counters before counting the new warning, so a
            # second divergence in one episode can leave them unchanged; the reset also sends time back.
            diverged = [n for n, a in zip(self._names, after, strict=True) if a > 0 and n in DIVERGENCE_WARNINGS]
            raise SimulationDiverged(", ".join(n.removeprefix("mjWARN_") for n in diverged) or "state reset", "MuJoCo")
        if diverged:
            raise SimulationDiverged(", ".join(name.removeprefix("mjWARN_") for name in diverged), "MuJoCo")
        if increased:
            raise InvalidAction("MuJoCo rejected the control (BADCTRL): non-finite or huge control value")
