"""Built-in environments: small, dependency-free tasks for tests, demos and harness benchmarks."""

from hylo.envs.grid import GridGoal, GridGoalExpert
from hylo.envs.null import NullEnv
from hylo.envs.reach import PointReach, PointReachExpert

__all__ = ["GridGoal", "GridGoalExpert", "NullEnv", "PointReach", "PointReachExpert"]
