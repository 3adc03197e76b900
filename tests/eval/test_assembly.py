"""One assembler for a run's worker and an interactive session (`hylo.eval.assembly`): which env renders camera frames
(what the graph's nodes need, everywhere; a live view where the env steps), the panel each gets, and a failure that
closes what was built."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hylo.agents.registry import make_agent
from hylo.core import EventBus
from hylo.core.environment import Environment
from hylo.envs.babyai import BabyAIBenchmark
from hylo.envs.benchmark import Benchmark
from hylo.envs.grid import GridGoal
from hylo.eval.assembly import EpisodeParts, PanelUnavailable, Use, assemble
from hylo.graph import agent_graph, compile_graph
from hylo.graph.executor import GraphRunner
from hylo.panels import BenchmarkPanel, RemoteEnvPanelProxy

BABYAI = BabyAIBenchmark()
START = BABYAI.task_instance("default", "GoToLocal", 0)


def plan(agent: str, args: dict[str, Any] | None = None, *, apart: bool = False) -> Any:
    graph = agent_graph("babyai", agent, args, name="assembled", server=("babyai",) if apart else (), step_budget=3)
    return compile_graph(graph)


def launched_render(parts: EpisodeParts) -> bool:
    """Whether the env nodeset's subprocess is asked to render camera frames."""
    runner = parts.executor
    assert isinstance(runner, GraphRunner) and runner.remote is not None
    return bool(runner.remote._launch.render_images)  # type: ignore[attr-defined]


@pytest.fixture
def built() -> Iterator[list[EpisodeParts]]:
    made: list[EpisodeParts] = []
    yield made
    for parts in made:
        parts.close()


@pytest.mark.parametrize("use", [Use.BATCH, Use.INTERACTIVE])
def test_an_env_apart_leaves_the_local_env_rendering_what_the_local_agents_need(
    use: Use, tmp_path: Path, built: list[EpisodeParts]
) -> None:
    """The worker's env gives the spec its agents are checked against and given: an agent that needs images beside a
    server-mode env binds, and is handed the images its spec declares."""
    out = tmp_path / "seen.jsonl"
    parts = assemble(BABYAI, use, worker="w7", bus=EventBus(), max_steps=3,
                     plan=plan("contract_agents:NeedsImages", {"out": str(out)}, apart=True), start=START)  # fmt: skip
    built.append(parts)
    assert parts.env.render_images and "images" in parts.env.spec.observation_space.spaces
    assert launched_render(parts)  # the subprocess renders what the nodes need, for its own env
    assert isinstance(parts.panel, RemoteEnvPanelProxy) and parts.remote_panel
    outcome = parts.executor.run(START)
    assert outcome.steps == 3
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert seen and all("images" in act["keys"] and act["keys"] == act["declared"] for act in seen)


def test_a_live_view_renders_where_the_env_steps(built: list[EpisodeParts]) -> None:
    local = assemble(BABYAI, Use.INTERACTIVE, worker="s1", bus=EventBus(), max_steps=3, plan=plan("random"),
                     render=True)  # fmt: skip
    built.append(local)
    assert local.env.render_images and local.panel is None  # the session's panel (the server's) places its episodes
    apart = assemble(BABYAI, Use.INTERACTIVE, worker="s2", bus=EventBus(), max_steps=3,
                     plan=plan("random", apart=True), render=True)  # fmt: skip
    built.append(apart)
    assert not apart.env.render_images and launched_render(apart)
    assert isinstance(apart.panel, RemoteEnvPanelProxy) and apart.panel.name == "env_babyai#2"


def test_a_run_records_its_own_env_only(built: list[EpisodeParts]) -> None:
    """A run's recorded rollouts keep its env's cameras; a subprocess is asked for nothing more than its nodes need."""
    blind = {"out": "/dev/null"}
    local = assemble(BABYAI, Use.BATCH, worker="w1", bus=EventBus(), max_steps=3,
                     plan=plan("contract_agents:StateOnly", blind), render=True, start=START)  # fmt: skip
    built.append(local)
    assert local.env.render_images
    apart = assemble(BABYAI, Use.BATCH, worker="w3", bus=EventBus(), max_steps=3,
                     plan=plan("contract_agents:StateOnly", blind, apart=True), render=True, start=START)  # fmt: skip
    built.append(apart)
    assert not apart.env.render_images and not launched_render(apart)


def test_a_batch_owner_gets_its_own_panel_where_its_plan_starts(built: list[EpisodeParts]) -> None:
    start = BABYAI.task_instance("default", "GoToObj", 0)
    agent = make_agent("random", {}, BABYAI)
    parts = assemble(BABYAI, Use.BATCH, worker="w0", bus=EventBus(), max_steps=3, agent=agent, start=start)
    built.append(parts)
    assert isinstance(parts.panel, BenchmarkPanel) and not parts.remote_panel
    assert parts.panel.task_instance() == start
    with pytest.raises(ValueError, match="give `start`"):
        assemble(BABYAI, Use.BATCH, worker="w0", bus=EventBus(), max_steps=3, agent=agent)


class Closing(GridGoal):
    closed = 0

    def close(self) -> None:
        Closing.closed += 1


class Grid(Benchmark):
    name = "grid"

    def splits(self) -> list[str]:
        return ["default"]

    def tasks(self, split: str) -> list[str]:
        return ["goal"]

    def make_env(self, *, render_images: bool = False) -> Environment:
        return Closing(size=6, walls=3)

    def default_step_budget(self, task: str) -> int:
        return 5


def test_a_failure_closes_what_was_built() -> None:
    grid = Grid()
    agent = make_agent("random", {}, grid)

    def broken(env: Environment, images: bool) -> Environment:
        raise RuntimeError("no wrapper")

    Closing.closed = 0
    with pytest.raises(RuntimeError, match="no wrapper"):
        assemble(grid, Use.BATCH, worker="w0", bus=EventBus(), max_steps=3, agent=agent, wrap=broken,
                 start=grid.task_instance("default", "goal", 0))  # fmt: skip
    assert Closing.closed == 1
    with pytest.raises(PanelUnavailable, match="'elsewhere'"):  # a start the panel refuses: built, then closed
        assemble(grid, Use.BATCH, worker="w0", bus=EventBus(), max_steps=3, agent=agent,
                 start=grid.task_instance("default", "elsewhere", 0))  # fmt: skip
    assert Closing.closed == 2
