"""The built-in environments behave as their docstrings promise: what the observation shows, how the world moves,
when an episode succeeds. Episodes run through the Kernel; single resets and steps use the env directly."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from hylo.core import (
    AgentBase,
    AgentRequirements,
    Environment,
    EpisodeContext,
    EpisodeOutcome,
    EpisodeStatus,
    EventBus,
    Kernel,
    MemoryRecorder,
    Observation,
    StepResult,
    TaskInstance,
)
from hylo.envs import GridGoal, GridGoalExpert, NullEnv, PointReach, PointReachExpert
from hylo.envs.grid import AGENT, GOAL, MOVES, WALL
from hylo.envs.reach import COLORS, STEP_SIZE, SUCCESS_RADIUS

COLOR_NAMES = list(COLORS)


class Scripted(AgentBase):
    """Acts by a function of the observation, and keeps what it was shown: every observation and StepResult."""

    def __init__(self, policy: Callable[[Observation], Any], requirements: AgentRequirements | None = None) -> None:
        self.policy = policy
        self.requirements = requirements
        self.seen: list[Observation] = []
        self.results: list[StepResult] = []

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.seen, self.results = [], []

    def act(self, obs: Observation) -> Any:
        self.seen.append(obs)
        return self.policy(obs)

    def on_step(self, result: StepResult) -> None:
        self.results.append(result)


def run(env: Environment, agent: Any, task: TaskInstance, **kernel: Any) -> EpisodeOutcome:
    runner = Kernel(env, agent, **kernel)
    try:
        return runner.run(task)
    finally:
        runner.close()


def reach_task(index: int, **params: Any) -> TaskInstance:
    return TaskInstance("point_reach", "reach", index=index, params=params)


def grid_task(index: int) -> TaskInstance:
    return TaskInstance("grid_goal", "goto", index=index)


# -- PointReach -------------------------------------------------------------------------------------------------------


def point(obs: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(obs["state"][:2], np.float64)


def markers(obs: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """The three markers' positions, in the order red, green, blue."""
    return np.asarray(obs["state"][2:], np.float64).reshape(3, 2)


def named_color(obs: Mapping[str, Any]) -> str:
    found = re.fullmatch(r"reach the (\w+) marker", str(obs["instruction"]))
    assert found is not None, obs["instruction"]
    return found.group(1)


def test_the_instruction_names_one_of_three_colours_whose_marker_is_in_the_state() -> None:
    env = PointReach()
    named = set()
    for index in range(30):
        obs = env.reset(reach_task(index))
        color = named_color(obs)
        assert color in COLOR_NAMES
        named.add(color)
        target = markers(obs)[COLOR_NAMES.index(color)]
        np.testing.assert_allclose(target, env.privileged_state("target"), atol=1e-6)
        assert np.all((obs["state"] >= 0.0) & (obs["state"] <= 1.0))
    assert named == set(COLOR_NAMES), "the named colour varies with the seed"


def test_the_point_moves_at_most_step_size_per_axis_and_stays_in_the_unit_square() -> None:
    rng = np.random.default_rng(0)
    agent = Scripted(lambda obs: rng.uniform(-1.0, 1.0, 2).astype(np.float32))
    for index in range(4):
        run(PointReach(), agent, reach_task(index))
        path = np.array([point(agent.seen[0])] + [point(result.obs) for result in agent.results])
        assert len(path) > 10
        assert np.abs(np.diff(path, axis=0)).max() <= STEP_SIZE + 1e-6
        assert np.all((path >= 0.0) & (path <= 1.0))

    env = PointReach()
    start = point(env.reset(reach_task(0)))
    moved = point(env.step(np.array([1.0, -1.0], np.float32)).obs)
    np.testing.assert_allclose(moved - start, [STEP_SIZE, -STEP_SIZE], atol=1e-6)  # a full action moves a full step


def test_pushed_against_a_wall_the_point_stops_at_the_edge() -> None:
    env = PointReach()
    pinned = 0
    for index in range(6):
        obs: Mapping[str, Any] = env.reset(reach_task(index))
        for _ in range(25):  # oversized actions: the env clips them to a step of STEP_SIZE
            before = point(obs)
            result = env.step(np.array([-4.0, 0.0], np.float32))
            obs = result.obs
            assert np.abs(point(obs) - before).max() <= STEP_SIZE + 1e-6
            assert np.all((point(obs) >= 0.0) & (point(obs) <= 1.0))
            if result.success:  # it met a marker on the way
                break
        else:
            assert point(obs)[0] == 0.0
            pinned += 1
    assert pinned > 0


