"""Headless rendering defaults, set before any simulator is imported.

MuJoCo reads `MUJOCO_GL` when it is imported: on Linux, hylo defaults it to `egl` (offscreen, no display needed; Mesa's
llvmpipe on a CPU-only machine) and Mesa's `LP_NUM_THREADS` to 1 (one render thread beside the simulation, instead of
one per core). Values the user set are kept.
"""

from __future__ import annotations

import os
import sys


def configure() -> None:
    if sys.platform.startswith("linux"):
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("LP_NUM_THREADS", "1")
