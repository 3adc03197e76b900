"""The built-in demo (`hylo demo --builtin`): the Kernel alone, with experts, random and holding agents, on the
dependency-free built-in environments, and the table of their outcomes."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from hylo.agents import HoldAgent, RandomAgent
from hylo.core import EpisodeOutcome, EpisodeStatus, EventBus, JsonlRecorder, Kernel, TaskInstance
from hylo.core.environment import Environment
from hylo.envs import GridGoal, GridGoalExpert, PointReach, PointReachExpert
from hylo.evallog.report import STATUS_HEADERS
from hylo.evallog.table_fit import add_name_column, add_number_column, compact_table, print_fitting


@dataclass(frozen=True)
class DemoRow:
    env: str
    agent: str
    outcomes: list[EpisodeOutcome]
    seconds: float

    @property
    def counts(self) -> Counter[EpisodeStatus]:
        return Counter(o.status for o in self.outcomes)

    @property
    def success_rate(self) -> float | None:
        scored = [o for o in self.outcomes if o.status.scored]
        return sum(o.success for o in scored) / len(scored) if scored else None

    @property
    def conservative_rate(self) -> float:
        return sum(o.success for o in self.outcomes) / len(self.outcomes)


ENVS: dict[str, Callable[[], Environment]] = {"point_reach": PointReach, "grid_goal": GridGoal}
AGENTS: dict[str, dict[str, Callable[[], Any]]] = {
    "point_reach": {"expert": PointReachExpert, "random": RandomAgent, "hold": HoldAgent},
    "grid_goal": {"expert": GridGoalExpert, "random": RandomAgent, "hold": HoldAgent},
}


def run_demo(episodes: int = 50, seed: int = 0, trace: Path | None = None) -> list[DemoRow]:
    rows: list[DemoRow] = []
    recorder = JsonlRecorder(trace) if trace is not None else None
    try:
        for env_name, make_env in ENVS.items():
            env = make_env()
            for agent_name, make_agent in AGENTS[env_name].items():
                bus = EventBus(run_id=f"demo-{env_name}-{agent_name}")
                if recorder is not None:
                    bus.subscribe(recorder)
                kernel = Kernel(env, make_agent(), bus=bus)
                start = time.perf_counter()
                outcomes = [kernel.run(TaskInstance("builtin", env_name, i, base_seed=seed)) for i in range(episodes)]
                rows.append(DemoRow(env_name, agent_name, outcomes, time.perf_counter() - start))
            env.close()
    finally:
        if recorder is not None:
            recorder.close()
    return rows


_FULL = ("n", *[s.value for s in EpisodeStatus], "rate", "conservative", "steps", "ep/s")
_SHORT = ("n", *[STATUS_HEADERS[s.value] for s in EpisodeStatus], "rate", "cons.", "steps", "ep/s")
NOTE = "rate = successes / scored episodes (error and infra_invalid abstain); conservative = successes / all episodes."
SHORT_NOTE = (
    "infra = infra_invalid, safety = safety_abort; rate = successes / scored episodes (error and infra_invalid "
    "abstain); cons. = conservative rate = successes / all episodes."
)


def _cells(row: DemoRow) -> list[str]:
    counts = row.counts
    rate = row.success_rate
    return [
        str(len(row.outcomes)),
        *[str(counts.get(s, 0)) for s in EpisodeStatus],
        "—" if rate is None else f"{rate:.2f}",
        f"{row.conservative_rate:.2f}",
        f"{sum(o.steps for o in row.outcomes) / len(row.outcomes):.1f}",
        f"{len(row.outcomes) / row.seconds:.0f}",
    ]


def _table(rows: list[DemoRow], headers: tuple[str, ...], columns: slice, title: str | None) -> Table:
    table = compact_table(title)
    add_name_column(table, "env", wrap=False)
    add_name_column(table, "agent", wrap=False)
    for header in headers[columns]:
        add_number_column(table, header)
    for row in rows:
        table.add_row(row.env, row.agent, *_cells(row)[columns])
    return table


def render(rows: list[DemoRow], console: Console) -> None:
    """The table of every (env, agent): with full headers, short ones and a legend, or split in two."""
    title = "hylo demo: Kernel on the built-in environments"
    every = slice(None)
    counts, figures = slice(0, 1 + len(EpisodeStatus)), slice(1 + len(EpisodeStatus), None)
    short = Text(SHORT_NOTE, style="dim")
    layouts: list[list[RenderableType]] = [
        [_table(rows, _FULL, every, title), Text(NOTE)],
        [_table(rows, _SHORT, every, title), short],
        [_table(rows, _SHORT, counts, title), _table(rows, _SHORT, figures, None), short],
    ]
    print_fitting(console, layouts)
