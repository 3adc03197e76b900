"""Rich tables for a run's results and for a comparison of two runs, and what a comparison says about its pairing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from hylo.core.status import EpisodeStatus
from hylo.evallog.realtime_metrics import PERCENTILES, RealtimeFigures
from hylo.evallog.reasons import reason_groups
from hylo.evallog.rows import EpisodeRow, RunInfo
from hylo.evallog.table_fit import add_name_column, add_number_column, compact_table, print_fitting
from hylo.stats.success import Comparison, NoPairs, SeedClusters, Summary
from hylo.stats.suite import Improvement, SuiteFigures


def rate_text(value: float | None) -> str:
    """A rate to three decimals, or a dash."""
    return "—" if value is None else f"{value:.3f}"


def interval_text(ci: Sequence[float] | None) -> str:
    """An interval as [low, high] to three decimals, or a dash."""
    return "—" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def return_text(s: Summary) -> str:
    """The mean return ± its standard deviation, or a dash."""
    if s.mean_return is None:
        return "—"
    return f"{s.mean_return:.3g}" if s.return_std is None else f"{s.mean_return:.3g} ± {s.return_std:.3g}"


STATUS_HEADERS = {status.value: status.value for status in EpisodeStatus} | {
    EpisodeStatus.INFRA_INVALID.value: "infra",
    EpisodeStatus.SAFETY_ABORT.value: "safety",
}
"""The status columns' short headers, which the legend spells out."""

_FULL = ("success rate", "95% CI", "conservative", "return", "mean steps")
_SHORT = ("rate", "95% CI", "cons.", "return", "steps")

SUMMARY_NOTE = (
    "success rate = successes / scored episodes (error and infra_invalid abstain, and are counted above); "
    "conservative = successes / all episodes; return = mean ± standard deviation over scored episodes."
)
SHORT_SUMMARY_NOTE = (
    "infra = infra_invalid, safety = safety_abort; rate = success rate = successes / scored episodes (error and "
    "infra_invalid abstain, and are counted above); cons. = conservative rate = successes / all episodes; return = "
    "mean ± standard deviation over scored episodes; steps = mean steps."
)

NO_SIGNAL = "no signal"


def summary_rows(per_task: Mapping[str, Summary], overall: Summary) -> list[tuple[str, Summary]]:
    """Each task's row, then the overall row (left out for one task: it would repeat the task's)."""
    rows = list(per_task.items())
    if len(rows) != 1:
        rows.append(("overall", overall))
    return rows


def summary_texts(s: Summary) -> list[str]:
    """A summary's figures as the per-task table prints them: n, each status's count, the rates and interval, the
    return and the mean steps."""
    return _counts(s) + _figures(s)


def _counts(s: Summary) -> list[str]:
    return [str(s.n), *[str(s.status_counts.get(status.value, 0)) for status in EpisodeStatus]]


def _figures(s: Summary) -> list[str]:
    rates = (
        [rate_text(s.success_rate), interval_text(s.success_ci), rate_text(s.conservative_success_rate)]
        if s.success_signal
        else [NO_SIGNAL, "—", "—"]
    )
    return [*rates, return_text(s), "—" if s.mean_steps is None else f"{s.mean_steps:.1f}"]


def _task_table(
    title: str | None, rows: list[tuple[str, Summary]], headers: Sequence[str], cells: Callable[[Summary], list[str]]
) -> Table:
    """A table of a row per task, the overall row (when there is one) set apart in bold."""
    table = compact_table(title)
    add_name_column(table, "task")
    for header in headers:
        add_number_column(table, header)
    overall = len(rows) > 1 and rows[-1][0] == "overall"
    for i, (task, s) in enumerate(rows):
        is_overall = overall and i == len(rows) - 1
        table.add_row(task, *cells(s), end_section=overall and i == len(rows) - 2, style="bold" if is_overall else None)
    return table


def summary_table(title: str, per_task: Mapping[str, Summary], overall: Summary, *, short: bool = False) -> Table:
    """Per task and overall: n, the count of every status, the success rate over scored episodes with its 95%
    Wilson interval, the conservative rate (abstentions count as failures), the mean return (± its standard
    deviation) and mean steps. An env without a success signal shows "no signal" where its rates would be. With
    `short`, the headers are abbreviated (`SHORT_SUMMARY_NOTE` spells them out)."""
    statuses = [STATUS_HEADERS[s.value] if short else s.value for s in EpisodeStatus]
    headers = ["n", *statuses, *(_SHORT if short else _FULL)]
    return _task_table(title, summary_rows(per_task, overall), headers, summary_texts)


