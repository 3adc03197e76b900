"""The paired comparison of two runs in a report, as `hylo compare` computes it (`compare_runs`): per task and
overall the pairs, each side's rate, the difference B − A, McNemar's exact p (per task also Holm-adjusted over the
tasks), and the episodes that flipped, each linked to its rows and clips.

The difference B − A has its 95% interval for paired proportions (Newcombe's square-and-add interval,
`hylo.stats.success.paired_difference_interval`): a fixed-size interval over the pairs the runs have, the
counterpart of McNemar's exact test.

Runs of several tasks add the probability of improvement P(B > A) over the tasks with its stratified bootstrap
interval, as `hylo compare` computes it (`hylo.stats.suite.improvement`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hylo.core.status import EpisodeStatus
from hylo.evallog.report import improvement_lines, no_pairs_message, pairing_note
from hylo.evallog.report import interval_text as interval
from hylo.evallog.report import rate_text as rate
from hylo.evallog.report_page import cell, esc, note, row, table
from hylo.evallog.report_sections import Anchors, ReportRun, status_cell
from hylo.evallog.rows import records
from hylo.stats.success import (
    Comparison,
    Flip,
    NoPairs,
    TaskComparison,
    compare_runs,
    correlation_line,
    paired_difference_interval,
)
from hylo.stats.suite import Improvement, improvement

INTERVAL_NOTE = (
    "B − A's 95% interval: Newcombe's interval for paired proportions over the pairs run (a fixed-size interval, "
    "the counterpart of McNemar's exact test). p (Holm): each task's McNemar p adjusted over the tasks by Holm's "
    "method."
)

_HEADERS = (
    "task",
    "pairs",
    "A rate",
    "B rate",
    "B − A",
    "95% interval",
    "both succeed",
    "only A",
    "only B",
    "neither",
    "p (McNemar)",
    "p (Holm)",
)


def compared(a: ReportRun, b: ReportRun) -> Comparison | str:
    """The runs' paired comparison, or why there is none (no episode in common, an episode of another task)."""
    try:
        return compare_runs(records(a.rows), records(b.rows))
    except NoPairs as exc:
        return no_pairs_message(a.info, b.info, exc)
    except ValueError as exc:
        return str(exc)


def comparison_section(a: ReportRun, b: ReportRun, comparison: Comparison | str, anchors: Anchors) -> str:
    """The paired table (per task, then overall), the notes on what was paired, and the flipped episodes."""
    names = (
        f'<p>A = <a href="#run-0">{esc(a.info.run_id)}</a>, B = <a href="#run-1">{esc(b.info.run_id)}</a>: '
        "paired by episode id</p>"
    )
    if isinstance(comparison, str):
        return names + f"<p><b>not compared:</b> {esc(comparison)}</p>"
    c = comparison
    notes = [correlation_line(c)]
    if c.partial:
        notes.append(pairing_note(a.info, b.info, c))
    if c.abstained:
        notes.append(f"{c.abstained} pairs left out because an episode abstained (error / infra_invalid)")
    paired = paired_table(c) + note(INTERVAL_NOTE) + "".join(note(n) for n in notes)
    return names + paired + improvement_block(improvement(records(a.rows), records(b.rows))) + flips(c, anchors)


def improvement_block(i: Improvement) -> str:
    """The probability of improvement as `hylo compare` gives it: each task's P(B > A), then their mean over the
    tasks with its interval, how it was had and the tasks left out (or why there is none). Nothing for runs of one
    task: the paired difference and McNemar's test are its figures."""
    lines = improvement_lines(i)
    if not lines:
        return ""
    heading = "<h3>probability of improvement P(B &gt; A)</h3>"
    if i.probability is None:
        return heading + "".join(note(line.strip()) for line in lines)
    body = [row([cell(task), cell(rate(p), num=True), cell("—", num=True)]) for task, p in i.per_task.items()]
    overall = [cell(f"over {i.tasks} tasks"), cell(rate(i.probability), num=True), cell(interval(i.ci), num=True)]
    body.append(row(overall, css="overall"))
    confidence = f"{i.bootstrap.confidence:.0%}"
    figures = table(("task", "P(B > A)", f"{confidence} interval"), body, table_id="improvement")
    return heading + figures + "".join(note(line.strip()) for line in lines[1:])


