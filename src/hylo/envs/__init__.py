"""Environments and benchmarks: the built-in dependency-free envs, and the BabyAI, Meta-World and Gymnasium
benchmarks (imported on demand through `hylo.envs.registry.get_benchmark`)."""

from hylo.envs.headless import configure as _configure_headless

_configure_headless()  # before any simulator module is imported

from hylo.envs.grid import GridGoal, GridGoalExpert  # noqa: E402
from hylo.envs.null import NullEnv  # noqa: E402
from hylo.envs.reach import PointReach, PointReachExpert  # noqa: E402

__all__ = ["GridGoal", "GridGoalExpert", "NullEnv", "PointReach", "PointReachExpert"]
