"""The sections of a report about one run: what identifies it, its per-task table and chart, its suite figures (a
run of several tasks), its status counts, why its episodes did not succeed, and its episode list with a filter; and
the summary table of several runs.

Every figure comes from the functions `hylo runs show` prints with (`summarize_by_task`, `summarize`,
`suite_figures`, `reason_groups`), so the page and the terminal never disagree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from hylo.core.status import EpisodeStatus
from hylo.envs.gym_ids import short_episode_id
from hylo.evallog.reasons import reason_groups
from hylo.evallog.report import (
    NO_SIGNAL,
    STATUS_HEADERS,
    SUMMARY_NOTE,
    seeds_note,
    suite_lines,
    summary_rows,
    summary_texts,
    timing_note,
)
from hylo.evallog.report import interval_text as interval
from hylo.evallog.report import rate_text as rate
from hylo.evallog.report_page import cell, definitions, esc, note, row, select, table
from hylo.evallog.rows import EpisodeRow, RunInfo, records
from hylo.evallog.run_list import abstentions, agent_text, benchmark_text
from hylo.stats.success import Summary, seed_clusters, summarize, summarize_by_task
from hylo.stats.suite import SuiteFigures, suite_figures


@dataclass(frozen=True)
class ReportRun:
    """One run as a report shows it: its row, its final episodes (in `EvalLog.final_episodes` order) and the lines
    that say what code it ran (`hylo runs show`'s, made where the code identity is read)."""

    info: RunInfo
    rows: Sequence[EpisodeRow]
    code: Sequence[str] = ()

    def per_task(self) -> dict[str, Summary]:
        return summarize_by_task(records(self.rows))

    def overall(self) -> Summary:
        return summarize(records(self.rows))

    @cached_property
    def suite(self) -> SuiteFigures:
        """The run's suite figures, as `hylo runs show --json` gives them (`suite`); bootstrapped once per report."""
        return suite_figures(records(self.rows))


@dataclass
class Anchors:
    """The ids of the page's episode rows and media, so that a flip, a reason or a row links to another: run `i`'s
    `j`-th episode is `r{i}-e{j}`, its medium `r{i}-m{j}`. Episodes are known by their id as `hylo compare` pairs
    them (a gym episode's long id by its short one)."""

    rows: dict[tuple[int, str], str] = field(default_factory=dict)
    media: dict[tuple[int, str], str] = field(default_factory=dict)
    positions: dict[tuple[int, str], int] = field(default_factory=dict)
    """(run, episode id as logged) → the episode's place in its run's episodes."""

    def add_run(self, i: int, rows: Sequence[EpisodeRow]) -> None:
        for j, episode in enumerate(rows):
            self.rows[(i, short_episode_id(episode.episode_id, episode.task))] = f"r{i}-e{j}"
            self.positions[(i, episode.episode_id)] = j

    def add_medium(self, i: int, episode: EpisodeRow) -> None:
        """Run `i`'s `episode` has a medium embedded."""
        j = self.positions[(i, episode.episode_id)]
        self.media[(i, short_episode_id(episode.episode_id, episode.task))] = f"r{i}-m{j}"

    def row_of(self, i: int, episode_id: str, task: str) -> str | None:
        return self.rows.get((i, short_episode_id(episode_id, task)))

    def medium_of(self, i: int, episode_id: str, task: str) -> str | None:
        return self.media.get((i, short_episode_id(episode_id, task)))


def status_cell(status: EpisodeStatus | str) -> str:
    value = EpisodeStatus(status).value
    return cell(value, css=f"status-{value}")


# -- identity ------------------------------------------------------------------------------------------------------


def identity(run: ReportRun) -> str:
    """What identifies the run: benchmark, agent and its arguments, status, digests, code, timing, versions, date."""
    info = run.info
    status = ", ".join([info.status.value, *abstentions(info)])
    items = [
        ("benchmark", esc(benchmark_text(info))),
        ("agent", f"<code>{esc(agent_text(info))}</code>"),
        ("status", f"{esc(status)} · {info.n_done}/{info.n_planned} episodes"),
        ("spec digest", f"<code>{esc(info.digest)}</code>"),
        ("code", f"<pre>{esc(chr(10).join(run.code) or 'not recorded')}</pre>"),
        ("timing", esc(timing_note(info.spec))),
        ("seed", esc(_seeds(info))),
        ("versions", esc(", ".join(f"{k} {v}" for k, v in info.versions.items() if v is not None) or "—")),
        ("git commit", f"<code>{esc(info.git_commit or '—')}</code>"),
        ("created", esc(_created(info.created_at))),
    ]
    if info.message:
        items.append(("message", esc(info.message)))
    return definitions(items)


def _seeds(info: RunInfo) -> str:
    seeds = info.spec.get("seeds")
    if isinstance(seeds, list) and seeds:
        return ", ".join(map(str, seeds))
    return str(info.spec.get("seed", "—"))


def _created(stamp: float) -> str:
    """A time as local time with its offset, e.g. `2025-01-31 14:05:09 +0100`."""
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(stamp))