def paired_table(c: Comparison) -> str:
    """Each task's paired figures, then the overall ones (for one task, its row alone is the overall)."""
    body = [_paired_row(task, part, part.p_holm) for task, part in c.per_task.items()]
    if len(c.per_task) != 1:
        body.append(_paired_row("overall", c, None, css="overall"))
    return table(_HEADERS, body, table_id="paired")


def _paired_row(task: str, part: TaskComparison | Comparison, p_holm: float | None, css: str | None = None) -> str:
    low, high = difference_interval(part)
    difference = "—" if part.difference is None else f"{part.difference:+.3f}"
    figures = [
        part.n_pairs,
        rate(part.rate_a),
        rate(part.rate_b),
        difference,
        "—" if not part.n_pairs else f"[{low:+.3f}, {high:+.3f}]",
        part.both_success,
        part.a_only,
        part.b_only,
        part.neither,
        f"{part.p_value:.4g}",
        "—" if p_holm is None else f"{p_holm:.4g}",
    ]
    return row(
        [cell(task), *(cell(figure, num=True) for figure in figures)], css=css, attrs=f' data-task="{esc(task)}"'
    )


def difference_interval(part: TaskComparison | Comparison) -> tuple[float, float]:
    """The 95% interval for B − A over the scored pairs ([−1, 1] without any)."""
    counts = (part.both_success, part.a_only, part.b_only, part.neither)
    if not sum(counts):
        return -1.0, 1.0
    return paired_difference_interval(*counts)


def flips(c: Comparison, anchors: Anchors) -> str:
    """The flipped episodes in two lists, A's successes that B failed and the reverse, each linked to its row and
    clip in both runs' sections."""
    a_won = [flip for flip in c.flips if flip.status_a is EpisodeStatus.SUCCESS]
    b_won = [flip for flip in c.flips if flip.status_b is EpisodeStatus.SUCCESS]
    if not c.flips:
        return "<h3>flipped episodes</h3>" + note("no episode flipped.")
    return (
        f'<h3 id="flips-a">A succeeded, B did not ({len(a_won)})</h3>{_flip_table(a_won, anchors, "flips-a")}'
        f'<h3 id="flips-b">B succeeded, A did not ({len(b_won)})</h3>{_flip_table(b_won, anchors, "flips-b")}'
    )


_FLIP_HEADERS = ("episode", "task", "A", "B", "see")


def _flip_table(shown: Sequence[Flip], anchors: Anchors, table_id: str) -> str:
    if not shown:
        return note("none.")
    body = [
        row(
            [
                cell(flip.episode_id, css="id"),
                cell(flip.task),
                status_cell(flip.status_a),
                status_cell(flip.status_b),
                cell(_links(flip, anchors), raw=True),
            ],
            attrs=f' data-episode="{esc(flip.episode_id)}"',
        )
        for flip in shown
    ]
    return table(_FLIP_HEADERS, body, numeric_from=len(_FLIP_HEADERS), table_id=table_id + "-table")


def _links(flip: Flip, anchors: Anchors) -> str:
    """Links to the flipped episode's rows in A and B, and to its clips where they are embedded."""
    links = []
    for i, side in ((0, "A"), (1, "B")):
        target = anchors.row_of(i, flip.episode_id, flip.task)
        if target is not None:
            links.append(f'<a href="#{target}">{side} row</a>')
        medium = anchors.medium_of(i, flip.episode_id, flip.task)
        if medium is not None:
            links.append(f'<a href="#{medium}">{side} clip</a>')
    return " · ".join(links)