@pytest.mark.parametrize("radius", [SUCCESS_RADIUS * 0.95, SUCCESS_RADIUS * 1.05])
def test_success_exactly_when_within_success_radius(radius: float) -> None:
    """Drive the point to a spot `radius` from the target, approached from the start's side (never nearer)."""

    def toward_spot(obs: Observation) -> Any:
        target = markers(obs)[COLOR_NAMES.index(named_color(obs))]
        start = point(agent.seen[0])
        spot = target + radius * (start - target) / np.linalg.norm(start - target)
        return np.clip((spot - point(obs)) / STEP_SIZE, -1.0, 1.0).astype(np.float32)

    agent = Scripted(toward_spot)
    for index in range(3):
        outcome = run(PointReach(), agent, reach_task(index))
        distances = [result.info["distance"] for result in agent.results]
        for result, distance in zip(agent.results, distances, strict=True):
            target = markers(result.obs)[COLOR_NAMES.index(named_color(result.obs))]
            assert distance == pytest.approx(np.linalg.norm(point(result.obs) - target), abs=1e-5)
            assert result.success is (distance < SUCCESS_RADIUS)
        assert min(distances) >= radius - 1e-4
        if radius < SUCCESS_RADIUS:
            assert outcome.status is EpisodeStatus.SUCCESS
            assert distances[-1] < SUCCESS_RADIUS <= min(distances[:-1])
        else:
            assert (outcome.status, outcome.reason) == (EpisodeStatus.FAILURE, "max_steps")
            assert distances[-1] == pytest.approx(radius, abs=1e-4)  # it got there, and stayed


def test_render_adds_a_top_camera_that_shows_each_marker_where_the_state_puts_it() -> None:
    assert "images" not in PointReach().reset(reach_task(0))
    size = 64
    env = PointReach(render=True, image_size=size)
    for index in range(3):
        obs = env.reset(reach_task(index))
        frame = obs["images"]["top"]
        assert frame.dtype == np.uint8
        assert frame.shape == (size, size, 3)
        for (x, y), rgb in zip(markers(obs), COLORS.values(), strict=True):
            rows, cols = np.nonzero(np.all(frame == rgb, axis=-1))
            assert len(rows) > 0, f"no pixel of colour {rgb}"
            assert abs(cols.mean() - x * (size - 1)) <= 2.0
            assert abs(rows.mean() - y * (size - 1)) <= 2.0


def test_a_color_param_picks_the_blue_marker_and_the_expert_reaches_it() -> None:
    env = PointReach()
    for index in range(8):
        obs = env.reset(reach_task(index, color="blue"))
        assert obs["instruction"] == "reach the blue marker"
        np.testing.assert_allclose(env.privileged_state("target"), markers(obs)[2], atol=1e-6)

    class WatchedExpert(PointReachExpert):
        def on_step(self, result: StepResult) -> None:
            self.last = result.obs

    expert = WatchedExpert()
    outcome = run(PointReach(), expert, reach_task(0, color="blue"))
    assert outcome.status is EpisodeStatus.SUCCESS
    assert np.linalg.norm(point(expert.last) - markers(expert.last)[2]) < SUCCESS_RADIUS


def test_privileged_target_is_the_named_marker_and_other_names_raise_key_error() -> None:
    reads: list[tuple[Observation, Any, str]] = []

    def read(obs: Observation) -> Any:
        try:
            agent.ctx.privileged("velocity")
            refused = ""
        except KeyError as exc:
            refused = str(exc)
        reads.append((obs, agent.ctx.privileged("target"), refused))
        return np.zeros(2, np.float32)

    agent = Scripted(read, AgentRequirements(privileged_state=True))
    for index in range(4):
        run(PointReach(), agent, reach_task(index), max_steps=2)
    assert len(reads) == 8
    for obs, target, refused in reads:
        np.testing.assert_allclose(target, markers(obs)[COLOR_NAMES.index(named_color(obs))], atol=1e-6)
        assert "velocity" in refused
    with pytest.raises(KeyError, match="target"):
        PointReach().privileged_state("goal")


# -- GridGoal ---------------------------------------------------------------------------------------------------------


def cell_of(grid: np.ndarray[Any, Any], kind: int) -> tuple[int, int]:
    (cell,) = np.argwhere(grid == kind)
    return int(cell[0]), int(cell[1])