# -- the per-task table and chart ------------------------------------------------------------------------------------


SUMMARY_HEADERS = (
    "task",
    "n",
    *(STATUS_HEADERS[s.value] for s in EpisodeStatus),
    "success rate",
    "95% CI",
    "conservative",
    "return",
    "mean steps",
)
"""The per-task table's columns, as `hylo runs show` names them."""


def summary_cells(s: Summary) -> list[str]:
    """A summary's cells after its name: n, each status's count, the rates and interval, return and mean steps."""
    return [cell(text, num=True) for text in summary_texts(s)]


def task_table(i: int, run: ReportRun) -> str:
    """The per-task table: n, status counts, success rate with its Wilson 95% interval, conservative rate, return,
    mean steps; the overall row last."""
    rows = summary_rows(run.per_task(), run.overall())
    body = [
        row(
            [cell(task), *summary_cells(s)],
            css="overall" if task == "overall" and len(rows) > 1 else None,
            attrs=f' data-task="{esc(task)}"',
        )
        for task, s in rows
    ]
    return table(SUMMARY_HEADERS, body, table_id=f"tasks-{i}", css="tasks") + note(SUMMARY_NOTE)


_LABEL_W, _PLOT_W, _FIGURE_W, _ROW_H = 230, 520, 250, 24


