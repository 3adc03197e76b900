"""mani-skill's motion planner (mplib 0.1.1) in a process of its own, where it gets the numpy it was built for.

mplib 0.1.1 crashes under numpy 2 (a segmentation fault in `Planner.__init__`), and LeRobot, in the same
environment, needs numpy >= 2. `RemotePlanner` stands in for `mplib.Planner` in mani-skill's planning solver
(`mani_skill.examples.motionplanning.base_motionplanner.motionplanner`, the name `mplib` there): each call goes, as
msgpack over a pipe, to a planner process started from this file with the environment's own interpreter, whose
module path starts with numpy 1.26 and SciPy 1.13 (`hylo.envs.maniskill_setup.PLANNER_DIR`). The process imports
nothing of hylo: `hylo.envs.mplib_server` runs there as a script, with only msgpack, numpy and mplib.

The planner is deterministic for what the solutions use (screw motions: Jacobian steps from the current joint
positions, then TOPP-RA); the RRT planners sample, so numpy's generator is seeded at every planner's creation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from hylo.core.errors import HyloFailure
from hylo.envs import mplib_server
from hylo.envs.mplib_server import read, write


class PlannerError(HyloFailure):
    """The planner process failed, or is not installed (the message says what to run)."""


class PlannerProcess:
    """One planner process, shared by the planners of a worker; started on first use, ended by `close`."""

    def __init__(self, planner_dir: Path) -> None:
        self.planner_dir = planner_dir
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def call(self, target: int, method: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                write(process.stdin, [target, method, list(args), kwargs])
                ok, value = read(process.stdout)
            except (EOFError, BrokenPipeError, OSError) as exc:
                self._process = None
                raise PlannerError(f"the planner process ended ({exc}); its exit status: {process.poll()}") from exc
            if not ok:
                raise PlannerError(f"the planner's {method} failed: {value}")
            return value

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        if not (self.planner_dir / "numpy" / "__init__.py").is_file():
            raise PlannerError(
                f"the motion planner's numpy is not installed in {self.planner_dir}: run "
                f"`{Path(sys.executable).name} -m hylo.envs.maniskill_setup`"
            )
        env = dict(os.environ, PYTHONPATH=str(self.planner_dir), PYTHONWARNINGS="ignore")
        self._process = subprocess.Popen(
            [sys.executable, "-P", mplib_server.__file__],  # -P: its folder (hylo/envs) is not put on the path
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )  # fmt: skip
        return self._process

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


class RemotePlanner:
    """`mplib.Planner`'s constructor, methods and joint limits, carried out in the planner process."""

    def __init__(self, process: PlannerProcess, seed: int, **kwargs: Any) -> None:
        self._process = process
        self._id, limits = process.call(0, "create", seed, **kwargs)
        self._limits: dict[str, np.ndarray[Any, Any]] = limits

    @property
    def joint_vel_limits(self) -> np.ndarray[Any, Any]:
        return self._limits["joint_vel_limits"]

    @joint_vel_limits.setter
    def joint_vel_limits(self, value: Any) -> None:
        self._set_limits("joint_vel_limits", value)

    @property
    def joint_acc_limits(self) -> np.ndarray[Any, Any]:
        return self._limits["joint_acc_limits"]

    @joint_acc_limits.setter
    def joint_acc_limits(self, value: Any) -> None:
        self._set_limits("joint_acc_limits", value)

    def _set_limits(self, name: str, value: Any) -> None:
        array = np.asarray(value, np.float64)
        self._process.call(self._id, "setattr", name, array)
        self._limits[name] = array

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._process.call(self._id, method, *args, **kwargs)

        return call


class PlannerModule:
    """What mani-skill's solver reads of the `mplib` module: `Planner`, here made in the planner process."""

    def __init__(self, process: PlannerProcess, seed: int = 0) -> None:
        self.process = process
        self.seed = seed

    def Planner(self, **kwargs: Any) -> RemotePlanner:
        return RemotePlanner(self.process, self.seed, **kwargs)