def bfs_distance(grid: np.ndarray[Any, Any], start: tuple[int, int], goal: tuple[int, int]) -> int | None:
    """Moves on a shortest path through non-wall cells, by plain breadth-first search over the observed grid."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return distance[goal]
        for nxt in ((r - 1, c), (r, c + 1), (r + 1, c), (r, c - 1)):
            if grid[nxt] != WALL and nxt not in distance:
                distance[nxt] = distance[(r, c)] + 1
                queue.append(nxt)
    return None


def shortest_moves(grid: np.ndarray[Any, Any], start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    """The actions of one shortest path: from each cell, a move to a neighbour one step closer to the goal."""
    moves, cell = [], start
    while cell != goal:
        here = bfs_distance(grid, cell, goal)
        assert here is not None
        for action, (dr, dc) in enumerate(MOVES):
            nxt = (cell[0] + dr, cell[1] + dc)
            if grid[nxt] != WALL and bfs_distance(grid, nxt, goal) == here - 1:
                moves.append(action)
                cell = nxt
                break
    return moves


def test_the_grid_has_one_agent_and_one_goal_and_the_goal_is_reachable() -> None:
    env = GridGoal()
    for index in range(25):
        obs = env.reset(grid_task(index))
        grid = obs["grid"]
        assert np.all(grid[0, :] == WALL) and np.all(grid[-1, :] == WALL)
        assert np.all(grid[:, 0] == WALL) and np.all(grid[:, -1] == WALL)
        start, goal = cell_of(grid, AGENT), cell_of(grid, GOAL)
        assert start == tuple(obs["state"])
        assert start != goal
        distance = bfs_distance(grid, start, goal)
        assert distance is not None and distance >= 1


def test_walls_block_moves_and_floor_lets_them_through() -> None:
    env = GridGoal()
    blocked = moved = 0
    for index in range(6):
        for action, (dr, dc) in enumerate(MOVES):
            obs = env.reset(grid_task(index))
            start = cell_of(obs["grid"], AGENT)
            ahead = (start[0] + dr, start[1] + dc)
            after = tuple(env.step(action).obs["state"])
            if obs["grid"][ahead] == WALL:
                assert after == start
                blocked += 1
            else:
                assert after == ahead
                moved += 1
    assert blocked > 0 and moved > 0


def test_the_experts_plan_is_a_shortest_path_and_reaches_the_goal() -> None:
    for index in range(8):
        task = grid_task(index)
        obs = GridGoal().reset(task)
        shortest = bfs_distance(obs["grid"], cell_of(obs["grid"], AGENT), cell_of(obs["grid"], GOAL))
        bus, recorder = EventBus(), MemoryRecorder()
        bus.subscribe(recorder)
        outcome = run(GridGoal(), GridGoalExpert(), task, bus=bus)
        (decision,) = recorder.of("agent.decision")
        assert decision.content["plan_length"] == shortest
        assert (outcome.status, outcome.steps) == (EpisodeStatus.SUCCESS, shortest)


def test_the_instruction_names_the_goals_row_and_column() -> None:
    env = GridGoal(size=12, walls=20)
    for index in range(10):
        obs = env.reset(grid_task(index))
        found = re.fullmatch(r"go to the goal at row (\d+), column (\d+)", obs["instruction"])
        assert found is not None, obs["instruction"]
        named = (int(found.group(1)), int(found.group(2)))
        assert named == cell_of(obs["grid"], GOAL) == env.privileged_state("goal")


def test_stepping_after_the_goal_is_reached_raises_until_reset() -> None:
    env = GridGoal()
    task = grid_task(3)
    obs = env.reset(task)
    moves = shortest_moves(obs["grid"], cell_of(obs["grid"], AGENT), cell_of(obs["grid"], GOAL))
    results = [env.step(action) for action in moves]
    assert [result.success for result in results] == [False] * (len(moves) - 1) + [True]
    assert results[-1].terminated and results[-1].reward == 1.0
    with pytest.raises(RuntimeError, match="reset first"):
        env.step(moves[0])
    env.reset(task)
    assert env.step(moves[0]).success is (len(moves) == 1)


# -- NullEnv ----------------------------------------------------------------------------------------------------------


def test_null_env_succeeds_exactly_at_step_success_at_in_every_episode() -> None:
    env = NullEnv(success_at=5)
    env.reset(TaskInstance("null", "t"))
    assert [env.step(np.zeros(7, np.float32)).success for _ in range(7)] == [False] * 4 + [True, False, False]

    agent = Scripted(lambda obs: np.zeros(7, np.float32))
    runner = Kernel(NullEnv(success_at=5), agent)
    try:
        outcomes = [runner.run(TaskInstance("null", "t", index=i)) for i in range(2)]
    finally:
        runner.close()
    assert [(o.status, o.steps) for o in outcomes] == [(EpisodeStatus.SUCCESS, 5)] * 2

    outcome = run(NullEnv(max_episode_steps=20), agent, TaskInstance("null", "t"))
    assert (outcome.status, outcome.reason, outcome.steps) == (EpisodeStatus.FAILURE, "max_steps", 20)
