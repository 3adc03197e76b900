"""The runs of a log dir as `hylo runs list` shows them: a table with a header, each run's success rate with its
95% interval, its agent with the agent's arguments (two runs that differ only in `-A gain=` differ there), its date,
and a status that says when most of its episodes abstained: `complete, 10/10 error` in red, never a plain green
`complete`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import RunHealth, RunInfo
from hylo.evallog.run_status import RunStatus
from hylo.evallog.table_fit import add_name_column, add_number_column, compact_table, print_fitting

_PLAIN = re.compile(r"[\w./:@+-]+")


def argument_text(value: Any) -> str:
    """An agent argument's value as `-A` takes it: a plain word bare, anything else as compact JSON."""
    if isinstance(value, str) and _PLAIN.fullmatch(value):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def agent_text(info: RunInfo) -> str:
    """The run's agent and its arguments, e.g. `myagents:ReachP gain=10`."""
    return " ".join([info.agent, *(f"{key}={argument_text(value)}" for key, value in sorted(info.agent_args.items()))])


def benchmark_text(info: RunInfo) -> str:
    return f"{info.benchmark}/{info.split}" if info.split else info.benchmark


def abstentions(info: RunInfo) -> list[str]:
    """The run's abstaining episodes by status, e.g. `['10/10 error']` (none: empty)."""
    n = sum(info.status_counts.values())
    return [
        f"{info.status_counts[status.value]}/{n} {status.value}"
        for status in EpisodeStatus
        if not status.scored and info.status_counts.get(status.value)
    ]


_STATUS_STYLES = {RunStatus.COMPLETE: "green", RunStatus.RUNNING: "cyan", RunStatus.ABORTED: "red"}
_HEALTH_STYLES = {RunHealth.SOME_ERRORS: "yellow", RunHealth.MOSTLY_ERRORS: "red", RunHealth.ALL_ERRORS: "red"}


def status_style(info: RunInfo) -> str:
    """Green only for a complete run none of whose episodes abstained; red when half or more did."""
    health = info.health
    if health in (RunHealth.MOSTLY_ERRORS, RunHealth.ALL_ERRORS):
        return "red"
    style = _STATUS_STYLES.get(info.status, "yellow")
    return _HEALTH_STYLES[health] if health is RunHealth.SOME_ERRORS and style == "green" else style


def status_text(info: RunInfo, separator: str = ", ") -> Text:
    """The run's status and its abstentions, e.g. `complete, 10/10 error`, styled by `status_style`."""
    return Text(separator.join([info.status.value, *abstentions(info)]), style=status_style(info))


def _rate(info: RunInfo, separator: str = " ") -> str:
    ci = info.success_ci
    if info.success_rate is None or ci is None:
        return "—"
    return f"{info.success_rate:.3f}{separator}[{ci[0]:.3f}, {ci[1]:.3f}]"


def _created(info: RunInfo, separator: str = " ") -> str:
    return time.strftime(f"%Y-%m-%d{separator}%H:%M", time.localtime(info.created_at))


def _table(runs: Sequence[RunInfo], *, stacked: int) -> Table:
    """The runs as a table; `stacked` 0 gives each figure a column of its own on one line, 1 puts the benchmark and
    the agent in one column and the status on lines, 2 also puts them under the run id and the rate and date on two
    lines each."""
    table = compact_table()
    ids = max(len(info.run_id) for info in runs)
    add_name_column(table, "run", wrap=stacked == 2, min_width=ids)  # a run id is copied: it never breaks
    add_name_column(table, "status", wrap=False)
    add_number_column(table, "done")
    add_number_column(table, "success (95% CI)" if stacked < 2 else "success\n(95% CI)")
    if stacked == 0:
        add_name_column(table, "benchmark")
        add_name_column(table, "agent")
    elif stacked == 1:
        add_name_column(table, "benchmark · agent")
    add_name_column(table, "created", wrap=False)
    for info in runs:
        done = f"{info.n_done}/{info.n_planned}"
        where = f"{benchmark_text(info)} · {agent_text(info)}"
        if stacked == 0:
            table.add_row(info.run_id, status_text(info), done, _rate(info), benchmark_text(info), agent_text(info),
                          _created(info))  # fmt: skip
        elif stacked == 1:
            table.add_row(info.run_id, status_text(info, "\n"), done, _rate(info), where, _created(info))
        else:
            run = Text(info.run_id)
            run.append(f"\n{where}", style="dim")
            table.add_row(run, status_text(info, "\n"), done, _rate(info, "\n"), _created(info, "\n"))
    return table


def _blocks(runs: Sequence[RunInfo]) -> Table:
    """Each run in three lines that wrap at any width, under a header that names what each line holds."""
    grid = Table.grid()
    grid.add_column(overflow="fold")
    grid.add_row(Text("run\n  status · done · success (95% CI) · created\n  benchmark · agent", style="bold"))
    grid.add_row(Rule(style="dim"))
    for info in runs:
        lines = Text(info.run_id)
        lines.append("\n  ")
        lines.append_text(status_text(info))
        lines.append(f" · {info.n_done}/{info.n_planned} · {_rate(info)} · {_created(info)}")
        lines.append(f"\n  {benchmark_text(info)} · {agent_text(info)}", style="dim")
        grid.add_row(lines)
    return grid


def runs_layouts(runs: Sequence[RunInfo]) -> list[list[RenderableType]]:
    """The run list's layouts, widest first (`hylo.evallog.table_fit`)."""
    layouts: list[list[RenderableType]] = [[_table(runs, stacked=level)] for level in (0, 1, 2)]
    return [*layouts, [_blocks(runs)]]


def print_runs(console: Console, runs: Sequence[RunInfo]) -> None:
    print_fitting(console, runs_layouts(runs))


def listed(info: RunInfo) -> dict[str, Any]:
    """A run as `hylo runs list --json` lists it: what identifies it (its agent's arguments too), its progress, the
    tally of its final episodes and what follows from it (`RunInfo.to_json` has all of them, and the rest)."""
    full = info.to_json()
    return {key: full[key] for key in LISTED} | {"agent_args": info.agent_args}


LISTED = (
    *("run_id", "status", "n_done", "n_planned", "benchmark", "split", "agent", "digest", "created_at", "updated_at"),
    *("status_counts", "scored", "successes", "abstained", "success_rate", "success_ci", "health"),
)
"""The fields of `RunInfo.to_json` that `hylo runs list --json` gives (with `agent_args`)."""