def summary_layouts(title: str, per_task: Mapping[str, Summary], overall: Summary) -> list[list[RenderableType]]:
    """The summary's layouts, widest first: one table with full headers; with short headers and a legend; the
    counts and the rates in two tables; each task in two lines of text."""
    rows = summary_rows(per_task, overall)
    short_note = Text(SHORT_SUMMARY_NOTE, style="dim")
    counts_headers = ["n", *[STATUS_HEADERS[s.value] for s in EpisodeStatus]]
    heading = Text(title, style="italic")
    split: list[RenderableType] = [
        heading,
        _task_table(None, rows, counts_headers, _counts),
        _task_table(None, rows, _SHORT, _figures),
    ]
    return [
        [summary_table(title, per_task, overall), Text(SUMMARY_NOTE, style="dim")],
        [summary_table(title, per_task, overall, short=True), short_note],
        [*split, short_note],
        [heading, _stacked(rows), Text(SUMMARY_NOTE, style="dim")],
    ]


def _stacked(rows: list[tuple[str, Summary]]) -> Table:
    """Each task in two lines: its counts, then its rates; the task's name in a column of its own."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(overflow="fold")
    grid.add_column()
    for task, s in rows:
        counts = ", ".join(f"{status.value} {s.status_counts.get(status.value, 0)}" for status in EpisodeStatus)
        rate, ci, conservative, mean_return, steps = _figures(s)
        figures = (
            f"success rate {rate} {ci}, conservative {conservative}"
            if s.success_signal
            else f"success rate {NO_SIGNAL}"
        )
        grid.add_row(task, f"n {s.n}: {counts}\n{figures}, return {mean_return}, mean steps {steps}")
    return grid


def print_summary(console: Console, title: str, per_task: Mapping[str, Summary], overall: Summary) -> None:
    print_fitting(console, summary_layouts(title, per_task, overall))
    if not overall.success_signal:
        console.print(
            "this environment has no success signal (it only rewards): judge the agent by its return.", style="bold"
        )


MAX_REASONS = 10
"""How many reasons a summary lists (the most frequent of each status first)."""


def print_reasons(
    console: Console, rows: Iterable[EpisodeRow], *, more: str | None = None, limit: int | None = MAX_REASONS
) -> None:
    """Why the episodes of `rows` (a run's final episodes) that did not succeed ended, grouped by reason with their
    count, the first episode of each and, when a limit ended them, the flag that changes it; `more` says where each
    episode's own reason and traceback are. Nothing when every episode succeeded."""
    groups = reason_groups(rows)
    if not groups:
        return
    shown = groups if limit is None else groups[:limit]
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for group in shown:
        text = Text(f"{group.reason}  (first: {group.first})")
        if group.hint is not None:
            text.append(f"\n{group.hint}", style="dim")
        style = "red" if not group.status.scored else ""
        grid.add_row(Text(f"{group.status.value} ×{group.count}", style=style), text)
    console.print(f"episodes that did not succeed, by reason ({sum(g.count for g in groups)}):", highlight=False)
    console.print(grid)
    if len(shown) < len(groups):
        left = sum(g.count for g in groups[len(shown) :])
        console.print(f"… and {len(groups) - len(shown)} more reasons ({left} episodes)", style="dim", highlight=False)
    if more is not None:
        console.print(more, style="dim", highlight=False, soft_wrap=True)  # a command: never broken


def seeds_note(clusters: SeedClusters) -> str:
    """A run of several seeds, in one line: the clustered interval, pass@k and each seed's rate."""
    low, high = clusters.success_ci
    passes = ", ".join(f"pass@{k} {rate_text(rate)}" for k, rate in clusters.pass_at_k.items())
    per_seed = ", ".join(f"{seed}: {rate_text(rate)}" for seed, rate in clusters.per_seed.items())
    return (
        f"{clusters.seeds} seeds over {clusters.clusters} episode keys: 95% interval "
        f"[{rate_text(low)}, {rate_text(high)}] "
        f"with the episodes of one (task, index) as a cluster (design effect {clusters.design_effect:.2f}); "
        f"{passes}; per seed {per_seed}"
    )


def _units(unit: str, several: bool = False) -> str:
    """What a bootstrap resamples within each task, in words."""
    if unit == "episode":
        return "runs' episodes" if several else "episodes"
    return "runs' (task, index) clusters" if several else "(task, index) clusters (every seed of an index together)"


def suite_lines(figures: SuiteFigures) -> list[str]:
    """A run's suite figures as `hylo runs show` prints them under its per-task table: the mean over tasks and the
    IQM with their intervals, then how they were had (and the tasks left out); why there are none, for a run of
    several tasks that has none. Nothing for a run of one task: its row is its figure."""
    f = figures
    if f.tasks + len(f.left_out) < 2:
        return []
    left = [f"left out (no scored episode): {', '.join(f.left_out)}"] if f.left_out else []
    if f.mean is None:
        return [f"suite: no figures ({f.reason})", *left]
    seeds = f"{f.seeds} seeds" if f.seeds > 1 else "1 seed"
    scores = "per-(seed, task) success rates" if f.seeds > 1 else "per-task success rates"
    return [
        f"suite over {f.tasks} tasks, {seeds}: mean over tasks {rate_text(f.mean)} {interval_text(f.mean_ci)}, "
        f"IQM {rate_text(f.iqm)} {interval_text(f.iqm_ci)}",
        f"  IQM = mean of the middle half of the {scores}; {f.bootstrap.confidence:.0%} percentile intervals of a "
        f"stratified bootstrap: each task's {_units(f.unit)} resampled within the task, {f.bootstrap.resamples} "
        "times (Agarwal et al. 2021; docs/statistics.md, Suite-level aggregates)",
        *[f"  {line}" for line in left],
    ]


def improvement_lines(improvement: Improvement) -> list[str]:
    """The probability of improvement as `hylo compare` prints it: P(B > A) over the tasks with its interval and how
    it was had, the tasks left out; why there is none, for runs of several tasks. Nothing for runs of one task."""
    i = improvement
    if i.tasks + len(i.left_out) < 2:
        return []
    left = ["left out: " + ", ".join(f"{task} ({why})" for task, why in i.left_out.items())] if i.left_out else []
    if i.probability is None:
        return [f"probability of improvement: none ({i.reason})", *left]
    scores = (
        "each seed's success rate"
        if i.scores == "seed"
        else "the episodes' 0/1 outcomes, i.e. ½ + ½ (rate B − rate A) per task"
    )
    units = (
        f"both {_units(i.unit_a, several=True)}"
        if i.unit_a == i.unit_b
        else f"A's {_units(i.unit_a)} and B's {_units(i.unit_b)}"
    )
    return [
        f"probability of improvement P(B > A) over {i.tasks} tasks: {rate_text(i.probability)} {interval_text(i.ci)}",
        f"  per task P(X_B > X_A) + ½ P(X_B = X_A) over {scores}, averaged over the tasks; "
        f"{i.bootstrap.confidence:.0%} percentile interval of a stratified bootstrap, {i.bootstrap.resamples} "
        f"resamples of {units} within each task, each run on its own (Agarwal et al. 2021)",
        *[f"  {line}" for line in left],
    ]


def detectable_note(overall: Summary, detectable: float | None) -> str:
    """What a run's size can tell apart: the smallest difference from its success rate a comparison with another
    run of its size detects (α 0.05, power 0.8)."""
    scope = "two-proportion test, α 0.05, power 0.8; pairing both runs on the same episodes detects less"
    if detectable is None:
        return f"with {overall.scored} scored episodes, no difference from this success rate is detectable ({scope})"
    return (
        f"with {overall.scored} scored episodes, the smallest difference from this success rate that a comparison "
        f"with a run of the same size detects: ±{detectable:.3f} ({scope})"
    )


ALL_FLIPS_HINT = "hylo compare --all-flips lists every one"


def print_comparison(
    console: Console,
    name_a: str,
    name_b: str,
    comparison: Comparison,
    *,
    max_flips: int | None = 50,
    all_flips: str = ALL_FLIPS_HINT,
) -> None:
    """The paired table, and the episodes that flipped (the first `max_flips` of them; None for all; `all_flips`
    says how to list them all when some are left out)."""
    c = comparison
    print_fitting(console, _paired_layouts(f"{name_a} (A) vs {name_b} (B): paired by episode", c))
    if len(c.per_task) > 1:
        print_fitting(console, _per_task_layouts(c))
    notes = []
    if c.abstained:
        notes.append(f"{c.abstained} pairs left out because an episode abstained (error / infra_invalid)")
    if c.only_in_a or c.only_in_b:
        notes.append(f"unpaired: {c.only_in_a} only in A, {c.only_in_b} only in B")
    for note in notes:
        console.print(note, style="dim")
    if c.flips:
        flips = compact_table("episodes that flipped")
        add_name_column(flips, "episode")
        add_name_column(flips, "task")
        add_name_column(flips, "A", wrap=False)
        add_name_column(flips, "B", wrap=False)
        shown = c.flips if max_flips is None else c.flips[:max_flips]
        for flip in shown:
            flips.add_row(flip.episode_id, flip.task, flip.status_a, flip.status_b)
        console.print(flips)
        if len(shown) < len(c.flips):
            console.print(f"… and {len(c.flips) - len(shown)} more ({all_flips})", highlight=False, soft_wrap=True)
    else:
        console.print("no episode flipped.")


_PAIRED = ("pairs", "A rate", "B rate", "B − A", "both succeed", "only A", "only B", "neither", "p (McNemar)")
_PAIRED_TWO_LINES = ("pairs", "A\nrate", "B\nrate", "B − A", "both\nsucceed", "only\nA", "only\nB", "neither",
                     "p\n(McNemar)")  # fmt: skip


def _paired_layouts(title: str, c: Comparison) -> list[list[RenderableType]]:
    """The paired table with its headers on one line, on two, or the figures as text."""
    cells = [
        str(c.n_pairs),
        rate_text(c.rate_a),
        rate_text(c.rate_b),
        "—" if c.difference is None else f"{c.difference:+.3f}",
        str(c.both_success),
        str(c.a_only),
        str(c.b_only),
        str(c.neither),
        f"{c.p_value:.4g}",
    ]
    layouts: list[list[RenderableType]] = []
    for headers in (_PAIRED, _PAIRED_TWO_LINES):
        table = compact_table(title)
        for header in headers:
            add_number_column(table, header)
        table.add_row(*cells)
        layouts.append([table])
    text = ", ".join(f"{header} {cell}" for header, cell in zip(_PAIRED, cells, strict=True))
    layouts.append([Text(title, style="italic"), Text(text)])
    return layouts


def _per_task_layouts(c: Comparison) -> list[list[RenderableType]]:
    """Each task's paired difference, its McNemar p-value and that p-value adjusted for testing every task (Holm):
    a table, or a line per task."""
    title = "per task (p adjusted over the tasks by Holm's method)"
    headers = ("pairs", "A rate", "B rate", "B − A", "p (McNemar)", "p (Holm)")
    table = compact_table(title)
    add_name_column(table, "task")
    for header in headers:
        add_number_column(table, header)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(overflow="fold")
    grid.add_column()
    for task, part in c.per_task.items():
        difference = "—" if part.difference is None else f"{part.difference:+.3f}"
        cells = [str(part.n_pairs), rate_text(part.rate_a), rate_text(part.rate_b), difference, f"{part.p_value:.4g}",
                 f"{part.p_holm:.4g}"]  # fmt: skip
        table.add_row(task, *cells)
        grid.add_row(task, ", ".join(f"{header} {cell}" for header, cell in zip(headers, cells, strict=True)))
    return [[table], [Text(title, style="italic"), grid]]


def run_scope(info: RunInfo, *, tasks: bool = False) -> str:
    """Where a run's episodes come from, e.g. `babyai/test seed 0` (with `tasks`: `... tasks GoToLocal, PickupLoc`):
    what two runs must share for their episodes to pair."""
    scope = f"{info.benchmark}/{info.split}" if info.split else info.benchmark
    seed = info.spec.get("seed")
    if seed is not None:
        scope += f" seed {seed}"
    if tasks and info.spec.get("tasks"):
        scope += f" tasks {', '.join(map(str, info.spec['tasks']))}"
    return scope


def no_pairs_message(a: RunInfo, b: RunInfo, exc: NoPairs) -> str:
    """Why two runs cannot be compared, naming each run's scope (its tasks too when that is all they differ in)."""
    if not exc.n_a or not exc.n_b:
        empty = ", ".join(info.run_id for info, n in ((a, exc.n_a), (b, exc.n_b)) if not n)
        return f"runs {a.run_id} and {b.run_id} share no episode: {empty} has no finished episode yet"
    tasks = run_scope(a) == run_scope(b)
    return (
        f"runs {a.run_id} and {b.run_id} share no episode: {a.run_id} is {run_scope(a, tasks=tasks)}, {b.run_id} is "
        f"{run_scope(b, tasks=tasks)}; compare runs of the same benchmark, split, seed and tasks"
    )


def pairing_note(a: RunInfo, b: RunInfo, comparison: Comparison) -> str:
    """How much of each run a partial comparison covers."""
    c = comparison
    return (
        f"not every episode is paired: {c.paired} of {a.run_id}'s {c.n_a} episodes and {c.paired} of {b.run_id}'s "
        f"{c.n_b} are in both runs; the comparison covers those {c.paired}"
    )


def run_timing(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a run ran under, as `hylo compare --json` gives it: its protocol (or None), timing and timing options."""
    return {
        "protocol": spec.get("protocol"),
        "timing": spec.get("timing") or "sync",
        "timing_options": spec.get("timing_options") or {},
    }


def timing_note(spec: Mapping[str, object]) -> str:
    """A run's protocol, when it names one, and the timing it ran under with its options, e.g.
    `protocol realtime-d2 · timing realtime: clock=virtual, latency_steps=2, schedule=chunked`."""
    options = spec.get("timing_options")
    shown = (
        ", ".join(f"{key}={_option(value)}" for key, value in sorted(options.items()))
        if isinstance(options, dict)
        else ""
    )
    timing = f"timing {spec.get('timing') or 'sync'}" + (f": {shown}" if shown else "")
    protocol = spec.get("protocol")
    return timing if protocol is None else f"protocol {protocol} · {timing}"


def _option(value: object) -> str:
    """A timing option's value as JSON writes it, a long list by its length (an empirical latency model's samples)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_option(inner)}" for key, inner in value.items()) + "}"
    if isinstance(value, list):
        return f"[{len(value)} values]" if len(value) > 4 else "[" + ", ".join(map(_option, value)) + "]"
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    return str(value)


