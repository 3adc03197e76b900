"""A run page's figures in a browser against a real `hylo serve`: the histograms of episode length and return stacked
by status (each part's count on hover, as the run's episodes have it), one task's alone, a run that recorded no
return, and a realtime run's latency and ratio charts per task."""

from __future__ import annotations

from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from browser import HyloServe, snap
from playwright.sync_api import Page, expect
from synthetic import write_run

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog

EVAL = "/api/eval/v2"


def get(server: HyloServe, path: str, **params: Any) -> Any:
    response = server.api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def step_bin_label(low: float, high: float) -> str:
    """A steps bin as the page names it: `12 steps`, `10–19 steps`."""
    return f"{int(low)} steps" if high - low == 1 else f"{int(low)}–{int(high) - 1} steps"


def expected_parts(rows: list[EpisodeRow], edges: list[float]) -> dict[tuple[int, str], str]:
    """(bin, status) → the hover text of that part of the steps histogram, counted from the episodes themselves."""
    counts: Counter[tuple[int, str]] = Counter()
    for row in rows:
        bin_ = next(i for i in range(len(edges) - 1) if edges[i] <= row.steps < edges[i + 1])
        counts[(bin_, row.status.value)] += 1
    totals = Counter[int]()
    for (bin_, _), count in counts.items():
        totals[bin_] += count
    return {
        (
            bin_,
            status,
        ): f"{status}: {count} of {totals[bin_]} episodes of {step_bin_label(edges[bin_], edges[bin_ + 1])}"
        for (bin_, status), count in counts.items()
    }


def expect_steps_histogram(page: Page, rows: list[EpisodeRow], edges: list[float]) -> None:
    """Every part of every bar of the steps histogram, and the legend's totals, as the episodes have them."""
    parts = expected_parts(rows, edges)
    histogram = page.get_by_test_id("steps-histogram")
    expect(histogram.locator("rect[data-status]")).to_have_count(len(parts))
    for (bin_, status), title in parts.items():
        expect(histogram.locator(f'[data-bin="{bin_}"] rect[data-status="{status}"] title')).to_have_text(title)
    for status, count in Counter(row.status.value for row in rows).items():
        expect(page.get_by_test_id(f"legend-{status}")).to_have_text(f"{status} {count}")


def ms(seconds: float) -> str:
    """Seconds in milliseconds as the charts write them (JavaScript's toFixed: halves away from zero)."""
    places = Decimal("0.1") if seconds >= 0.001 else Decimal("0.001")
    return f"{Decimal(seconds * 1000).quantize(places, rounding=ROUND_HALF_UP)} ms"


def final_rows(server: HyloServe, run_id: str) -> list[EpisodeRow]:
    with EvalLog.open(server.log_dir / run_id) as log:
        return log.final_episodes()


def write_run_without_returns(log_dir: Path, run_id: str) -> None:
    """A run whose benchmark records no return: three episodes without `metrics.return`."""
    rows = [
        EpisodeRow(
            episode_id=f"babyai/default/GoToLocal/{index:04d}@s0",
            task="GoToLocal",
            split="default",
            index=index,
            base_seed=0,
            seed=index,
            status=status,
            reason=status.value,
            success=status is EpisodeStatus.SUCCESS,
            steps=5 + index,
        )
        for index, status in enumerate([EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE, EpisodeStatus.FAILURE])
    ]
    spec = {"benchmark": "babyai", "agent": "random", "split": "default", "tasks": ["GoToLocal"]}
    with EvalLog.create(
        log_dir / run_id, run_id=run_id, benchmark="babyai", split="default", agent="random", digest=run_id,
        spec=spec, n_planned=len(rows), versions={},
    ) as log:  # fmt: skip
        log.record_many([(row, []) for row in rows])
        log.update_run(status="complete")


def test_the_run_page_shows_length_and_return_by_status_for_the_run_and_a_task(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    run_id = "figures-mixed"
    write_run(server.log_dir, run_id, 120, ["GoToLocal", "Open"], seed=4, abstentions=False, success_p=[0.7, 0.3])
    rows = final_rows(server, run_id)
    assert {row.status for row in rows} == {EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE}
    page.goto(server.url + f"/#/runs/{run_id}")

    whole = get(server, f"{EVAL}/runs/{run_id}/distributions")
    expect(page.get_by_test_id("distributions-scope")).to_have_text("120 final episodes")
    expect_steps_histogram(page, rows, whole["steps"]["edges"])
    returns = page.get_by_test_id("return-histogram")
    expect(returns).to_be_visible()
    expect(returns.locator("rect[data-status]")).not_to_have_count(0)
    expect(page.get_by_test_id("return-figure")).to_contain_text("return (sum of rewards)")
    expect(page.get_by_test_id("steps-figure")).to_contain_text("episode length (steps)")
    snap(page, tmp_path, "run-figures")

    page.get_by_test_id("distributions-task").select_option("Open")
    expect(page.get_by_test_id("distributions-scope")).to_have_text("60 final episodes of Open")
    opened = get(server, f"{EVAL}/runs/{run_id}/distributions", task="Open")
    expect_steps_histogram(page, [row for row in rows if row.task == "Open"], opened["steps"]["edges"])

    write_run_without_returns(server.log_dir, "figures-no-return")
    page.goto(server.url + "/#/runs/figures-no-return")
    expect(page.get_by_test_id("no-return")).to_have_text("no return recorded")
    expect(page.get_by_test_id("return-histogram")).to_have_count(0)
    expect(page.get_by_test_id("legend-success")).to_have_text("success 1")
    expect(page.get_by_test_id("legend-failure")).to_have_text("failure 2")


def test_a_realtime_run_shows_its_latency_and_ratio_charts_per_task(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    run_id = "figures-realtime"
    options = {"clock": "virtual", "schedule": "chunked"}
    write_run(server.log_dir, run_id, 80, ["GoToLocal", "Open"], seed=3, timing_options=options)
    per_task = get(server, f"{EVAL}/runs/{run_id}/realtime/tasks")["per_task"]
    overall = get(server, f"{EVAL}/runs/{run_id}")["realtime"]
    page.goto(server.url + f"/#/runs/{run_id}")

    for which, clock in (("latency_s", "measured"), ("virtual_latency_s", "virtual")):
        test_id = "realtime-latency-chart" if clock == "measured" else "realtime-virtual-latency-chart"
        chart = page.get_by_test_id(test_id)
        expect(chart.locator(".latency-row")).to_have_count(3)
        for task, figures in [*per_task.items(), ("All tasks", overall)]:
            for q in ("p50", "p95", "p99"):
                mark = chart.locator(f'[data-task="{task}"] [data-quantile="{q}"] title')
                expect(mark).to_have_text(f"{task}, {clock} {q}: {ms(figures[which][q])}")

    ratios = page.get_by_test_id("realtime-ratio-chart")
    for task, figures in per_task.items():
        stale = ratios.locator(f'[data-task="{task}"] [data-ratio="stale"] title')
        expect(stale).to_contain_text(f"({figures['dropped']} dropped / {figures['executed']} executed)")
        hold = ratios.locator(f'[data-task="{task}"] [data-ratio="hold"] title')
        expect(hold).to_contain_text(f"({figures['holds']} hold steps / {figures['steps']} steps)")
    page.get_by_test_id("realtime-panel").scroll_into_view_if_needed()
    snap(page, tmp_path, "realtime-figures")
