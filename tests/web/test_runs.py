"""The runs dashboard in a browser against a real `hylo serve`: starting an evaluation and watching it finish, a
run's numbers against the API's, a 10,000-episode run paged and filtered, comparing two runs (per task, and from a
flip to its episode), refusals, cancel and video, a run's health and its agent's arguments."""

from __future__ import annotations

import re
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Page, expect
from synthetic import write_run

from hylo.core.status import EpisodeStatus

EVAL = "/api/eval/v2"
LONG_MS = 40_000
PAGE_SIZE = 100


def pct(value: float | None) -> str:
    """A rate as the page writes it: a percentage with one decimal, halves rounded away from zero."""
    if value is None:
        return "—"
    return f"{Decimal(value * 100).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"


def interval(ci: list[float] | None) -> str:
    return "—" if ci is None else f"[{pct(ci[0])}, {pct(ci[1])}]"


def points(value: float | None) -> str:
    if value is None:
        return "—"
    text = str(Decimal(value * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    return f"{'+' if value > 0 else ''}{text} pp"


def p_value(value: float) -> str:
    if value >= 0.001:
        return str(Decimal(value).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{int(exponent):+d}"


def mean_return(mean: float | None, std: float | None) -> str:
    """As the dashboard writes it: two decimals (halves rounded up, as JavaScript's toFixed does), ± the spread."""
    if mean is None:
        return "—"

    def fixed(value: float) -> str:
        return str(Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

    return fixed(mean) if std is None else f"{fixed(mean)} ± {fixed(std)}"


def get(server: HyloServe, path: str, **params: Any) -> Any:
    response = server.api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def expect_summary(page: Page, summary: dict[str, Any]) -> None:
    """Every number of the per-task table, and of its whole-run row, as the API computed it."""
    rows: list[tuple[str, dict[str, Any]]] = [*summary["per_task"].items(), ("overall", summary)]
    expect(page.get_by_test_id("task-table").locator("tbody tr")).to_have_count(len(summary["per_task"]))
    for key, s in rows:
        row = page.get_by_test_id("overall-row" if key == "overall" else f"task-row-{key}")
        expect(row.get_by_test_id(f"cell-n-{key}")).to_have_text(str(s["n"]))
        for status, count in s["status_counts"].items():
            expect(row.get_by_test_id(f"cell-count-{status}-{key}")).to_have_text(str(count))
        expect(row.get_by_test_id(f"cell-success-rate-{key}")).to_have_text(pct(s["success_rate"]))
        expect(row.get_by_test_id(f"cell-ci-{key}")).to_have_text(interval(s["success_ci"]))
        expect(row.get_by_test_id(f"cell-conservative-{key}")).to_have_text(pct(s["conservative_success_rate"]))
        expect(row.get_by_test_id(f"cell-return-{key}")).to_have_text(mean_return(s["mean_return"], s["return_std"]))
    chart_rows = page.get_by_test_id("success-chart").locator("g.chart-row")
    expect(chart_rows).to_have_count(len(summary["per_task"]) + 1)


def open_runs(page: Page, server: HyloServe) -> None:
    page.goto(server.url + "/#/runs")
    expect(page.get_by_test_id("start-benchmark")).to_have_value("babyai")


def fill_start_form(page: Page, *, run_id: str, agent: str, tasks: list[str], episodes: str, video: str = "0") -> None:
    form = page.get_by_test_id("start-form")
    form.get_by_test_id("start-tasks").select_option(tasks)
    form.get_by_test_id("start-agent").fill(agent)
    form.get_by_test_id("start-episodes").fill(episodes)
    form.get_by_test_id("start-video").fill(video)
    form.get_by_test_id("start-run-id").fill(run_id)


def test_start_watch_and_read_a_run(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "ui-expert-5"
    open_runs(page, server)
    fill_start_form(page, run_id=run_id, agent="expert", tasks=["GoToLocal"], episodes="5")
    page.get_by_test_id("start-submit").click()
    expect(page.get_by_test_id("start-run-link")).to_have_text(run_id)
    expect(page.get_by_test_id(f"run-progress-{run_id}")).to_have_text("5/5", timeout=LONG_MS)
    expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("complete")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    snap(page, tmp_path, "runs-list")

    page.get_by_test_id(f"run-link-{run_id}").click()
    detail = get(server, f"{EVAL}/runs/{run_id}")
    assert detail["summary"]["n"] == 5
    expect(page.get_by_test_id("run-status")).to_have_text("complete")
    expect(page.get_by_test_id("run-progress")).to_have_text("5/5")
    expect(page.get_by_test_id("run-timing")).to_have_text("sync")
    expect_summary(page, detail["summary"])
    assert detail["realtime"] is None
    expect(page.get_by_test_id("realtime-panel")).to_have_count(0)
    assert detail["seed_clusters"] is None
    expect(page.get_by_test_id("seeds-panel")).to_have_count(0)
    expect(page.get_by_test_id("run-protocol")).to_have_count(0)

    episodes = get(server, f"{EVAL}/runs/{run_id}/episodes")["episodes"]
    rows = page.get_by_test_id("episode-row")
    expect(rows).to_have_count(5)
    expect(rows.nth(2)).to_have_attribute("data-episode-id", episodes[2]["episode_id"])
    expect(rows.nth(2)).to_contain_text(str(episodes[2]["seed"]))
    rows.nth(2).click()
    trace = get(server, f"{EVAL}/runs/{run_id}/trace", episode=episodes[2]["episode_id"])
    assert trace["events"], "the expert's episode has a trace"
    events = page.get_by_test_id("episode-trace").get_by_test_id("trace-event")
    expect(events).to_have_count(min(len(trace["events"]), 300))
    expect(events.first.get_by_test_id("trace-kind-label")).to_have_text(trace["events"][0]["event"])
    kinds = {event["event"] for event in trace["events"]}
    assert "episode.start" in kinds
    expect(page.get_by_test_id("episode-trace").locator('[data-kind="episode.start"]')).to_have_count(1)
    snap(page, tmp_path, "run-page")


def fixed(value: float, places: int) -> str:
    """As JavaScript's toFixed writes it (halves of the exact binary value rounded up)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def ms(seconds: float) -> str:
    return f"{fixed(seconds * 1000, 1 if seconds >= 0.001 else 3)} ms"


def test_a_realtime_run_shows_its_protocol_timing_and_realtime_figures(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    run_id = "synthetic-realtime"
    options = {"schedule": "chunked", "clock": "virtual", "latency_model": {"kind": "lognormal", "median_s": 0.05}}
    write_run(server.log_dir, run_id, 300, ["GoToLocal", "Open"], seed=3, timing_options=options, protocol="rt-test")
    detail = get(server, f"{EVAL}/runs/{run_id}")
    figures = detail["realtime"]
    assert figures["episodes"] == 300 and figures["watchdog_ends"] > 0 and figures["dropped"] > 0
    page.goto(server.url + f"/#/runs/{quote(run_id)}")
    expect(page.get_by_test_id("run-protocol")).to_have_text("rt-test")
    expect(page.get_by_test_id("run-timing")).to_have_text(
        "realtime: clock=virtual, latency_model={kind: lognormal, median_s: 0.05}, schedule=chunked"
    )
    panel = page.get_by_test_id("realtime-panel")
    for key, test_id in (("latency_s", "latency"), ("virtual_latency_s", "virtual-latency")):
        for q in ("p50", "p95", "p99"):
            expect(panel.get_by_test_id(f"realtime-{test_id}-{q}")).to_have_text(ms(figures[key][q]))
    expect(panel.get_by_test_id("realtime-control-rate")).to_have_text(
        f"{fixed(figures['control_rate_hz'], 2)} actions/s"
    )
    stale = f"{pct(figures['stale_ratio'])} ({figures['dropped']} / {figures['executed']})"
    expect(panel.get_by_test_id("realtime-stale")).to_have_text(stale)
    expect(panel.get_by_test_id("realtime-hold")).to_have_text(
        f"{pct(figures['hold_ratio'])} ({figures['holds']} / {figures['steps']})"
    )
    expect(panel.get_by_test_id("realtime-chunks")).to_have_text(str(figures["chunks"]))
    expect(panel.get_by_test_id("realtime-delay")).to_have_text(f"{fixed(figures['mean_delay_steps'], 2)} steps")
    expect(panel.get_by_test_id("realtime-watchdog")).to_have_text(str(figures["watchdog_ends"]))
    episodes = get(server, f"{EVAL}/runs/{run_id}/episodes", limit=300)["episodes"]
    assert sum(e["realtime"]["watchdog_ends"] for e in episodes) == figures["watchdog_ends"]
    page.get_by_test_id("episode-row").first.click()
    first = episodes[0]["realtime"]
    expect(page.get_by_test_id("episode-realtime")).to_have_text(
        f"realtime: act latency p50 {ms(first['latency_s']['p50'])} · "
        f"virtual {ms(first['virtual_latency_s']['p50'])} · "
        f"{fixed(first['control_rate_hz'], 2)} actions/s · stale {pct(first['stale_ratio'])} · "
        f"hold {pct(first['hold_ratio'])} · {first['chunks']} chunks"
    )
    snap(page, tmp_path, "realtime-run")


def test_a_run_of_several_seeds_shows_its_clustered_figures(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "synthetic-seeds"
    write_run(server.log_dir, run_id, 120, ["GoToLocal", "Open"], seed=5, seeds=[10, 2, 7], abstentions=False)
    detail = get(server, f"{EVAL}/runs/{run_id}")
    clusters = detail["seed_clusters"]
    assert detail["summary"]["n"] == 360 and (clusters["seeds"], clusters["clusters"]) == (3, 120)
    assert list(clusters["per_seed"]) == ["2", "7", "10"] and list(clusters["pass_at_k"]) == ["1", "2", "3"]
    assert clusters["design_effect"] > 1, "episodes of one key share their chance of success"
    page.goto(server.url + f"/#/runs/{quote(run_id)}")
    panel = page.get_by_test_id("seeds-panel")
    expect(panel).to_contain_text("3 seeds over 120 episode keys")
    expect(panel.get_by_test_id("seeds-list")).to_have_text("2, 7, 10")
    expect(panel.get_by_test_id("seeds-clusters")).to_have_text("120")
    expect(panel.get_by_test_id("seeds-plain-ci")).to_have_text(interval(detail["summary"]["success_ci"]))
    expect(panel.get_by_test_id("seeds-clustered-ci")).to_have_text(interval(clusters["success_ci"]))
    assert interval(clusters["success_ci"]) != interval(detail["summary"]["success_ci"])
    expect(panel.get_by_test_id("seeds-design-effect")).to_have_text(fixed(clusters["design_effect"], 2))
    label = panel.get_by_test_id("seeds-design-effect-label")
    expect(label).to_have_attribute("title", re.compile(r"Korn & Graubard.*one \(task, index\).*a cluster"))
    expect(panel.get_by_test_id("seeds-pass-at-k").locator("tbody tr")).to_have_count(3)
    for k, rate in clusters["pass_at_k"].items():
        expect(panel.get_by_test_id(f"seeds-pass-{k}-rate")).to_have_text(pct(rate))
    expect(panel.get_by_test_id("seeds-per-seed").locator("tbody tr")).to_have_count(3)
    for seed, rate in clusters["per_seed"].items():
        expect(panel.get_by_test_id(f"seeds-seed-{seed}-rate")).to_have_text(pct(rate))
    snap(page, tmp_path, "seeds-run")

    write_run(server.log_dir, "synthetic-one-seed", 40, ["GoToLocal"], seed=5, base_seed=7)
    assert get(server, f"{EVAL}/runs/synthetic-one-seed")["seed_clusters"] is None
    page.goto(server.url + "/#/runs/synthetic-one-seed")
    expect(page.get_by_test_id("run-id")).to_have_text("synthetic-one-seed")
    expect(page.get_by_test_id("task-table")).to_be_visible()
    expect(page.get_by_test_id("seeds-panel")).to_have_count(0)


def test_a_10000_episode_run_pages_and_filters(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "synthetic-10k"
    write_run(server.log_dir, run_id, 10_000, ["GoToLocal", "PickupLoc", "Open", "Unlock"], seed=7)
    detail = get(server, f"{EVAL}/runs/{run_id}")
    counts = detail["summary"]["status_counts"]
    assert detail["summary"]["n"] == 10_000 and counts["error"] > 0 and counts["infra_invalid"] > 0

    page.goto(server.url + "/#/live")  # the Live place's styles are loaded too, as after a visit there
    expect(page.get_by_test_id("panel-select")).to_be_visible()
    open_runs(page, server)
    expect(page.get_by_test_id(f"run-progress-{run_id}")).to_have_text("10000/10000")
    page.get_by_test_id(f"run-link-{run_id}").click()
    expect_summary(page, detail["summary"])

    rows = page.get_by_test_id("episode-row")
    info = page.get_by_test_id("page-info")
    expect(info).to_have_text("1–100 of 10000")
    expect(rows).to_have_count(PAGE_SIZE)

    page.get_by_test_id("status-filter").select_option("infra_invalid")
    filtered = get(server, f"{EVAL}/runs/{run_id}/episodes", status="infra_invalid", limit=PAGE_SIZE)
    expect(info).to_have_attribute("data-total", str(filtered["total"]))
    expect(info).to_have_text(f"1–{min(PAGE_SIZE, filtered['total'])} of {filtered['total']}")
    expect(rows.first).to_have_attribute("data-episode-id", filtered["episodes"][0]["episode_id"])
    expect(rows.first).to_contain_text(filtered["episodes"][0]["reason"])
    expect(page.locator('[data-testid="episode-row"]:not([data-status="infra_invalid"])')).to_have_count(0)

    page.get_by_test_id("page-next").click()
    second = get(server, f"{EVAL}/runs/{run_id}/episodes", status="infra_invalid", offset=PAGE_SIZE, limit=PAGE_SIZE)
    expect(info).to_have_text(f"101–{min(2 * PAGE_SIZE, second['total'])} of {second['total']}")
    expect(rows).to_have_count(len(second["episodes"]))
    expect(rows.first).to_have_attribute("data-episode-id", second["episodes"][0]["episode_id"])

    # two filters at once, without waiting between them: the page ends with the answer to both
    page.get_by_test_id("status-filter").select_option("failure")
    page.get_by_test_id("task-filter").select_option("Open")
    both = get(server, f"{EVAL}/runs/{run_id}/episodes", status="failure", task="Open", limit=PAGE_SIZE)
    expect(info).to_have_text(f"1–{min(PAGE_SIZE, both['total'])} of {both['total']}")
    expect(rows).to_have_count(len(both["episodes"]))
    expect(rows.first).to_have_attribute("data-episode-id", both["episodes"][0]["episode_id"])
    expect(page.locator('[data-testid="episode-row"]:not([data-status="failure"])')).to_have_count(0)

    page.get_by_test_id("task-filter").select_option("")
    page.get_by_test_id("status-filter").select_option("")
    page.get_by_test_id("page-next").click()
    page.get_by_test_id("page-next").click()
    everything = get(server, f"{EVAL}/runs/{run_id}/episodes", offset=2 * PAGE_SIZE, limit=PAGE_SIZE)
    expect(info).to_have_text("201–300 of 10000")
    expect(rows.first).to_have_attribute("data-episode-id", everything["episodes"][0]["episode_id"])
    rows.first.click()
    trace = get(server, f"{EVAL}/runs/{run_id}/trace", episode=everything["episodes"][0]["episode_id"])["events"]
    shown = page.get_by_test_id("episode-trace").get_by_test_id("trace-event")
    expect(shown).to_have_count(len(trace))
    expect(shown.first).to_have_css("display", "grid")  # its own layout, not the Live place's trace rows
    snap(page, tmp_path, "big-run")


def test_compare_two_runs(server: HyloServe, page: Page, tmp_path: Path) -> None:
    tasks = ["GoToLocal", "PickupLoc", "Open"]
    write_run(server.log_dir, "cmp-a", 600, tasks, seed=1, success_p=[0.8, 0.5, 0.3])
    write_run(server.log_dir, "cmp-b", 600, tasks, seed=2, success_p=[0.9, 0.7, 0.5])
    result = get(server, f"{EVAL}/compare", a="cmp-a", b="cmp-b")
    assert 0 < len(result["flips"]) < 600

    page.goto(server.url + "/#/runs")
    page.get_by_test_id("compare-link").click()
    page.get_by_test_id("compare-a").select_option("cmp-a")
    page.get_by_test_id("compare-b").select_option("cmp-b")
    shown = page.get_by_test_id("compare-result")
    expect(shown.get_by_test_id("p-value")).to_have_text(p_value(result["p_value"]))
    assert float(shown.get_by_test_id("p-value").get_attribute("data-value") or "nan") == result["p_value"]
    for key in ("both_success", "a_only", "b_only", "neither", "n_pairs", "abstained"):
        expect(shown.get_by_test_id(key.replace("_", "-"))).to_have_text(str(result[key]))
    expect(shown.get_by_test_id("rate-a")).to_have_text(pct(result["rate_a"]))
    expect(shown.get_by_test_id("rate-b")).to_have_text(pct(result["rate_b"]))
    expect(shown.get_by_test_id("difference")).to_have_text(points(result["difference"]))
    expect(shown.get_by_test_id("flip-count")).to_have_text(str(len(result["flips"])))
    flips = shown.get_by_test_id("flips").get_by_test_id("flip-row")
    expect(flips).to_have_count(min(200, len(result["flips"])))
    expect(flips.first).to_have_attribute("data-episode-id", result["flips"][0]["episode_id"])
    expect(flips.first).to_contain_text(result["flips"][0]["status_b"])
    snap(page, tmp_path, "compare")

    page.reload()  # the choice is in the address
    expect(page.get_by_test_id("compare-result").get_by_test_id("p-value")).to_have_text(p_value(result["p_value"]))


def refusal(server: HyloServe, request: dict[str, Any]) -> str:
    """The line the page shows for a start the server refuses: its status, then each problem as `field: message`
    (the server's own words, read from the API for the same request)."""
    answer = server.api.post(f"{EVAL}/start", json=request)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    if isinstance(detail, str):
        return f"422: {detail}"
    parts = []
    for item in detail:
        where = ".".join(str(part) for part in item.get("loc", []) if part != "body")
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "422: " + "; ".join(parts)


def test_a_refused_start_names_the_field(server: HyloServe, page: Page, tmp_path: Path) -> None:
    babyai = next(b for b in get(server, "/api/benchmarks")["benchmarks"] if b["name"] == "babyai")
    # what the form sends for what is filled in below (its other fields as they start)
    request = {
        "benchmark": "babyai",
        "split": babyai["default_split"],
        "tasks": ["GoToLocal"],
        "agent": "random",
        "episodes": 0,
        "seed": 0,
        "workers": 1,
        "video": 0,
        "run_id": "ui-refused",
    }
    open_runs(page, server)
    fill_start_form(page, run_id="ui-refused", agent="random", tasks=["GoToLocal"], episodes="0")
    page.get_by_test_id("start-submit").click()
    error = page.get_by_test_id("start-error")
    expect(error).to_have_text(refusal(server, request))
    expect(error).to_contain_text("episodes: ")

    page.get_by_test_id("start-episodes").fill("2")
    expect(page.get_by_test_id("start-import-allowed")).to_have_count(0)  # this server imports nothing
    page.get_by_test_id("start-agent").fill("os:system")
    page.get_by_test_id("start-submit").click()
    expect(error).to_have_text(refusal(server, {**request, "episodes": 2, "agent": "os:system"}))
    expect(error).to_contain_text("agent: ")
    expect(error).to_contain_text("hylo serve --allow-import")  # the way around it is the operator's
    snap(page, tmp_path, "refused")
    assert get(server, f"{EVAL}/queue")["jobs"] == []
    assert not (server.log_dir / "ui-refused").exists()


def test_cancel_a_running_job(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "ui-cancel"
    open_runs(page, server)
    fill_start_form(page, run_id=run_id, agent="random", tasks=["GoTo"], episodes="2000")
    page.get_by_test_id("start-submit").click()
    queued = page.get_by_test_id("queue").locator(f'[data-run-id="{run_id}"]')
    expect(queued).to_have_count(1)
    expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("running", timeout=LONG_MS)
    expect(queued.get_by_test_id(f"cancel-{run_id}")).to_be_enabled()
    snap(page, tmp_path, "runs-while-running")

    page.get_by_test_id(f"run-link-{run_id}").click()
    expect(page.get_by_test_id("run-job-state")).to_have_text("running")
    snap(page, tmp_path, "running")
    page.get_by_test_id(f"cancel-{run_id}").click()
    expect(page.get_by_test_id("run-status")).to_have_text("cancelled", timeout=LONG_MS)
    expect(page.get_by_test_id("run-job-state")).to_have_count(0)
    detail = get(server, f"{EVAL}/runs/{run_id}")
    assert detail["run"]["status"] == "cancelled" and detail["job"] is None
    assert detail["run"]["n_done"] < 2000

    page.get_by_test_id("back-to-runs").click()
    expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("cancelled")
    expect(page.get_by_test_id("queue-empty")).to_be_visible()


def test_cancel_from_the_queue(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "ui-cancel-queue"
    open_runs(page, server)
    fill_start_form(page, run_id=run_id, agent="random", tasks=["Unlock"], episodes="2000")
    page.get_by_test_id("start-submit").click()
    row = page.get_by_test_id("queue").locator(f'[data-run-id="{run_id}"]')
    expect(row).to_have_count(1)
    job_id = (row.get_attribute("data-testid") or "").removeprefix("queue-row-")
    row.get_by_test_id(f"cancel-{run_id}").click()
    expect(row).to_have_count(0, timeout=LONG_MS)
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    assert get(server, f"{EVAL}/status/{job_id}")["state"] == "cancelled"


def wait_done(server: HyloServe, job_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        status: dict[str, Any] = get(server, f"{EVAL}/status/{job_id}")
        if status["state"] not in ("queued", "running"):
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"job {job_id} did not end within {timeout_s} s: {status}")
        time.sleep(0.2)


def test_an_episode_video_plays(server: HyloServe, page: Page, tmp_path: Path) -> None:
    run_id = "ui-video"
    request = {"benchmark": "babyai", "agent": "expert", "tasks": ["GoToLocal"], "episodes": 2, "video": 1}
    started = server.api.post(f"{EVAL}/start", json={**request, "run_id": run_id})
    assert started.status_code == 200, started.text
    assert wait_done(server, started.json()["job_id"])["state"] == "done"
    episodes = get(server, f"{EVAL}/runs/{run_id}/episodes")["episodes"]
    with_video = [e["episode_id"] for e in episodes if e["video"]]
    assert len(with_video) == 1, "one video per task was asked for"

    page.goto(server.url + f"/#/runs/{run_id}")
    rows = page.get_by_test_id("episode-row")
    expect(rows).to_have_count(2)
    offered = rows.filter(has=page.get_by_test_id("episode-has-video"))
    expect(offered).to_have_count(1)
    expect(offered).to_have_attribute("data-episode-id", with_video[0])
    offered.click()
    video = page.get_by_test_id("episode-video")
    expect(video).to_be_visible()
    page.wait_for_function("() => document.querySelector('[data-testid=episode-video]').readyState > 0")
    src = video.get_attribute("src") or ""
    token = quote(server.token or "", safe="")  # a <video> sends no header: the token rides in its URL
    assert src.endswith(f"/video?episode={quote(with_video[0], safe='')}&access_token={token}"), src
    answer = server.api.get(src)
    assert answer.status_code == 200 and answer.headers["content-type"] == "video/mp4"
    snap(page, tmp_path, "video")

    without = next(e["episode_id"] for e in episodes if not e["video"])
    rows.filter(has_not=page.get_by_test_id("episode-has-video")).click()
    expect(page.get_by_test_id("episode-panel")).to_have_attribute("data-episode-id", without)
    expect(page.get_by_test_id("episode-video")).to_have_count(0)


def test_env_options_reach_the_run_and_a_refused_one_is_named(server: HyloServe, page: Page, tmp_path: Path) -> None:
    pytest.importorskip("gym_pusht")
    open_runs(page, server)
    fill_start_form(page, run_id="ui-env-refused", agent="random", tasks=["GoToLocal"], episodes="1")
    options = page.get_by_test_id("start-env-args")
    error = page.get_by_test_id("start-error")
    options.fill('{"obs_type": ')
    page.get_by_test_id("start-submit").click()
    expect(error).to_have_text('env_args: not valid JSON (write an object such as {"obs_type": "pixels"})')
    options.fill('{"bogus": 1}')
    page.get_by_test_id("start-submit").click()
    expect(error).to_contain_text("env_args: ")
    expect(error).to_contain_text("option 'bogus' is not accepted over HTTP")
    assert get(server, f"{EVAL}/queue")["jobs"] == []

    run_id = "ui-pusht-pixels"
    page.get_by_test_id("start-benchmark").select_option("gym:gym_pusht/PushT-v0")
    page.get_by_test_id("start-run-id").fill(run_id)
    page.get_by_test_id("start-max-steps").fill("3")
    options.fill('{"obs_type": "pixels_agent_pos"}')
    page.get_by_test_id("start-submit").click()
    expect(page.get_by_test_id("start-run-link")).to_have_text(run_id)
    expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("complete", timeout=LONG_MS)
    detail = get(server, f"{EVAL}/runs/{run_id}")
    assert detail["run"]["spec"]["env_args"] == {"obs_type": "pixels_agent_pos"}
    (episode,) = get(server, f"{EVAL}/runs/{run_id}/episodes")["episodes"]
    trace = get(server, f"{EVAL}/runs/{run_id}/trace", episode=episode["episode_id"])["events"]
    first = next(event["obs"] for event in trace if event["event"] == "observation")
    # the option reached the env: its state is the agent's position alone (the default obs_type's has 5 values);
    # `random` declares that it reads no camera, so it is given none
    assert set(first) == {"state"} and len(first["state"]) == 2


def badge_colour(page: Page, test_id: str) -> str:
    return str(page.get_by_test_id(test_id).evaluate("e => getComputedStyle(e).backgroundColor"))


def test_a_run_whose_episodes_all_ended_in_error_is_not_a_green_complete(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    tasks = ["GoToLocal"]
    write_run(server.log_dir, "health-fine", 20, tasks, seed=1, abstentions=False)
    write_run(server.log_dir, "health-crashed", 20, tasks, seed=1, statuses=[EpisodeStatus.ERROR])
    mostly = [EpisodeStatus.ERROR, EpisodeStatus.INFRA_INVALID, EpisodeStatus.SUCCESS]
    write_run(server.log_dir, "health-mostly", 30, tasks, seed=1, statuses=mostly)
    runs = {run["run_id"]: run for run in get(server, f"{EVAL}/runs")["runs"]}
    assert [runs[r]["status"] for r in ("health-fine", "health-crashed", "health-mostly")] == ["complete"] * 3
    assert [runs[r]["health"] for r in ("health-fine", "health-crashed", "health-mostly")] == [
        "ok",
        "all_errors",
        "mostly_errors",
    ]

    open_runs(page, server)
    expect(page.get_by_test_id("run-status-health-fine")).to_have_text("complete")
    expect(page.get_by_test_id("run-status-health-fine-health")).to_have_count(0)
    green = badge_colour(page, "run-status-health-fine")
    for run_id, words in (("health-crashed", "all errors"), ("health-mostly", "mostly errors")):
        expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("complete")
        expect(page.get_by_test_id(f"run-status-{run_id}-health")).to_have_text(words)
        assert badge_colour(page, f"run-status-{run_id}") != green, f"{run_id} shows as a green complete"
    expect(page.get_by_test_id("run-status-health-crashed-health")).to_have_attribute(
        "title", "error 20 of 20 episodes"
    )
    expect(page.get_by_test_id("run-success-health-crashed")).to_have_text("—")  # nothing was scored
    fine = runs["health-fine"]
    expect(page.get_by_test_id("run-success-health-fine")).to_have_text(
        pct(fine["success_rate"]) + interval(fine["success_ci"])
    )
    snap(page, tmp_path, "health-list")

    page.get_by_test_id("run-link-health-crashed").click()
    expect(page.get_by_test_id("run-status-health")).to_have_text("all errors")
    assert badge_colour(page, "run-status") != green


def test_two_runs_that_differ_only_in_an_agent_argument_are_told_apart(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    for gain in (10, 20):
        write_run(server.log_dir, f"gain-{gain}", 10, ["GoToLocal"], seed=gain, agent_args={"gain": gain, "mode": "p"})
    open_runs(page, server)
    expect(page.get_by_test_id("run-args-gain-10")).to_have_text("gain=10, mode=p")
    expect(page.get_by_test_id("run-args-gain-20")).to_have_text("gain=20, mode=p")
    expect(page.get_by_test_id("run-args-health-fine")).to_have_count(0)  # a run without arguments shows none
    snap(page, tmp_path, "args-list")

    page.get_by_test_id("run-link-gain-20").click()
    expect(page.get_by_test_id("run-agent")).to_have_text("random")
    expect(page.get_by_test_id("run-agent-args")).to_have_text("gain=20, mode=p")
    expect(page.get_by_test_id("run-digest")).to_have_text(get(server, f"{EVAL}/runs/gain-20")["run"]["digest"])
    page.goto(server.url + "/#/runs/health-fine")
    expect(page.get_by_test_id("run-agent-args")).to_have_text("none")


def test_the_compare_page_tests_each_task_with_holm_and_a_flip_opens_its_episode(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    tasks = ["GoToLocal", "PickupLoc", "Open"]
    write_run(server.log_dir, "tasks-a", 300, tasks, seed=11, success_p=[0.2, 0.5, 0.5])
    write_run(server.log_dir, "tasks-b", 300, tasks, seed=12, success_p=[0.9, 0.5, 0.55])
    result = get(server, f"{EVAL}/compare", a="tasks-a", b="tasks-b")
    per_task = result["per_task"]
    assert sorted(per_task) == sorted(tasks)
    assert per_task["GoToLocal"]["p_holm"] < 0.05 < per_task["PickupLoc"]["p_holm"]
    assert any(t["p_holm"] > t["p_value"] for t in per_task.values()), "Holm adjusts some p-value upwards"

    page.goto(server.url + "/#/compare?a=tasks-a&b=tasks-b")
    table = page.get_by_test_id("per-task-table")
    expect(table.locator("tbody tr")).to_have_count(3)
    for task, t in per_task.items():
        row = table.get_by_test_id(f"per-task-row-{task}")
        expect(row.get_by_test_id("pt-pairs")).to_have_text(str(t["n_pairs"]))
        expect(row.get_by_test_id("pt-discordant")).to_have_text(f"{t['a_only']} / {t['b_only']}")
        expect(row.get_by_test_id("pt-rate-a")).to_have_text(pct(t["rate_a"]))
        expect(row.get_by_test_id("pt-rate-b")).to_have_text(pct(t["rate_b"]))
        expect(row.get_by_test_id("pt-difference")).to_have_text(points(t["difference"]))
        expect(row.get_by_test_id("pt-p")).to_have_text(p_value(t["p_value"]))
        expect(row.get_by_test_id("pt-p-holm")).to_have_text(p_value(t["p_holm"]))
    expect(table.get_by_test_id("per-task-row-GoToLocal").get_by_test_id("pt-p-holm")).to_have_class(
        re.compile("significant")
    )
    expect(table.get_by_test_id("per-task-row-PickupLoc").get_by_test_id("pt-p-holm")).not_to_have_class(
        re.compile("significant")
    )
    snap(page, tmp_path, "per-task")

    flip = result["flips"][3]
    row = page.locator(f'[data-testid=flip-row][data-episode-id="{flip["episode_id"]}"]')
    row.get_by_test_id("flip-link-b").click()
    expect(page.get_by_test_id("run-id")).to_have_text("tasks-b")
    panel = page.get_by_test_id("episode-panel")
    expect(panel).to_have_attribute("data-episode-id", flip["episode_id"])
    expect(panel).to_contain_text(flip["status_b"])
    expect(panel).to_be_in_viewport()  # below the run's figures: the page scrolls to it
    expect(panel.get_by_test_id("trace-event").first).to_be_visible()
    # what is above it grows later (its figures loading on a busy machine): the episode stays in view
    page.get_by_test_id("run-page").locator(".crumbs").evaluate("crumbs => { crumbs.style.minHeight = '3000px'; }")
    expect(panel).to_be_in_viewport()
    snap(page, tmp_path, "flip-episode")

    page.go_back()
    page.locator(f'[data-testid=flip-row][data-episode-id="{flip["episode_id"]}"]').get_by_test_id(
        "flip-link-a"
    ).click()
    expect(page.get_by_test_id("run-id")).to_have_text("tasks-a")
    expect(page.get_by_test_id("episode-panel")).to_contain_text(flip["status_a"])
    page.reload()  # the open episode is in the address
    expect(page.get_by_test_id("episode-panel")).to_have_attribute("data-episode-id", flip["episode_id"])
    page.get_by_test_id("episode-close").click()
    expect(page.get_by_test_id("episode-panel")).to_have_count(0)
    assert "episode=" not in page.url

    missing = server.api.get(f"{EVAL}/runs/tasks-a/episode", params={"episode": "babyai/default/Nope/0001@s0"})
    assert missing.status_code == 404 and "Nope" in missing.json()["detail"]