def _ms(seconds: float) -> str:
    """Seconds as milliseconds: one decimal, three below 1 ms (an in-process policy's acts take microseconds)."""
    return f"{1000 * seconds:.1f}" if seconds >= 0.001 else f"{1000 * seconds:.3f}"


def _ratio(value: float | None, numerator: int, denominator: int) -> str:
    return f"— ({numerator} / {denominator})" if value is None else f"{value:.3f} ({numerator} / {denominator})"


def realtime_table(figures: RealtimeFigures) -> Table:
    """A run's (or an episode's) realtime figures: act latency percentiles, measured and on the virtual clock, in
    milliseconds; the effective control rate; the stale and hold ratios with their counts; chunks, their mean delay
    and the watchdog ends (docs/evallog.md, Realtime metrics)."""
    f = figures
    table = compact_table(f"realtime ({f.episodes} episodes, {f.acts} acts, {f.sim_time_s:.2f} s simulated)")
    add_name_column(table, "figure", wrap=False)
    add_number_column(table, "value")
    table.add_column("how", style="dim")
    for name, values in (("act latency measured", f.latency_s), ("act latency virtual", f.virtual_latency_s)):
        shown = "—" if values is None else " · ".join(f"p{q} {_ms(values[f'p{q}'])}" for q in PERCENTILES) + " ms"
        table.add_row(name, shown, "over every act of every episode")
    rate = "—" if f.control_rate_hz is None else f"{f.control_rate_hz:.2f} actions/s"
    table.add_row("control rate", rate, f"executed / simulated time ({f.executed} / {f.sim_time_s:.2f} s)")
    table.add_row("stale", _ratio(f.stale_ratio, f.dropped, f.executed), "dropped / executed actions")
    table.add_row("hold", _ratio(f.hold_ratio, f.holds, f.steps), "hold steps / steps")
    delay = "—" if f.mean_delay_steps is None else f"{f.mean_delay_steps:.2f} steps"
    table.add_row("chunks requested", str(f.chunks), f"mean delay {delay}")
    table.add_row("watchdog ends", str(f.watchdog_ends), "episodes whose reason is watchdog")
    return table
