"""The summary, comparison and run tables at the widths of real terminals: every figure a user reads is whole, in its
row, and nothing is cut to `…`."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.cells import cell_len
from rich.console import Console

from hylo.core.status import EpisodeStatus as S
from hylo.evallog.report import print_comparison, print_summary, realtime_table
from hylo.evallog.rows import RunInfo
from hylo.evallog.run_list import print_runs
from hylo.evallog.run_status import RunStatus
from hylo.stats.success import EpisodeRecord, compare_runs, summarize, summarize_by_task

WIDTHS = (80, 100, 120)
LONG_TASK = "LIVING_ROOM_SCENE1_put_the_black_bowl_on_the_plate_and_the_cream_cheese_in_the_basket"


def render(width: int, draw) -> str:
    out = io.StringIO()
    draw(Console(file=out, width=width, color_system=None, legacy_windows=False))
    text = out.getvalue()
    assert not re.search(r"\S.*…", text), text  # a cut figure; a line may begin with `… and 5 more`
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    return text


def row_tokens(text: str, name: str) -> list[str]:
    """The figures on every line that starts with `name` (a table row, or the row's part in each table of a split
    layout), in order."""
    lines = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    assert lines, f"no row for {name!r} in:\n{text}"
    return [token for line in lines for token in line.removeprefix(name).split() if token != "±"]


def is_subsequence(wanted: list[str], tokens: list[str]) -> bool:
    it = iter(tokens)
    return all(any(token == w for token in it) for w in wanted)


def _records(task: str, counts: dict[S, int]) -> list[EpisodeRecord]:
    records = []
    for status, count in counts.items():
        for _ in range(count):
            index = len(records)
            records.append(EpisodeRecord(f"b/s/{task}/{index:04d}@s0", task, index, 0, status, "r", 500,
                                         status is S.SUCCESS, episode_return=float(index % 7)))  # fmt: skip
    return records


TASKS = {
    "reach-v3": {S.SUCCESS: 1234, S.FAILURE: 567, S.ERROR: 89, S.INFRA_INVALID: 23, S.SAFETY_ABORT: 4},
    "pick-place-v3": {S.SUCCESS: 5, S.FAILURE: 678, S.ERROR: 91, S.INFRA_INVALID: 2, S.SAFETY_ABORT: 31},
}


@pytest.mark.parametrize("width", WIDTHS)
def test_the_summary_keeps_n_and_every_status_count_whole_in_its_row(width):
    records = [r for task, counts in TASKS.items() for r in _records(task, counts)]
    per_task, overall = summarize_by_task(records), summarize(records)
    text = render(width, lambda c: print_summary(c, "expert on metaworld: run metaworld-expert-0123456789abcdef",
                                                 per_task, overall))  # fmt: skip
    for task, s in [*per_task.items(), ("overall", overall)]:
        low, high = s.success_ci
        figures = [str(s.n), *(str(s.status_counts[status.value]) for status in S)]
        figures += [f"{s.success_rate:.3f}", f"[{low:.3f},", f"{high:.3f}]", f"{s.conservative_success_rate:.3f}"]
        assert is_subsequence(figures, row_tokens(text, task)), (task, figures, text)
    # every status is named, by its header or the legend under the table
    for status in S:
        assert status.value in text


def test_the_summary_has_one_table_where_it_fits_and_splits_where_it_does_not():
    records = [r for task, counts in TASKS.items() for r in _records(task, counts)]
    per_task, overall = summarize_by_task(records), summarize(records)
    for width, tables in ((160, 1), (120, 1), (80, 2)):
        text = render(width, lambda c: print_summary(c, "t", per_task, overall))
        assert len(re.findall(r"^task\b", text, re.MULTILINE)) == tables, (width, text)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_task_name_wraps_and_stays_whole(width):
    records = _records(LONG_TASK, {S.SUCCESS: 3, S.FAILURE: 2}) + _records("reach-v3", {S.FAILURE: 1})
    text = render(width, lambda c: print_summary(c, "t", summarize_by_task(records), summarize(records)))
    first_column = "".join(re.split(r"\s{2,}", line)[0] for line in text.splitlines())
    assert LONG_TASK in first_column, text


@pytest.mark.parametrize("width", WIDTHS)
def test_the_comparison_keeps_every_figure_of_its_row(width):
    a, b = [], []
    for task in ("reach-v3", LONG_TASK):
        for i in range(1500):
            sa, sb = (S.SUCCESS if i % 3 else S.FAILURE), (S.SUCCESS if i % 4 else S.FAILURE)
            episode = f"libero/libero_10/{task}/{i:04d}@s0"
            a.append(EpisodeRecord(episode, task, i, 0, sa, "r", 5, sa is S.SUCCESS))
            b.append(EpisodeRecord(episode, task, i, 0, sb, "r", 5, sb is S.SUCCESS))
    c = compare_runs(a, b)
    names = ("libero-expert-0123456789abcdef", "libero-random-0123456789abcdef")
    text = render(width, lambda console: print_comparison(console, *names, c, max_flips=3))
    paired = [str(c.n_pairs), f"{c.rate_a:.3f}", f"{c.rate_b:.3f}", f"{c.difference:+.3f}", str(c.both_success),
              str(c.a_only), str(c.b_only), str(c.neither), f"{c.p_value:.4g}"]  # fmt: skip
    assert is_subsequence(paired, text.split()), text
    part = c.per_task["reach-v3"]
    assert is_subsequence(
        [str(part.n_pairs), f"{part.p_value:.4g}", f"{part.p_holm:.4g}"], row_tokens(text, "reach-v3")
    )
    first_column = "".join(re.split(r"\s{2,}", line)[0] for line in text.splitlines())
    assert all(flip.episode_id in first_column for flip in c.flips[:3]), text
    assert f"… and {len(c.flips) - 3} more" in text


def _run(run_id: str, agent_args: dict, counts: dict[str, int], status=RunStatus.COMPLETE) -> RunInfo:
    full = {s.value: 0 for s in S} | counts
    n = sum(full.values())
    return RunInfo(run_id=run_id, status=status, mode="driven", benchmark="metaworld", split="mt10",
                   agent="myagents:ReachP", digest=run_id[-16:], spec={"agent_args": agent_args}, n_planned=n,
                   n_done=n, created_at=time.time(), updated_at=time.time(), versions={}, git_commit=None,
                   message=None, path=None, status_counts=full)  # type: ignore[arg-type]  # fmt: skip


RUNS = [
    _run("metaworld-myagents-reachp-0123456789abcdef", {"gain": 10}, {"success": 10}),
    _run("metaworld-myagents-reachp-fedcba9876543210", {"gain": 20}, {"success": 7, "failure": 3}),
    _run("metaworld-myagents-reachp-00000000deadbeef", {"gain": 0}, {"error": 10}),
]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_list_has_a_header_and_keeps_ids_rates_and_arguments_whole(width):
    text = render(width, lambda c: print_runs(c, RUNS))
    header = text.split("──")[0].split()
    assert is_subsequence(["run", "status", "done", "(95%", "CI)", "created"], header) and "success" in header, text
    for info in RUNS:
        assert info.run_id in text.split()
    assert "gain=10" in text and "gain=20" in text
    assert "0.700" in text and "[0.397, 0.892]" in text
    assert "10/10 error" in text


def test_the_realtime_table_fits_eighty_columns():
    from hylo.evallog.realtime_metrics import RealtimeFigures

    figures = RealtimeFigures(episodes=12, acts=3456, sim_time_s=123.45, latency_s={"p50": 0.0123, "p95": 0.0456,
        "p99": 0.0789}, virtual_latency_s={"p50": 0.00012, "p95": 0.00034, "p99": 0.00056}, control_rate_hz=9.87,
        executed=12345, dropped=234, steps=12600, holds=255, stale_ratio=0.019, hold_ratio=0.0202, chunks=789,
        mean_delay_steps=2.34, watchdog_ends=1)  # fmt: skip
    text = render(80, lambda c: c.print(realtime_table(figures)))
    for figure in ("p50 12.3", "p99 78.9", "p99 0.560", "9.87 actions/s", "0.019 (234 / 12345)", "789"):
        assert figure in text, (figure, text)