def chart(run: ReportRun) -> str:
    """Each task's success rate (a dot) with its Wilson 95% interval (a bar) on a 0-1 scale, as inline SVG; the
    overall row last, in bold."""
    rows = [(task, s) for task, s in summary_rows(run.per_task(), run.overall())]
    if not rows:
        return note("no finished episode yet: nothing to chart")
    height = 28 + _ROW_H * len(rows)
    width = _LABEL_W + _PLOT_W + _FIGURE_W
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="success rate per task with 95% intervals">'
    ]
    parts += _axis(height)
    for k, (task, s) in enumerate(rows):
        parts.append(_chart_row(task, s, 20 + _ROW_H * k + _ROW_H // 2, bold=task == "overall" and len(rows) > 1))
    parts.append("</svg>")
    return "".join(parts)


def _x(value: float) -> float:
    return _LABEL_W + value * _PLOT_W


def _axis(height: int) -> list[str]:
    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = _x(tick)
        parts.append(f'<line x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{height - 4}" stroke="#d6dbe1"/>')
        parts.append(f'<text x="{x:.1f}" y="11" text-anchor="middle" fill="#5b6672">{tick:g}</text>')
    return parts


def _chart_row(task: str, s: Summary, y: int, *, bold: bool) -> str:
    weight = ' font-weight="600"' if bold else ""
    label = task if len(task) <= 32 else task[:31] + "…"
    parts = [
        f"<g><title>{esc(task)}: {esc(_figure(s))}</title>",
        f'<text x="{_LABEL_W - 8}" y="{y + 4}" text-anchor="end"{weight}>{esc(label)}</text>',
    ]
    if s.success_rate is not None and s.success_ci is not None and s.success_signal:
        low, high = s.success_ci
        parts.append(
            f'<line x1="{_x(low):.1f}" y1="{y}" x2="{_x(high):.1f}" y2="{y}" stroke="#2f5fb3" '
            f'stroke-width="5" stroke-linecap="round" opacity="0.35"/>'
        )
        parts.append(f'<circle cx="{_x(s.success_rate):.1f}" cy="{y}" r="5" fill="#2f5fb3"/>')
    parts.append(f'<text x="{_LABEL_W + _PLOT_W + 10}" y="{y + 4}"{weight}>{esc(_figure(s))}</text></g>')
    return "".join(parts)


def _figure(s: Summary) -> str:
    if not s.success_signal:
        return NO_SIGNAL
    if s.success_rate is None:
        return f"nothing scored (n {s.n})"
    return f"{s.successes}/{s.scored} = {rate(s.success_rate)} {interval(s.success_ci)}"


# -- the suite figures ----------------------------------------------------------------------------------------------


def suite_block(i: int, run: ReportRun) -> str:
    """A run of several tasks summed up over them, as `hylo runs show` does: the mean over tasks and the IQM with
    their stratified bootstrap intervals, the tasks and seeds counted, how the figures were had and the tasks left
    out (or why there are no figures). Nothing for a run of one task: its row is its figure."""
    f = run.suite
    lines = suite_lines(f)
    if not lines:
        return ""
    counts = definitions([("tasks", str(f.tasks)), ("seeds", str(f.seeds))])
    if f.mean is None:
        return "<h3>suite</h3>" + counts + "".join(note(line.strip()) for line in lines)
    body = [
        row([cell(name), cell(rate(value), num=True), cell(interval(ci), num=True)], attrs=f' data-figure="{key}"')
        for key, name, value, ci in (("mean", "mean over tasks", f.mean, f.mean_ci), ("iqm", "IQM", f.iqm, f.iqm_ci))
    ]
    confidence = f"{f.bootstrap.confidence:.0%}"
    figures = table(("figure", "value", f"{confidence} interval"), body, table_id=f"suite-{i}")
    return "<h3>suite</h3>" + figures + counts + "".join(note(line.strip()) for line in lines[1:])


# -- status counts and reasons ---------------------------------------------------------------------------------------


def status_counts(run: ReportRun) -> str:
    """Every status's count over the run (zeros too: abstentions were looked for) and its share."""
    overall = run.overall()
    spans = []
    for status in EpisodeStatus:
        count = overall.status_counts.get(status.value, 0)
        share = f" ({count / overall.n:.0%})" if overall.n else ""
        spans.append(f'<span class="status-{status.value}">{esc(status.value)} <b>{count}</b>{esc(share)}</span>')
    clusters = seed_clusters(records(run.rows))
    extra = note(seeds_note(clusters)) if clusters is not None else ""
    return f'<p class="counts">{"".join(spans)}</p>{extra}'


def reasons(i: int, run: ReportRun, anchors: Anchors) -> str:
    """Why the episodes that did not succeed ended, grouped by reason (`hylo runs show`'s groups), each with its
    count, its first episode (a link to its row) and the flag that changes the limit that ended it."""
    groups = reason_groups(run.rows)
    if not groups:
        return note("every episode succeeded." if run.rows else "no finished episode yet.")
    tasks = {episode.episode_id: episode.task for episode in run.rows}
    body = []
    for group in groups:
        target = anchors.row_of(i, group.first, tasks.get(group.first, ""))
        first = f'<a href="#{target}">{esc(group.first)}</a>' if target else esc(group.first)
        body.append(
            row(
                [
                    status_cell(group.status),
                    cell(group.count, num=True),
                    cell(group.reason),
                    cell(first, css="id", raw=True),
                    cell(group.hint or "", css="dim"),
                ]
            )
        )
    return table(("status", "episodes", "reason", "first episode", "what changes it"), body, numeric_from=1)


# -- the episode list ----------------------------------------------------------------------------------------------


def episodes(i: int, run: ReportRun, anchors: Anchors, media_notes: Mapping[str, str]) -> str:
    """Every final episode (id, task, seed, status, reason, steps, return, its medium), filterable by task and
    status; `media_notes` says, per episode id, why one was not embedded."""
    table_id = f"episodes-{i}"
    tasks = list(dict.fromkeys(episode.task for episode in run.rows))
    statuses = [s.value for s in EpisodeStatus if any(e.status is s for e in run.rows)]
    filters = (
        f'<div class="filters" data-table="{table_id}">{select("task", "task", tasks)}'
        f'{select("status", "status", statuses)}<span class="shown dim"></span></div>'
    )
    body = [_episode_row(i, j, episode, anchors, media_notes) for j, episode in enumerate(run.rows)]
    headers = ("episode", "task", "seed", "status", "reason", "steps", "return", "clip")
    listing = table(headers, body, numeric_from=len(headers), numeric=(2, 5, 6), table_id=table_id)
    return f'{filters}<div class="episodes">{listing}</div>'


def _episode_row(i: int, j: int, episode: EpisodeRow, anchors: Anchors, media_notes: Mapping[str, str]) -> str:
    medium = anchors.medium_of(i, episode.episode_id, episode.task)
    media = f'<a href="#{medium}">clip</a>' if medium is not None else esc(media_notes.get(episode.episode_id, ""))
    episode_return = episode.record().episode_return
    cells = [
        cell(episode.episode_id, css="id"),
        cell(episode.task),
        cell(episode.seed, num=True),
        status_cell(episode.status),
        cell(episode.reason),
        cell(episode.steps, num=True),
        cell("—" if episode_return is None else f"{episode_return:.3g}", num=True),
        cell(media, raw=True, css="dim" if medium is None else None),
    ]
    attrs = f' id="r{i}-e{j}" data-task="{esc(episode.task)}" data-status="{esc(episode.status.value)}"'
    return row(cells, attrs=attrs)


# -- several runs ----------------------------------------------------------------------------------------------------


def summary_table(runs: Sequence[ReportRun]) -> str:
    """One row per run, unpaired: benchmark, agent, the overall counts, rates, return and steps; and, when a run has
    several tasks, its mean over tasks with its interval (its suite block's)."""
    suites = any(run.suite.mean is not None for run in runs)
    body = [
        row(
            [
                cell(f'<a href="#run-{i}">{esc(run.info.run_id)}</a>', css="id", raw=True),
                cell(f"{benchmark_text(run.info)} · {agent_text(run.info)}"),
                *summary_cells(run.overall()),
                *(_suite_cells(run.suite) if suites else []),
            ]
        )
        for i, run in enumerate(runs)
    ]
    headers = ("run", "benchmark · agent", *SUMMARY_HEADERS[1:], *(SUITE_HEADERS if suites else ()))
    notes = [f"each run on its own episodes (unpaired): {SUMMARY_NOTE}"]
    if suites:
        notes.append(SUITE_NOTE)
    return table(headers, body, numeric_from=2, table_id="summary") + "".join(note(n) for n in notes)


SUITE_HEADERS = ("mean over tasks", "its interval")
SUITE_NOTE = (
    "mean over tasks: each task weighs the same, whatever its episodes, with its stratified bootstrap interval (a "
    "run's suite block says more; — for a run of one task)"
)


def _suite_cells(f: SuiteFigures) -> list[str]:
    """A run's mean over tasks and its interval (dashes for a run without suite figures)."""
    return [cell(rate(f.mean), num=True), cell(interval(f.mean_ci), num=True)]


def spec_json(info: RunInfo) -> str:
    """The run's spec as indented JSON, for the reader who wants every option (its code identity cut to its
    digest: the identity above says what it holds)."""
    spec = dict(info.spec)
    code = spec.get("code")
    if isinstance(code, dict):
        spec["code"] = {"digest": code.get("digest")}
    text = esc(json.dumps(spec, indent=2, sort_keys=True))
    return f"<details><summary>the run's spec</summary><pre>{text}</pre></details>"
