"""Headless rendering defaults, set before any simulator is imported.

MuJoCo reads `MUJOCO_GL` when it is imported: on Linux, hylo defaults it to `egl` (offscreen, no display needed; Mesa's
llvmpipe on a CPU-only machine) and Mesa's `LP_NUM_THREADS` to 1 (one render thread beside the simulation, instead of
one per core). Values the user set are kept. `without_cuda_devices` hides the GPUs' CUDA side from a process that
must not use it, and keeps its renderer working.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import MutableMapping


def configure() -> None:
    # pygame (minigrid's and gym-pusht's renderer) imports pkg_resources, which setuptools >= 81 warns about at every
    # start of every process: a line of noise before each command's output
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated as an API", category=UserWarning)
    if sys.platform.startswith("linux"):
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("LP_NUM_THREADS", "1")


def without_cuda_devices(environ: MutableMapping[str, str]) -> None:
    """Hide every CUDA device from the process `environ` is (or will be) the environment of, keeping an EGL device
    for its renderer: `MUJOCO_EGL_DEVICE_ID` becomes 0 unless the user chose one. Without it, robosuite (LIBERO's
    renderer) reads the empty `CUDA_VISIBLE_DEVICES` as its list of EGL devices and fails to render at all. Device 0
    is the one robosuite takes, and the first MuJoCo tries, when nothing is set."""
    environ["CUDA_VISIBLE_DEVICES"] = ""
    environ.setdefault("MUJOCO_EGL_DEVICE_ID", "0")
